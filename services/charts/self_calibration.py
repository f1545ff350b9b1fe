"""Self-calibration figures: one retrieval mode's reliability before and after its mapping.

Unlike the verdict reliability diagram on the Tuning page (services.charts.tuning), the
outcome here is whether a pseudo-question's document was found in the top ten, and the
"after" curve is a probability, so the axes say so."""

from __future__ import annotations

import plotly.graph_objects as go

from services.charts.tuning import CURRENT_COLOR, DIAGONAL_NAME, REFERENCE_COLOR
from services.scoring.calibration import CalibrationReport
from services.scoring.self_calibration import ModeCalibration

X_TITLE = "confidence (predicted probability)"
Y_TITLE = "share found"
COUNT_TITLE = "held-out pseudo-questions"


def _curve(report: CalibrationReport, label: str, color: str) -> go.Scatter:
    filled = [i for i, count in enumerate(report.counts) if count]  # an empty bin has no share to draw
    counts = [report.counts[i] for i in filled]
    return go.Scatter(
        name=f"{label} (ECE {report.ece:.3f})", x=[report.mean_predicted[i] for i in filled],
        y=[report.observed[i] for i in filled], mode="lines+markers", line=dict(color=color),
        marker=dict(size=[min(6 + 2 * c ** 0.5, 26) for c in counts]), customdata=counts,
        hovertemplate=f"{label}: predicted %{{x:.2f}} → found %{{y:.2f}} (%{{customdata}} questions)<extra></extra>")


def before_after_figure(calibration: ModeCalibration) -> go.Figure:
    """Share found against mean confidence per bin, before (the weighted sum) and after (the
    fitted mapping), on the held-out pseudo-questions; the diagonal is perfect calibration and
    the bars (right axis) count the questions the mapping puts in each bin."""
    after = calibration.after
    traces: list[go.Bar | go.Scatter] = [
        go.Bar(name="after: questions per bin", x=list(after.bin_centers), y=list(after.counts),
               width=[b - a for a, b in zip(after.bin_edges, after.bin_edges[1:])], yaxis="y2",
               marker_color="rgba(9, 105, 218, 0.15)", hovertemplate="%{y} questions in this bin<extra></extra>"),
        go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name=DIAGONAL_NAME, line=dict(dash="dot", color=REFERENCE_COLOR),
                   hoverinfo="skip"),
        _curve(calibration.before, "before: weighted sum", REFERENCE_COLOR),
        _curve(after, f"after: {calibration.mapping.method} mapping", CURRENT_COLOR),
    ]
    return go.Figure(data=traces, layout=dict(
        height=360, margin=dict(l=10, r=10, t=40, b=10), title=dict(text=calibration.mode, x=0),
        xaxis=dict(range=[0, 1], title=X_TITLE), yaxis=dict(range=[0, 1.02], title=Y_TITLE),
        yaxis2=dict(overlaying="y", side="right", showgrid=False, title=COUNT_TITLE, rangemode="tozero",
                    tickmode="auto"),  # synced to the left axis, counts got ticks like 20.64
        legend=dict(orientation="h", y=-0.25)))
