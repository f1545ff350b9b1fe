"""CRAG evaluator (seed 002): signal weights, verdict thresholds, knowledge strips."""

from __future__ import annotations

import numpy as np
import pytest

from services.domain import Hit
from services.scoring.crag import (
    CragConfig,
    RetrievalVerdict,
    decompose_then_recompose,
    evaluate_retrieval,
    keyword_coverage,
)


def _hit(i, text, *, dense=0.7, idf=0.9, doc=None):
    return Hit(chunk_id=i, document_id=doc or i, external_id=f"d{i}", title="", text=text, rank=i,
               fused_score=0.03, dense_similarity=dense, matched_idf_share=idf, bm25_rank=i, dense_rank=i)


GOOD = [
    _hit(1, "SRVO-062 means the encoder backup was lost. Replace the battery and remaster the axis."),
    _hit(2, "After SRVO-062 the axis must be remastered. Mastering restores the encoder count."),
    _hit(3, "Battery replacement prevents SRVO-062 on the encoder backup."),
]


def test_signals_are_weighted_40_30_30():
    same = np.ones((3, 4))
    verdict = evaluate_retrieval("What does SRVO-062 mean?", GOOD, chunk_vectors=same)
    s = verdict.signals
    assert verdict.score == pytest.approx(0.4 * s["top_score"] + 0.3 * s["keyword_coverage"] + 0.3 * s["document_agreement"])
    assert s["document_agreement"] == 1.0 and s["keyword_coverage"] == 1.0
    assert verdict.verdict == "CORRECT" and verdict.action == "refine_and_use"
    assert verdict.verdict is RetrievalVerdict.CORRECT and verdict.to_dict()["verdict"] == "CORRECT"


def test_irrelevant_retrieval_is_incorrect_with_inverted_confidence():
    bad = [_hit(1, "Paint the cell walls yellow.", dense=0.1, idf=0.0), _hit(2, "Lunch is at noon.", dense=0.1, idf=0.0)]
    orthogonal = np.eye(2, 4)
    verdict = evaluate_retrieval("What does PROFINET timeout mean?", bad, chunk_vectors=orthogonal)
    assert verdict.verdict == "INCORRECT" and verdict.confidence == pytest.approx(1 - verdict.score)
    assert verdict.action == "use_fallback" and "weakest signal" in verdict.reasoning


def test_thresholds_are_configurable_and_middle_is_ambiguous():
    verdict = evaluate_retrieval("What does SRVO-062 mean?", GOOD, chunk_vectors=np.ones((3, 4)),
                                 config=CragConfig(correct_threshold=0.999, incorrect_threshold=0.1))
    assert verdict.verdict == "AMBIGUOUS" and verdict.action == "combine_with_fallback"


def test_no_hits_is_incorrect():
    verdict = evaluate_retrieval("anything", [])
    assert verdict.verdict == "INCORRECT" and verdict.score == 0.0 and verdict.strips == ()


def test_strips_keep_relevant_sentences_best_first_under_budget():
    strips = decompose_then_recompose("SRVO-062 battery", GOOD)
    assert strips and all(s.relevance > 0.5 for s in strips)
    assert [s.relevance for s in strips] == sorted((s.relevance for s in strips), reverse=True)
    assert all("Mastering restores" not in s.text for s in strips)  # mentions neither term
    tight = decompose_then_recompose("SRVO-062 battery", GOOD, config=CragConfig(token_budget=15))
    assert sum(len(s.text.split()) * 1.3 for s in tight) <= 15 and len(tight) < len(strips)


def test_keyword_coverage_counts_terms_and_entities():
    assert keyword_coverage("SRVO-062 battery", "the battery") == pytest.approx(1 / 4)  # srvo, 062, batteri, entity
    assert keyword_coverage("", "text") == 0.0
