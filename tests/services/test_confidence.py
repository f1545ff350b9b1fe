"""The confidence scorer on hand-computed fixtures and its edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from services.domain import Hit, RetrievalResult
from services.errors import InputError
from services.scoring.confidence import components, hit_relevance, overall, raw_metrics, score_retrieval
from services.scoring.weights import COMPONENTS, DEFAULT_PROFILE, WeightsProfile


def _hit(rank, doc, *, dense=None, idf=None, bm25_rank=None, dense_rank=None, rerank=None, text="", fused=None):
    return Hit(chunk_id=rank, document_id=doc, external_id=f"d{doc}", title=f"Doc {doc}", text=text, rank=rank,
               fused_score=fused if fused is not None else 1.0 / (60 + rank), bm25_score=None if idf is None else 5.0,
               bm25_rank=bm25_rank, dense_similarity=dense, dense_rank=dense_rank, rerank_score=rerank,
               matched_idf_share=idf)


HAND = (
    _hit(1, 1, dense=0.70, idf=0.8, bm25_rank=1, dense_rank=1, text="Alarm SRVO-062 means the pulsecoder lost data."),
    _hit(2, 1, dense=0.45, idf=0.5, bm25_rank=3, dense_rank=2, text="Replace the battery."),
    _hit(3, 2, dense=0.20, dense_rank=3, text="Unrelated text."),
)


def test_hand_computed_fixture():
    raw = raw_metrics(HAND, ("srvo-062",))
    assert [round(r, 6) for r in raw["relevance"]] == [0.9, 0.5, 0.0]
    assert raw["top_score"] == pytest.approx(0.9)
    assert raw["score_gap"] == pytest.approx(0.4)
    assert raw["score_spread"] == pytest.approx(math.sqrt(0.406667 / 3), abs=1e-5)
    assert raw["consensus_count"] == 1
    assert raw["bm25_dense_agreement"] == pytest.approx(2 / 3)
    assert raw["document_diversity"] == pytest.approx(2 / 3)
    assert raw["entity_support"] is True and raw["linked_entities"] == ["srvo-062"]
    assert raw["reranker_impact"] is None

    vector = components(HAND, ("srvo-062",))
    expected = [0.9, 1.0, 1 / 3, 2 / 3, 0.0, 1.0, 0.5]
    assert vector == pytest.approx(expected, abs=1e-6)
    total = 0.3 * 0.9 + 0.2 + 0.15 / 3 + 0.15 * expected[3] + 0 + 0.05 + 0.05 * 0.5
    assert overall(vector, DEFAULT_PROFILE) == pytest.approx(total)
    assert overall(vector, DEFAULT_PROFILE) == pytest.approx(0.695) and DEFAULT_PROFILE.level(overall(vector, DEFAULT_PROFILE)) == "LOW"


def test_breakdown_contributions_sum_to_total_and_flag():
    result = RetrievalResult(query="What is SRVO-062?", mode="hybrid", hits=HAND, query_entities=("srvo-062",))
    breakdown = score_retrieval(result, DEFAULT_PROFILE)
    assert sum(breakdown.contributions.values()) == pytest.approx(breakdown.overall)
    assert list(breakdown.components) == list(COMPONENTS)
    assert breakdown.level == "LOW" and breakdown.should_flag
    assert breakdown.interpretation.startswith("LOW")
    assert any("No reranker" in r for r in breakdown.recommendations)


def test_no_hits_is_very_low_with_advice():
    breakdown = score_retrieval(RetrievalResult(query="x", mode="hybrid", hits=()), DEFAULT_PROFILE)
    assert breakdown.overall == 0.0 and breakdown.level == "VERY LOW" and breakdown.should_flag
    assert any(r.startswith("No results") for r in breakdown.recommendations)


def test_one_hit_has_its_own_gap_no_spread_single_source():
    raw = raw_metrics(HAND[:1], ())
    vector = components(HAND[:1], ())
    assert raw["score_gap"] == pytest.approx(0.9)
    assert vector[COMPONENTS.index("low_spread")] == 1.0
    assert vector[COMPONENTS.index("low_diversity")] == 1.0
    assert vector[COMPONENTS.index("entity_support")] == 0.0  # no entities in the query


def test_two_tied_hits_have_zero_gap():
    tied = (_hit(1, 1, dense=0.5, dense_rank=1, bm25_rank=2, idf=0.5), _hit(2, 2, dense=0.5, dense_rank=2, bm25_rank=1, idf=0.5))
    raw = raw_metrics(tied, ())
    assert raw["score_gap"] == 0.0 and raw["score_spread"] == 0.0
    assert raw["bm25_dense_agreement"] == 1.0


def test_missing_leg_and_single_leg_modes():
    dense_only_hits = tuple(_hit(i, i, dense=0.6, dense_rank=i) for i in (1, 2, 3))
    assert raw_metrics(dense_only_hits, (), mode="hybrid")["bm25_dense_agreement"] == 0.0
    assert raw_metrics(dense_only_hits, (), mode="dense")["bm25_dense_agreement"] == 0.5


def test_reranker_score_drives_relevance_and_impact():
    reranked = (_hit(1, 1, rerank=2.0, fused=0.01), _hit(2, 2, rerank=0.0, fused=0.03), _hit(3, 3, rerank=-2.0, fused=0.02))
    assert hit_relevance(reranked[0]) == pytest.approx(1 / (1 + math.exp(-2)))
    raw = raw_metrics(reranked, ())
    # rerank order 1,2,3 vs fused order 3,1,2 -> Spearman -0.5 -> impact 1.5
    assert raw["reranker_impact"] == pytest.approx(1.5)


def test_weights_are_normalized_so_totals_stay_in_unit_range():
    profile = WeightsProfile(name="t", version=2, weights={c: float(i + 1) for i, c in enumerate(COMPONENTS)})
    assert profile.weight_vector().sum() == pytest.approx(1.0)
    assert overall(np.ones(len(COMPONENTS)), profile) == pytest.approx(1.0)
    assert overall(np.eye(len(COMPONENTS))[-1], profile) == pytest.approx(7 / 28)  # the last weight's share


@pytest.mark.parametrize(
    "kwargs",
    [
        {"weights": {"top_score": 1.0}},
        {"weights": {c: -1.0 for c in COMPONENTS}},
        {"weights": {c: 0.0 for c in COMPONENTS}},
        {"high": 0.5, "medium": 0.7},
    ],
)
def test_invalid_profiles_are_rejected(kwargs):
    with pytest.raises(InputError):
        WeightsProfile(**kwargs)


def test_level_boundaries_are_inclusive():
    assert [DEFAULT_PROFILE.level(s) for s in (0.85, 0.8499, 0.70, 0.50, 0.4999)] == [
        "HIGH", "MEDIUM", "MEDIUM", "LOW", "VERY LOW"]
    profile = WeightsProfile.from_dict(DEFAULT_PROFILE.to_dict())
    assert profile == DEFAULT_PROFILE
