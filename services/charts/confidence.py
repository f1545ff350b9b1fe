"""Confidence figures: gauge, weighted breakdown, BM25-vs-dense rank scatter."""

from __future__ import annotations

import plotly.graph_objects as go

from services.scoring.confidence import ConfidenceBreakdown
from services.scoring.weights import COMPONENTS

LEVEL_COLORS = {"HIGH": "#1a7f37", "MEDIUM": "#bf8700", "LOW": "#d1242f", "VERY LOW": "#82071e"}
COMPONENT_LABELS = {
    "top_score": "Top score",
    "score_gap": "Score gap",
    "consensus": "Consensus",
    "bm25_dense_agreement": "BM25-dense agreement",
    "low_spread": "Low spread",
    "entity_support": "Entity support",
    "low_diversity": "Single source",
}


def breakdown_figure(breakdown: ConfidenceBreakdown) -> go.Figure:
    """Each component's weighted contribution, stacked so the total is visibly their sum."""
    fig = go.Figure()
    for name in COMPONENTS:
        fig.add_trace(go.Bar(
            name=COMPONENT_LABELS[name],
            y=["confidence"],
            x=[breakdown.contributions[name]],
            orientation="h",
            hovertemplate=f"{COMPONENT_LABELS[name]}: component {breakdown.components[name]:.2f}"
                          f" → contributes %{{x:.3f}}<extra></extra>",
        ))
    fig.add_vline(x=breakdown.overall, line_dash="dot", annotation_text=f"total {breakdown.overall:.2f}")
    # The legend sits below the axis title, not on it (at 170 px high the two overlapped).
    fig.update_layout(barmode="stack", height=210, margin=dict(l=10, r=10, t=30, b=10),
                      xaxis=dict(range=[0, 1], title="weighted contribution to the confidence (0–1)"),
                      legend=dict(orientation="h", y=-0.75))
    return fig


def gauge_figure(breakdown: ConfidenceBreakdown, *, high: float, medium: float, low: float) -> go.Figure:
    fig = go.Figure(go.Indicator(
        mode="gauge+number",
        value=breakdown.overall,
        number={"valueformat": ".2f"},
        title={"text": breakdown.level},
        gauge={
            "axis": {"range": [0, 1]},
            "bar": {"color": LEVEL_COLORS[breakdown.level]},
            "steps": [
                {"range": [0, low], "color": "#ffebe9"},
                {"range": [low, medium], "color": "#fff1e5"},
                {"range": [medium, high], "color": "#fff8c5"},
                {"range": [high, 1], "color": "#dafbe1"},
            ],
        },
    ))
    fig.update_layout(height=220, margin=dict(l=20, r=20, t=40, b=10))
    return fig


def rank_scatter_figure(hits) -> go.Figure:  # type: ignore[no-untyped-def]
    """BM25 rank against dense rank per hit; hits one leg missed sit on the far edge."""
    depth = max([h.bm25_rank or 0 for h in hits] + [h.dense_rank or 0 for h in hits] + [10]) + 2
    fig = go.Figure(go.Scatter(
        x=[h.bm25_rank or depth for h in hits],
        y=[h.dense_rank or depth for h in hits],
        mode="markers+text",
        text=[str(h.rank) for h in hits],
        textposition="top center",
        hovertext=[f"#{h.rank} {h.external_id}" for h in hits],
        marker=dict(size=10),
    ))
    fig.add_shape(type="line", x0=1, y0=1, x1=depth, y1=depth, line=dict(dash="dot", color="grey"))
    fig.update_layout(height=300, margin=dict(l=10, r=10, t=10, b=10),
                      xaxis=dict(title=f"BM25 rank ({depth} = not found)"),
                      yaxis=dict(title=f"dense rank ({depth} = not found)"))
    return fig
