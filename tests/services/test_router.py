"""Decision router branches from constructed states, and the confidence blends (seed 000)."""

from __future__ import annotations

import dataclasses

import pytest

from services.answering.decisions import RouterState, RouterThresholds, decide, heuristic_confidence, query_complexity
from services.domain import DECISIONS, Hit, RouterAction
from services.scoring.blend import blend_terms, blended_confidence

BASE = RouterState(confidence=0.5, source_count=8, query_complexity="simple", iteration=1, max_iterations=3,
                   reflection_approved=False, has_gaps=True, fallback_available=True)


def _state(**changes):
    return dataclasses.replace(BASE, **changes)


def test_complete_needs_confidence_and_reflection_approval():
    assert decide(_state(confidence=0.75, reflection_approved=True)).action == "COMPLETE"
    assert decide(_state(confidence=0.75, reflection_approved=None)).action == "COMPLETE"  # reflection off
    assert decide(_state(confidence=0.75, reflection_approved=False)).action == "REFINE_QUERY"


def test_middle_band_refines_when_there_are_gaps():
    decision = decide(_state(confidence=0.55))
    assert decision.action == "REFINE_QUERY" and "0.55" in decision.reason


def test_middle_band_without_gaps_accepts():
    assert decide(_state(confidence=0.55, has_gaps=False, reflection_approved=None)).action == "ACCEPT_BEST"


def test_low_confidence_few_sources_falls_back_once():
    assert decide(_state(confidence=0.2, source_count=2)).action == "FALLBACK_SEARCH"
    assert decide(_state(confidence=0.2, source_count=2, fallback_used=True)).action == "REFINE_QUERY"


def test_no_fallback_source_moves_on_and_says_so():
    decision = decide(_state(confidence=0.2, source_count=2, fallback_available=False))
    assert decision.action == "REFINE_QUERY" and "fallback unavailable" in decision.reason


def test_complex_low_confidence_decomposes_early_only():
    assert decide(_state(confidence=0.2, query_complexity="complex")).action == "DECOMPOSE"
    assert decide(_state(confidence=0.2, query_complexity="complex", iteration=2)).action == "REFINE_QUERY"
    assert decide(_state(confidence=0.2, query_complexity="complex", decomposed=True)).action == "REFINE_QUERY"


def test_cap_ends_in_accept_best_never_an_exception():
    for confidence in (0.0, 0.3, 0.5, 0.69):
        assert decide(_state(confidence=confidence, iteration=3)).action == "ACCEPT_BEST"
    assert decide(_state(confidence=0.9, iteration=3, reflection_approved=True)).action == "COMPLETE"


def test_nothing_retrieved_and_no_fallback_is_insufficient_data():
    decision = decide(_state(confidence=0.0, source_count=0, fallback_available=False))
    assert decision.action == "ACCEPT_BEST" and "insufficient data" in decision.reason


def test_thresholds_are_configurable():
    assert decide(_state(confidence=0.55, reflection_approved=True), RouterThresholds(complete=0.5)).action == "COMPLETE"


def test_heuristic_confidence_parts():
    hits = [Hit(chunk_id=i, document_id=i % 2, external_id="d", title="", text="", rank=i, fused_score=0.0)
            for i in range(10)]
    value = heuristic_confidence(hits, "x" * 900, "grease interval axis", expected_length=600)
    # 10/10 sources (0.30) + 2 of 3 documents (0.25 * 2/3) + 900/600 capped at 1.5 (0.25) + no terms (0)
    assert value == pytest.approx(0.30 + 0.25 * 2 / 3 + 0.25)
    assert heuristic_confidence([], "", "q") == 0.0


def test_blend_leaves_out_missing_signals_instead_of_defaulting():
    full, signals = blended_confidence(retrieval=0.5, reflection=1.0, grade=5)
    assert full == pytest.approx(0.15 * 0.5 + 0.50 + 0.35) and set(signals) == {"retrieval", "reflection", "grade"}
    no_reflection, _ = blended_confidence(retrieval=0.5, reflection=None, grade=5)
    assert no_reflection == pytest.approx((0.15 * 0.5 + 0.35) / 0.50)
    minimal, signals = blended_confidence(retrieval=0.5, reflection=None, grade=None, heuristic=0.9)
    assert minimal == pytest.approx((0.5 + 0.9) / 2) and "heuristic" in signals


def test_blend_terms_renormalize_the_weights_of_the_signals_that_ran():
    terms = blend_terms({"heuristic_value": 0.4, "grade": 0.5, "retrieval": 0.6})
    assert [t.signal for t in terms] == ["retrieval", "grade"]  # blend order; the reference value is no input
    assert [t.weight for t in terms] == [0.15, 0.35]
    assert [t.share for t in terms] == pytest.approx([0.15 / 0.50, 0.35 / 0.50])
    assert [t.value for t in terms] == [0.6, 0.5]
    assert blend_terms({}) == ()
    value, signals = blended_confidence(retrieval=0.6, reflection=0.2, grade=3)
    assert value == pytest.approx(sum(t.share * t.value for t in blend_terms(signals)))
    assert sum(t.share for t in blend_terms(signals)) == pytest.approx(1.0)


def test_router_actions_are_the_stored_strings():
    assert DECISIONS == ("COMPLETE", "REFINE_QUERY", "FALLBACK_SEARCH", "DECOMPOSE", "ACCEPT_BEST")
    action = decide(_state(confidence=0.9, reflection_approved=True)).action
    assert action is RouterAction.COMPLETE and action == "COMPLETE" and f"{action}" == "COMPLETE"


def test_blend_lets_the_answer_judges_outweigh_retrieval():
    """On-topic text that does not answer: high retrieval, low judgement -> low confidence."""
    on_topic_non_answer, _ = blended_confidence(retrieval=0.9, reflection=0.3, grade=2)
    off_topic_answer, _ = blended_confidence(retrieval=0.3, reflection=0.9, grade=4)
    assert on_topic_non_answer < 0.5 < off_topic_answer


def test_query_complexity():
    assert query_complexity("What is SRVO-062?", ()) == "simple"
    assert query_complexity("x", ("a", "b")) == "complex"


def test_needs_regeneration_withholds_complete_and_acceptance():
    asked = decide(_state(confidence=0.9, reflection_approved=True, needs_regeneration=True, has_gaps=False))
    assert asked.action == RouterAction.REFINE_QUERY and "regeneration" in asked.reason
    assert decide(_state(confidence=0.9, reflection_approved=True, has_gaps=False)).action == RouterAction.COMPLETE
    capped = decide(_state(confidence=0.9, needs_regeneration=True, iteration=3, max_iterations=3))
    assert capped.action == RouterAction.ACCEPT_BEST
