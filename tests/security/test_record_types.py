"""Ranks are integers and scores finite, bounded numbers in a pushed record (issue 28): `rank: "3"`,
`rank: true` and a score of 1e308 were accepted, and an inflated score moved CRAG's verdict."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from services.intake.schema import MAX_ABS_SCORE, ExternalRun

RECORD = {"question": "How do I clear SRVO-062?", "answer": "Replace the battery [1]."}


def _with_context(**fields: object) -> str:
    return json.dumps({**RECORD, "contexts": [{"text": "SRVO-062: the battery is low.", **fields}]})


@pytest.mark.parametrize("fields", [
    {"rank": "3"}, {"rank": True}, {"rank": 3.0}, {"rank": 0}, {"rank": 2**40},
    {"score": 1e308}, {"score": -1e308}, {"rerank_score": 1e7}, {"bm25_score": MAX_ABS_SCORE * 2},
    {"score": "0.8"}, {"score": True}, {"dense_similarity": 1.5},
], ids=str)
def test_a_rank_that_is_not_an_integer_or_a_score_out_of_bounds_is_refused(fields):  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError) as refused:
        ExternalRun.model_validate_json(_with_context(**fields))
    (field,) = fields
    assert [e["loc"] for e in refused.value.errors()] == [("contexts", 0, field)]


def test_nan_and_infinity_are_not_scores():
    for literal in ("NaN", "Infinity", "-Infinity"):
        body = _with_context(score=0.5).replace("0.5", literal)
        with pytest.raises(ValidationError):
            ExternalRun.model_validate_json(body)


def test_integer_ranks_and_scores_on_any_sane_scale_are_kept():
    run = ExternalRun.model_validate_json(_with_context(rank=3, score=2, bm25_score=41.7, rerank_score=-12.5,
                                                       dense_similarity=-0.2))
    (context,) = run.contexts
    assert (context.rank, context.score, context.bm25_score, context.rerank_score) == (3, 2.0, 41.7, -12.5)
