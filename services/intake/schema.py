"""One record from another RAG system: the question, its answer, the contexts it retrieved.

The models are the documented schema (`record_json_schema()` is what the README and
`workbench import --schema` print). They reject unknown fields, so a misspelt field is an
error naming it rather than data silently dropped, and every string must be storable
(PostgreSQL holds neither NUL nor unpaired surrogates).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    JsonValue,
    Strict,
    ValidationError,
    field_validator,
)

from services.retrieval.text import unstorable_char

# The question is bounded like the workbench's own queries (Settings.max_query_chars).
MAX_QUESTION_CHARS = 2_000
MAX_ANSWER_CHARS = 20_000
MAX_CONTEXT_CHARS = 20_000
MAX_CONTEXTS = 200
MAX_ID_CHARS = 200  # trace ids, document ids and metadata names
MAX_SOURCE_CHARS = 2_000
# Far above any retriever's scale (BM25 reaches tens, logits tens, distances thousands), far
# below the float range: 1e308 is a typo or an attack, and one such score swung CRAG's verdict.
MAX_ABS_SCORE = 1_000_000.0


def _storable(value: str) -> str:
    if (problem := unstorable_char(value)) is not None:
        raise ValueError(f"contains {problem}")
    return value


_EMPTY = "must not be empty or only whitespace"


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError(_EMPTY)
    return value


def _storable_json(value: Any) -> Any:
    """Every string inside free-form metadata, keys included, must be storable too."""
    if isinstance(value, str):
        _storable(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            _storable(key)
            _storable_json(item)
    elif isinstance(value, list):
        for item in value:
            _storable_json(item)
    return value


StorableText = Annotated[str, AfterValidator(_storable)]
# JSON numbers only: "3" and true are not ranks, "0.8" is not a score (a sender's bug, not data).
Rank = Annotated[int, Strict()]
Score = Annotated[float, Strict(), Field(ge=-MAX_ABS_SCORE, le=MAX_ABS_SCORE)]
RequiredText = Annotated[str, AfterValidator(_not_blank), AfterValidator(_storable)]


class _Strict(BaseModel):
    # Unknown fields are errors; NaN and infinity are not scores; records are values.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class ExternalContext(_Strict):
    """One retrieved passage as the source system gave it to its generator."""

    text: RequiredText = Field(min_length=1, max_length=MAX_CONTEXT_CHARS, description="The passage text the answer could draw on.")
    document_id: StorableText | None = Field(
        None, max_length=MAX_ID_CHARS,
        description="The document's id in the source system; when it matches a document in the workbench's "
                    "corpus (its external id), the assessment can use that corpus's statistics.")
    source: StorableText | None = Field(None, max_length=MAX_SOURCE_CHARS, description="Where the passage came from (path, URL, title).")
    rank: Rank | None = Field(None, ge=1, le=2**31 - 1, description="1-based position in the retrieved list (an integer).")
    score: Score | None = Field(None, description="The retriever's final score for this passage (any scale, within ±1e6).")
    bm25_score: Score | None = Field(None, ge=0, description="Lexical (BM25) score, when the retriever computed one.")
    dense_similarity: Score | None = Field(None, ge=-1, le=1, description="Cosine similarity of query and passage embeddings.")
    rerank_score: Score | None = Field(None, description="Cross-encoder or other reranker score (within ±1e6).")


def _text_alone(value: Any) -> Any:
    """A context given as its text alone (RAGAS's retrieved_contexts, most tracing SDKs' documents)."""
    if isinstance(value, str):
        return {"text": value}
    if not isinstance(value, dict | ExternalContext):
        raise ValueError('a context is its text (a string) or an object with a "text" field')
    return value


# A context is an object, or its text alone: "contexts": ["passage one", {"text": "passage two", "rank": 2}].
GivenContext = Annotated[ExternalContext, BeforeValidator(_text_alone, json_schema_input_type=ExternalContext | str)]


class RunMetadata(_Strict):
    """Who and what produced the answer; all optional."""

    app: StorableText | None = Field(None, max_length=MAX_ID_CHARS, description="The application that answered.")
    model: StorableText | None = Field(None, max_length=MAX_ID_CHARS, description="The generating model.")
    user: StorableText | None = Field(None, max_length=MAX_ID_CHARS, description="The end user (an id, not personal data).")
    timestamp: datetime | None = Field(None, description="When the answer was produced (ISO 8601; UTC when no offset is given).")
    extra: dict[str, JsonValue] = Field(default_factory=dict, description="Anything else worth keeping, as JSON.")

    @field_validator("timestamp")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value

    @field_validator("extra")
    @classmethod
    def _storable_extra(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _storable_json(value)  # type: ignore[no-any-return]


class ExternalRun(_Strict):
    """One answered question from another RAG system: what the workbench assesses and reviews."""

    question: RequiredText = Field(min_length=1, max_length=MAX_QUESTION_CHARS, description="The user's question.")
    answer: StorableText = Field(max_length=MAX_ANSWER_CHARS, description="The answer the system gave (may be empty: it abstained).")
    contexts: list[GivenContext] = Field(
        default_factory=list, max_length=MAX_CONTEXTS,
        description="The retrieved passages, best first (may be empty: nothing was retrieved); each an object, "
                    "or its text alone as a string.")
    reference: StorableText | None = Field(
        None, max_length=MAX_ANSWER_CHARS,
        description="A reference (ground-truth) answer from your evaluation set; kept with the run and shown beside the answer.")
    trace_id: RequiredText | None = Field(
        None, min_length=1, max_length=MAX_ID_CHARS,
        description="The source system's id for this answer; sending the same trace id again is a no-op.")
    metadata: RunMetadata = Field(default_factory=lambda: RunMetadata.model_validate({}), description="Who and what produced the answer.")

    def to_payload(self) -> dict[str, Any]:
        """The JSON stored in run_intake.payload (unset optional fields left out)."""
        return self.model_dump(mode="json", exclude_none=True)


def describe_validation_error(exc: ValidationError, *, limit: int = 5) -> str:
    """The first few problems, each naming its field by path: 'contexts.0.text: required field missing'."""
    parts = []
    for error in exc.errors()[:limit]:
        where = ".".join(str(part) for part in error["loc"]) or "record"
        empty = error["type"] == "string_too_short" and error.get("ctx", {}).get("min_length") == 1
        message = _EMPTY if empty else _MESSAGES.get(error["type"], error["msg"]).removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    more = len(exc.errors()) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


_MESSAGES = {
    "missing": "required field missing",
    "extra_forbidden": "unknown field (check its spelling against the schema: workbench import --schema)",
}


def record_json_schema() -> dict[str, Any]:
    """The JSON Schema of one record (draft 2020-12), as documented in the README."""
    schema = ExternalRun.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["description"] = (
        "One answered question from another RAG system. JSONL: one object per line. CSV and Parquet: one row per "
        "record with columns question, answer, trace_id, contexts (a JSON array of context objects or texts) and metadata "
        "(a JSON object), or app, model, user, timestamp as columns of their own.")
    return schema
