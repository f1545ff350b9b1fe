"""Review figures: the share of runs in each review status."""

from __future__ import annotations

from collections.abc import Mapping

import plotly.graph_objects as go

STATUS_ORDER = ("pending", "approved", "flagged", "corrected", "auto_accepted")
STATUS_LABELS = {"pending": "Pending", "approved": "Approved", "flagged": "Flagged", "corrected": "Corrected",
                 "auto_accepted": "Auto-accepted"}
STATUS_COLORS = {"pending": "#bf8700", "approved": "#1a7f37", "flagged": "#d1242f", "corrected": "#8250df",
                 "auto_accepted": "#0969da"}


def status_figure(counts: Mapping[str, int]) -> go.Figure:
    """A donut of runs per status (fixed order and colours, so pages look the same day to day)."""
    statuses = [s for s in STATUS_ORDER if counts.get(s, 0) > 0]
    total = sum(counts.get(s, 0) for s in STATUS_ORDER)
    fig = go.Figure(go.Pie(
        labels=[STATUS_LABELS[s] for s in statuses],
        values=[counts[s] for s in statuses],
        marker=dict(colors=[STATUS_COLORS[s] for s in statuses]),
        hole=0.6,
        sort=False,
        direction="clockwise",
        textinfo="value",
        hovertemplate="%{label}: %{value} runs (%{percent})<extra></extra>",
    ))
    fig.update_layout(height=220, margin=dict(l=10, r=10, t=10, b=10), showlegend=True,
                      annotations=[dict(text=f"{total:,}<br>runs", showarrow=False, font=dict(size=14))])
    return fig
