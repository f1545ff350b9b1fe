"""Evaluation and corpus figures built from constructed reports, checked trace by trace."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.calibration import calibration_curve

from services.charts.evaluation import (
    DIAGONAL_NAME,
    calibration_figure,
    chunks_per_document_figure,
    metrics_figure,
    mode_calibration,
)
from services.corpus.stats import DocumentInfo
from services.evaluation.measures import ModeReport

SCORES = [0.05, 0.15, 0.15, 0.95, 0.92]
HITS = [False, False, True, True, True]


def _report(mode: str, metrics: tuple[float, float, float], scores=SCORES, hits=HITS, auroc=0.83) -> ModeReport:  # type: ignore[no-untyped-def]
    per_query = [{"query_id": f"q{i}", "confidence": s, "hit_at_10": h} for i, (s, h) in enumerate(zip(scores, hits))]
    return ModeReport(mode, dict(zip(("ndcg@10", "recall@100", "mrr@10"), metrics)), auroc, per_query)


REPORTS = [_report("bm25", (0.61, 0.9, 0.55)), _report("dense", (0.7, 0.95, 0.66)), _report("hybrid", (0.75, 1.0, 0.7))]


def test_metrics_figure_groups_three_metrics_per_mode():
    fig = metrics_figure(REPORTS).to_plotly_json()
    assert fig["layout"]["barmode"] == "group"
    assert [t["name"] for t in fig["data"]] == ["bm25", "dense", "hybrid"]
    for trace, report in zip(fig["data"], REPORTS):
        assert trace["type"] == "bar"
        assert list(trace["x"]) == ["nDCG@10", "Recall@100", "MRR@10"]
        assert list(trace["y"]) == [report.metrics["ndcg@10"], report.metrics["recall@100"], report.metrics["mrr@10"]]
    assert list(fig["data"][0]["text"]) == ["0.610", "0.900", "0.550"]


def test_calibration_figure_has_the_diagonal_and_one_reliability_curve_per_mode():
    fig = calibration_figure(REPORTS).to_plotly_json()
    diagonal, *curves = fig["data"]
    assert diagonal["name"] == DIAGONAL_NAME and list(diagonal["x"]) == [0, 1] and list(diagonal["y"]) == [0, 1]
    assert [c["name"].split(" ")[0] for c in curves] == ["bm25", "dense", "hybrid"]
    observed, predicted = calibration_curve(np.array(HITS, dtype=int), np.array(SCORES), n_bins=10)
    for curve in curves:
        np.testing.assert_allclose(curve["x"], predicted)  # same bins as sklearn's reliability curve
        np.testing.assert_allclose(curve["y"], observed)
        assert list(curve["customdata"]) == [1, 2, 2]  # queries per non-empty bin
    # ECE: (1 * |0 - 0.05| + 2 * |0.5 - 0.15| + 2 * |1 - 0.935|) / 5 = 0.176
    assert curves[0]["name"] == "bm25 (AUROC 0.83, ECE 0.18)"
    assert mode_calibration(REPORTS[0]).ece == pytest.approx(0.176)


def test_calibration_figure_says_when_auroc_is_undefined_and_skips_empty_modes():
    all_hits = _report("dense", (1, 1, 1), scores=[0.3, 0.8], hits=[True, True], auroc=None)
    empty = ModeReport("bm25", {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}, None, [])
    fig = calibration_figure([empty, all_hits]).to_plotly_json()
    assert [t["name"] for t in fig["data"]] == [DIAGONAL_NAME, "dense (AUROC n/a, ECE 0.45)"]
    assert list(fig["data"][1]["y"]) == [1.0, 1.0]
    assert mode_calibration(empty) is None


def test_chunks_per_document_histogram():
    docs = [DocumentInfo(i, f"d{i}", f"title {i}", "x.md", chunks, chunks * 100, "2026-01-01T00:00:00")
            for i, chunks in enumerate([1, 1, 3, 7])]
    fig = chunks_per_document_figure(docs).to_plotly_json()
    (trace,) = fig["data"]
    assert trace["type"] == "histogram" and list(trace["x"]) == [1, 1, 3, 7]
    assert not fig["layout"].get("annotations")
    empty = chunks_per_document_figure([]).to_plotly_json()
    assert empty["layout"]["annotations"][0]["text"] == "no documents yet"
