"""Adaptive retrieval (seed 001): stopping rule, entity blend, stop reasons."""

from __future__ import annotations

import pytest

from services.errors import InputError
from services.retrieval.adaptive import TASK_STRATEGIES, accumulated_confidence, adaptive_cutoff, retrieve_adaptive


def test_similarity_only_confidence_is_the_mean():
    assert accumulated_confidence([0.9, 0.5], ["a", "b"], None) == pytest.approx(0.7)


def test_entity_coverage_blends_sixty_forty():
    value = accumulated_confidence([0.8], ["alarm SRVO-062 cleared"], ["srvo-062", "dcs"])
    assert value == pytest.approx(0.6 * 0.8 + 0.4 * 0.5)


def test_stops_at_threshold_once_min_k_is_reached():
    sims, texts = [0.95, 0.9, 0.3, 0.2], ["a", "b", "c", "d"]
    assert adaptive_cutoff(sims, texts, min_k=1, max_k=4, confidence_threshold=0.7, query_entities=None) == (
        1, pytest.approx(0.95), "threshold")
    count, _, reason = adaptive_cutoff(sims, texts, min_k=2, max_k=4, confidence_threshold=0.7, query_entities=None)
    assert (count, reason) == (2, "threshold")


def test_stops_at_max_k_when_confidence_stays_low():
    count, confidence, reason = adaptive_cutoff([0.5, 0.4, 0.3], ["a", "b", "c"], min_k=1, max_k=2,
                                                confidence_threshold=0.7, query_entities=None)
    assert (count, reason) == (2, "max_k") and confidence == pytest.approx(0.45)


def test_no_candidates_is_no_results():
    assert adaptive_cutoff([], [], min_k=1, max_k=8, confidence_threshold=0.7, query_entities=None) == (0, 0.0, "no_results")


def test_strategy_table_matches_the_design():
    assert TASK_STRATEGIES["explanation"].confidence_threshold == 0.8 and TASK_STRATEGIES["explanation"].max_k == 4
    assert TASK_STRATEGIES["architecture"].min_k == 2 and TASK_STRATEGIES["general"].max_k == 5


def test_retrieve_adaptive_on_the_store(squad_collection):
    result = retrieve_adaptive("When were the Normans in Normandy?", min_k=1, max_k=8, confidence_threshold=0.99,
                               collection=squad_collection)
    assert result.stop_reason == "max_k" and result.chunks_retrieved == len(result.results) <= 8
    sims = [h.dense_similarity for h in result.results]
    assert sims == sorted(sims, reverse=True) and min(sims) >= 0.2
    easy = retrieve_adaptive("When were the Normans in Normandy?", confidence_threshold=0.3, collection=squad_collection)
    assert easy.stop_reason == "threshold" and easy.chunks_retrieved == 1
    nothing = retrieve_adaptive("zxqv wplk", collection="no-such-collection")
    assert nothing.stop_reason == "no_results" and nothing.results == ()
    with pytest.raises(InputError):
        retrieve_adaptive("x", min_k=3, max_k=2)
