"""The record schema: strict, storable, documented."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from services.intake.schema import ExternalRun, describe_validation_error, record_json_schema


def _reason(data: dict) -> str:  # type: ignore[type-arg]
    with pytest.raises(ValidationError) as caught:
        ExternalRun.model_validate(data)
    return describe_validation_error(caught.value)


def test_a_full_record_validates_and_keeps_every_field():
    run = ExternalRun.model_validate({
        "question": "How do I reset SRVO-062?", "answer": "Replace the battery, then remaster.",
        "trace_id": "t-1",
        "contexts": [{"text": "SRVO-062 means the pulsecoder battery is low.", "document_id": "srvo-062.md",
                      "source": "manuals/srvo-062.md", "rank": 1, "score": 0.9, "bm25_score": 7.5,
                      "dense_similarity": 0.71, "rerank_score": 3.2}],
        "metadata": {"app": "support-bot", "model": "gpt-x", "user": "u-7", "timestamp": "2026-01-02T03:04:05",
                     "extra": {"latency_ms": 812, "tags": ["prod", "eu"]}},
    })
    assert run.contexts[0].bm25_score == 7.5 and run.contexts[0].rank == 1
    assert run.metadata.timestamp == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)  # naive is taken as UTC
    payload = run.to_payload()
    assert payload["metadata"]["timestamp"] == "2026-01-02T03:04:05Z"
    assert ExternalRun.model_validate(payload) == run  # the stored payload reads back as the same record


def test_contexts_and_metadata_are_optional_and_the_answer_may_be_empty():
    run = ExternalRun.model_validate({"question": "Anything?", "answer": ""})
    assert run.contexts == [] and run.trace_id is None and run.metadata.extra == {}
    assert run.to_payload() == {"question": "Anything?", "answer": "", "contexts": [], "metadata": {"extra": {}}}


def test_a_context_may_be_its_text_alone():
    """As RAGAS's retrieved_contexts and most tracing SDKs send them; stored as the object form."""
    run = ExternalRun.model_validate({"question": "q", "answer": "a",
                                      "contexts": ["First passage.", {"text": "Second passage.", "rank": 2}]})
    assert [(c.text, c.rank) for c in run.contexts] == [("First passage.", None), ("Second passage.", 2)]
    assert run.to_payload()["contexts"] == [{"text": "First passage."}, {"text": "Second passage.", "rank": 2}]
    items = record_json_schema()["properties"]["contexts"]["items"]["anyOf"]
    assert {"type": "string"} in items and {"$ref": "#/$defs/ExternalContext"} in items


@pytest.mark.parametrize(("data", "expected"), [
    ({"question": "q", "answer": "a", "contexts": [3]},
     'contexts.0: a context is its text (a string) or an object with a "text" field'),
    ({"question": "q", "answer": "a", "contexts": ["  "]}, "contexts.0.text: must not be empty or only whitespace"),
    ({"question": "q", "answer": "a", "contexts": ["bad\x00"]}, "contexts.0.text: contains a NUL"),
    ({"question": "q", "answer": "a", "contexts": [{"txt": "x"}]},
     "contexts.0.text: required field missing; contexts.0.txt: unknown field"),
    ({"question": "q", "answr": "a"}, "answer: required field missing; answr: unknown field"),
    ({"question": "   ", "answer": "a"}, "question: must not be empty or only whitespace"),
    ({"question": "q", "answer": 3}, "answer: Input should be a valid string"),
    ({"question": "q", "answer": "a", "contexts": [{"text": "t", "score": float("nan")}]},
     "contexts.0.score: Input should be a finite number"),
    ({"question": "q", "answer": "a", "contexts": [{"text": "t", "rank": 0}]},
     "contexts.0.rank: Input should be greater than or equal to 1"),
    ({"question": "q", "answer": "a", "contexts": [{"text": "t", "dense_similarity": 1.5}]}, "contexts.0.dense_similarity"),
    ({"question": "q", "answer": "a\x00b"}, "answer: contains a NUL character"),
    ({"question": "q", "answer": "a", "metadata": {"extra": {"k": ["fine", "bad\x00"]}}}, "metadata.extra: contains a NUL"),
    ({"question": "q", "answer": "a", "trace_id": ""}, "trace_id:"),
    ({"question": "q" * 2001, "answer": "a"}, "question: String should have at most 2000 characters"),
    ({"question": "q", "answer": "a", "metadata": {"timestamp": "yesterday"}}, "metadata.timestamp:"),
])
def test_a_bad_record_is_rejected_naming_the_field(data, expected):
    assert expected in _reason(data)


def test_the_json_schema_documents_the_required_fields_and_forbids_others():
    schema = record_json_schema()
    assert schema["required"] == ["question", "answer"]
    assert schema["additionalProperties"] is False
    context = schema["$defs"]["ExternalContext"]
    assert context["required"] == ["text"] and context["additionalProperties"] is False
    assert set(context["properties"]) == {"text", "document_id", "source", "rank", "score", "bm25_score",
                                          "dense_similarity", "rerank_score"}
    assert set(schema["$defs"]["RunMetadata"]["properties"]) == {"app", "model", "user", "timestamp", "extra"}
    assert all(p.get("description") for p in context["properties"].values())
