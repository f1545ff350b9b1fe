"""Adaptive retrieval (seed 001): stopping rule, entity blend, stop reasons, strategies by question kind."""

from __future__ import annotations

import pytest

from services.domain import Hit
from services.errors import InputError
from services.retrieval.adaptive import (
    STOP_REASONS,
    STRATEGIES,
    AdaptiveStrategy,
    accumulated_confidence,
    adaptive_cut,
    cut_for_question,
    question_kind,
    retrieve_adaptive,
)


def hits(*similarities: float | None, texts: tuple[str, ...] = ()) -> list[Hit]:
    return [Hit(i + 1, i + 1, f"doc{i + 1}", f"doc{i + 1}", texts[i] if texts else f"chunk {i + 1}", i + 1,
                1.0 / (i + 1), dense_similarity=s) for i, s in enumerate(similarities)]


def test_similarity_only_confidence_is_the_mean():
    assert accumulated_confidence([0.9, 0.5], ["a", "b"], None) == pytest.approx(0.7)


def test_entity_coverage_blends_sixty_forty():
    value = accumulated_confidence([0.8], ["alarm SRVO-062 cleared"], ["srvo-062", "dcs"])
    assert value == pytest.approx(0.6 * 0.8 + 0.4 * 0.5)


def test_stops_at_threshold_once_min_k_is_reached():
    ranked = hits(0.95, 0.9, 0.3, 0.2)
    first = adaptive_cut(ranked, AdaptiveStrategy(0.7, min_k=1, max_k=4))
    assert (len(first.hits), first.stop_reason, first.confidence) == (1, "threshold", pytest.approx(0.95))
    two = adaptive_cut(ranked, AdaptiveStrategy(0.7, min_k=2, max_k=4))
    assert [h.chunk_id for h in two.hits] == [1, 2] and two.stop_reason == "threshold"


def test_stops_at_max_k_when_confidence_stays_low():
    cut = adaptive_cut(hits(0.5, 0.4, 0.3), AdaptiveStrategy(0.7, min_k=1, max_k=2))
    assert (len(cut.hits), cut.stop_reason) == (2, "max_k") and cut.confidence == pytest.approx(0.45)
    # Candidates running out below the threshold stop as max_k too: nothing more to read.
    short = adaptive_cut(hits(0.5, 0.4), AdaptiveStrategy(0.9, min_k=1, max_k=8))
    assert (len(short.hits), short.stop_reason) == (2, "max_k")


def test_no_candidates_is_no_results():
    empty = adaptive_cut([], AdaptiveStrategy())
    assert (empty.hits, empty.stop_reason, empty.confidence) == ((), "no_results", 0.0)
    all_weak = adaptive_cut(hits(0.1, 0.05), AdaptiveStrategy())
    assert all_weak.stop_reason == "no_results" and all_weak.below_floor == 2
    assert {empty.stop_reason, "threshold", "max_k"} == set(STOP_REASONS)


def test_hits_under_the_floor_are_dropped_and_the_ranked_order_kept():
    # The pipeline's ranking (hybrid RRF) decides the order, not dense similarity alone.
    cut = adaptive_cut(hits(0.6, 0.15, 0.8, 0.7), AdaptiveStrategy(0.99, min_k=1, max_k=8))
    assert [h.chunk_id for h in cut.hits] == [1, 3, 4] and cut.below_floor == 1
    assert cut.confidence == pytest.approx((0.6 + 0.8 + 0.7) / 3)


def test_a_keyword_only_hit_is_kept_and_left_out_of_the_mean_similarity():
    cut = adaptive_cut(hits(None, 0.6), AdaptiveStrategy(0.99, min_k=1, max_k=8))
    assert [h.chunk_id for h in cut.hits] == [1, 2] and cut.confidence == pytest.approx(0.6)


def test_entities_decide_when_the_similarity_alone_would_not():
    ranked = hits(0.5, 0.5, texts=("SRVO-062 means the backup was lost.", "Replace the battery pack."))
    assert adaptive_cut(ranked, AdaptiveStrategy(0.7, min_k=1, max_k=8), ["SRVO-062"]).stop_reason == "threshold"
    assert adaptive_cut(ranked, AdaptiveStrategy(0.7, min_k=1, max_k=8), ["SRVO-063"]).stop_reason == "max_k"


def test_strategies_are_checked():
    with pytest.raises(InputError):
        AdaptiveStrategy(min_k=3, max_k=2)
    with pytest.raises(InputError):
        AdaptiveStrategy(confidence_threshold=1.5)


@pytest.mark.parametrize(("query", "kind"), [
    ("What is the maximum speed the robot can move at in T1 mode?", "lookup"),
    ("When were the Normans in Normandy?", "lookup"),
    ("How do I make collision detection more sensitive without getting false SRVO-045 alarms?", "procedure"),
    ("Why do I have to leave the controller switched on when I change the batteries?", "procedure"),
    ("What does SRVO-062 mean and how do I clear it?", "multi_part"),
    ("At what battery voltage does SRVO-063 come up, and what is the part number?", "multi_part"),
    ("My program keeps pausing with MOTN-023. What causes it and how do I avoid it?", "multi_part"),
    ("How do I add a linear track and set its travel limits?", "procedure"),  # one question, two verbs
])
def test_question_kind(query: str, kind: str):
    assert question_kind(query) == kind


def test_each_kind_reads_at_least_as_much_as_a_lookup():
    lookup = STRATEGIES["lookup"]
    assert lookup.min_k == 1
    for kind in ("procedure", "multi_part"):
        strategy = STRATEGIES[kind]
        assert strategy.min_k >= 2 and strategy.max_k >= lookup.max_k
        assert strategy.confidence_threshold <= lookup.confidence_threshold


def test_cut_for_question_uses_the_strategy_of_its_kind():
    ranked = hits(0.9, 0.9, 0.9)
    lookup = cut_for_question("What is the default RPI?", ranked, ())
    multi = cut_for_question("What is the default RPI, and how long is the timeout?", ranked, ())
    assert (lookup.kind, len(lookup.hits)) == ("lookup", 1)
    assert (multi.kind, len(multi.hits)) == ("multi_part", 2)
    assert multi.to_dict() == {"kept": 2, "stop_reason": "threshold", "confidence": 0.9, "kind": "multi_part",
                               "below_floor": 0}


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
