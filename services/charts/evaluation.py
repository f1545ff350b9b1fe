"""Evaluation and corpus figures: metrics per mode, confidence reliability per mode, chunks per document."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import plotly.graph_objects as go

from services.scoring.calibration import CalibrationReport, calibration_metrics

if TYPE_CHECKING:  # only for annotations: keeps this module free of the retrieval stack
    from services.corpus.stats import DocumentInfo
    from services.evaluation.measures import ModeReport

METRIC_LABELS = {"ndcg@10": "nDCG@10", "recall@100": "Recall@100", "mrr@10": "MRR@10"}
MODE_COLORS = {"bm25": "#0969da", "dense": "#8250df", "hybrid": "#1a7f37"}
CALIBRATION_BINS = 10
DIAGONAL_NAME = "perfectly calibrated"


def metrics_figure(reports: Sequence[ModeReport]) -> go.Figure:
    """nDCG@10, Recall@100 and MRR@10 side by side, one bar group per metric, one bar per mode."""
    labels = list(METRIC_LABELS.values())
    fig = go.Figure()
    for report in reports:
        values = [report.metrics[name] for name in METRIC_LABELS]
        fig.add_trace(go.Bar(
            name=report.mode, x=labels, y=values, marker_color=MODE_COLORS.get(report.mode),
            text=[f"{v:.3f}" for v in values], textposition="outside",
            hovertemplate=f"{report.mode} · %{{x}}: %{{y:.4f}}<extra></extra>",
        ))
    fig.update_layout(barmode="group", height=360, margin=dict(l=10, r=10, t=30, b=10),
                      yaxis=dict(range=[0, 1.08], title="score"), legend=dict(title="mode", orientation="h", y=-0.15))
    return fig


def mode_calibration(report: ModeReport, n_bins: int = CALIBRATION_BINS) -> CalibrationReport | None:
    """Confidence against hit@10 for one mode's queries; None when the mode evaluated none."""
    if not report.per_query:
        return None
    scores = [float(p["confidence"]) for p in report.per_query]  # type: ignore[arg-type]
    labels = [int(bool(p["hit_at_10"])) for p in report.per_query]
    return calibration_metrics(scores, labels, n_bins)


def calibration_figure(reports: Sequence[ModeReport], n_bins: int = CALIBRATION_BINS) -> go.Figure:
    """Reliability curve per mode: mean predicted confidence per bin against the share of the
    bin's queries with a relevant document in the top 10; the diagonal is perfect calibration.
    Marker size follows the bin's query count; empty bins are left out."""
    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name=DIAGONAL_NAME,
                               line=dict(dash="dot", color="#8c959f"), hoverinfo="skip"))
    for report in reports:
        calibration = mode_calibration(report, n_bins)
        if calibration is None:
            continue
        filled = [i for i, count in enumerate(calibration.counts) if count]
        counts = [calibration.counts[i] for i in filled]
        auroc = "n/a" if report.confidence_auroc is None else f"{report.confidence_auroc:.2f}"
        fig.add_trace(go.Scatter(
            name=f"{report.mode} (AUROC {auroc}, ECE {calibration.ece:.2f})",
            x=[calibration.mean_predicted[i] for i in filled],
            y=[calibration.observed[i] for i in filled],
            mode="lines+markers",
            line=dict(color=MODE_COLORS.get(report.mode)),
            marker=dict(size=[min(6 + 2 * c ** 0.5, 24) for c in counts]),
            customdata=counts,
            hovertemplate=(f"{report.mode}: predicted %{{x:.2f}} → observed hit@10 %{{y:.2f}}"
                           " (%{customdata} queries)<extra></extra>"),
        ))
    fig.update_layout(height=400, margin=dict(l=10, r=10, t=30, b=10),
                      xaxis=dict(range=[0, 1], title="confidence (mean of the bin)"),
                      yaxis=dict(range=[0, 1.02], title="observed hit@10 rate"),
                      legend=dict(orientation="h", y=-0.2))
    return fig


def chunks_per_document_figure(documents: Sequence[DocumentInfo]) -> go.Figure:
    """How many chunks each document was split into, as a histogram over documents."""
    fig = go.Figure(go.Histogram(x=[d.chunks for d in documents], marker_color="#0969da",
                                 hovertemplate="%{x} chunks: %{y} documents<extra></extra>"))
    if not documents:
        fig.add_annotation(text="no documents yet", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_layout(height=260, margin=dict(l=10, r=10, t=30, b=10), bargap=0.05,
                      xaxis=dict(title="chunks per document"), yaxis=dict(title="documents"))
    return fig
