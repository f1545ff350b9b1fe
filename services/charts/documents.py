"""Document figures: the documents to fix first, and one document's confidence week by week."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import plotly.graph_objects as go

from services.review.documents import DocumentTrend

FIX_FIRST_TOP = 15
# One colour per segment, matching the review statuses' palette (services/charts/review.py).
SEGMENTS = (("flagged", "Flagged or corrected by a reviewer", "#d1242f"),
            ("low", "Low confidence, not approved", "#bf8700"),
            ("ok", "Neither", "#8c959f"))
CONFIDENCE_COLOR = "#0969da"
RUNS_COLOR = "#8c959f"
WEEK_MS = 7 * 24 * 3600 * 1000  # plotly measures widths and ticks on a date axis in milliseconds


def fix_first_figure(trends: Sequence[DocumentTrend], *, top: int = FIX_FIRST_TOP) -> go.Figure:
    """Horizontal stacked bars for the first `top` documents in fix-first order (the first on top):
    each document's runs split into flagged or corrected, low-confidence-and-not-approved, and the rest."""
    shown = list(trends[:top])[::-1]  # plotly draws the first category at the bottom
    labels = [document_label(t) for t in shown]
    counts = {"flagged": [t.rejected for t in shown], "low": [t.low_not_flagged for t in shown],
              "ok": [t.runs - t.troubled for t in shown]}
    fig = go.Figure()
    for key, name, color in SEGMENTS:
        fig.add_trace(go.Bar(
            name=name, y=labels, x=counts[key], orientation="h", marker_color=color,
            hovertemplate=f"%{{y}}<br>{name}: %{{x}} runs<extra></extra>",
        ))
    # The legend sits between the title and the bars: below them, a fraction of a plot whose height
    # follows the number of documents landed on the x-axis title when the documents were few.
    fig.update_layout(
        title=dict(text="Documents to fix first", y=1, yref="container", yanchor="top", pad=dict(t=8)),
        barmode="stack", height=max(280, 110 + 28 * len(shown)),
        margin=dict(l=10, r=10, t=80, b=10), legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"),
        xaxis=dict(title="runs that retrieved or cited the document", rangemode="tozero"),
        yaxis=dict(title="document", type="category"),
    )
    return fig


def document_trend_figure(trend: DocumentTrend) -> go.Figure:
    """One document per week: the mean final confidence of its runs (line, left axis) and how
    many runs it appeared in (bars, right axis)."""
    weeks = [point.week for point in trend.weeks]
    fig = go.Figure()
    # On a date axis a bar is 1 ms wide unless told otherwise; a lone week then filled the plot.
    fig.add_trace(go.Bar(
        name="runs", x=weeks, y=[point.runs for point in trend.weeks], yaxis="y2", marker_color=RUNS_COLOR,
        opacity=0.45, width=[0.8 * WEEK_MS] * len(weeks), hovertemplate="week of %{x|%Y-%m-%d}: %{y} runs<extra></extra>",
    ))
    fig.add_trace(go.Scatter(
        name="mean confidence", x=weeks, y=[point.mean_confidence for point in trend.weeks], mode="lines+markers",
        line=dict(color=CONFIDENCE_COLOR), hovertemplate="week of %{x|%Y-%m-%d}: %{y:.3f}<extra></extra>",
    ))
    fig.update_layout(
        title=dict(text=f"{document_label(trend)}: confidence per week", y=1, yref="container", yanchor="top",
                   pad=dict(t=8)),
        height=360, margin=dict(l=10, r=10, t=80, b=10),
        legend=dict(orientation="h", x=0, y=1.02, yanchor="bottom"),  # above the plot, clear of the axis title
        xaxis=_week_axis(weeks),
        yaxis=dict(title="mean final confidence", range=[0, 1.05]),
        # tickmode "auto": synced to the left axis, run counts got ticks like 5.81
        yaxis2=dict(title="runs", overlaying="y", side="right", rangemode="tozero", showgrid=False, tickmode="auto"),
    )
    return fig


def _week_axis(weeks: list[Any]) -> dict[str, Any]:
    """Weeks as dates, ten days of margin either side, a tick a week while they fit."""
    axis: dict[str, Any] = dict(title="week (Monday, UTC)", type="date", tickformat="%d %b %Y")
    if weeks:
        margin = timedelta(days=10)
        axis["range"] = [min(weeks) - margin, max(weeks) + margin]
        if len(weeks) <= 12:
            axis["dtick"] = WEEK_MS
    return axis


def document_label(trend: DocumentTrend) -> str:
    """The id, prefixed by its collection outside the default one (the same id may be in both)."""
    return trend.external_id if trend.collection == "default" else f"{trend.collection} / {trend.external_id}"
