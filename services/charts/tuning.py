"""Tuning figures: normalized weights, re-scored confidence by level, level counts before and
after, reliability against verdicts, and two profiles compared on the same runs.

Every slider move redraws all of these, so each figure is built in one constructor call with
its layout (shapes included) rather than by update_layout / add_vline: plotly validates on
every update, and that was most of a rerun's time (add_vline alone ~10 ms a line)."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import numpy as np
import plotly.graph_objects as go

from services.charts.confidence import COMPONENT_LABELS, LEVEL_COLORS
from services.scoring.calibration import CalibrationReport
from services.scoring.tuning import level_indexes
from services.scoring.weights import COMPONENTS, LEVELS, WeightsProfile

HISTOGRAM_BINS = 40  # 0.025 wide: fine enough to see runs pile up against a threshold
DIAGONAL_NAME = "perfectly calibrated"
THRESHOLD_NAMES = ("high", "medium", "low")
REFERENCE_COLOR = "#8c959f"
CURRENT_COLOR = "#0969da"


def weights_figure(weights: Mapping[str, float]) -> go.Figure:
    """Each component's share of the total weight (what the blend actually uses)."""
    raw = np.array([max(float(weights.get(c, 0.0)), 0.0) for c in COMPONENTS])
    total = raw.sum()
    shares = raw / total if total > 0 else np.zeros_like(raw)
    labels = [COMPONENT_LABELS[c] for c in COMPONENTS]
    bar = go.Bar(x=shares.tolist(), y=labels, orientation="h", marker_color=CURRENT_COLOR, text=[f"{s:.0%}" for s in shares],
                 textposition="auto", hovertemplate="%{y}: %{x:.1%} of the weight<extra></extra>")
    return go.Figure(data=[bar], layout=dict(
        height=280, margin=dict(l=10, r=10, t=30, b=10), title=dict(text="normalized weights", x=0),
        xaxis=dict(range=[0, 1], tickformat=".0%"), yaxis=dict(autorange="reversed")))


def score_histogram_figure(scores: Any, profile: WeightsProfile, *, bins: int = HISTOGRAM_BINS) -> go.Figure:
    """Final confidence of every run, binned over [0, 1] and stacked by the level `profile`
    gives it, with the three thresholds as lines. Binned here (not by plotly) so the figure
    carries `bins` numbers per level however many runs there are."""
    scores = np.clip(np.asarray(scores, dtype=np.float64), 0.0, 1.0)
    edges = np.linspace(0.0, 1.0, bins + 1)
    centers = (edges[:-1] + edges[1:]) / 2
    # One pass: bin index * 4 + level index, counted once, instead of a histogram per level.
    bin_index = np.minimum(np.searchsorted(edges, scores, side="right") - 1, bins - 1)
    counts = np.bincount(bin_index * len(LEVELS) + level_indexes(scores, profile),
                         minlength=bins * len(LEVELS)).reshape(bins, len(LEVELS))
    x = centers.tolist()  # plain lists validate faster than arrays, and 40 numbers need no base64
    bars = [go.Bar(name=level, x=x, y=counts[:, i].tolist(), width=float(edges[1] - edges[0]), marker_color=LEVEL_COLORS[level],
                   hovertemplate=f"{level}: %{{y}} runs near %{{x:.3f}}<extra></extra>")
            for i, level in enumerate(LEVELS)]
    values = [(name, float(getattr(profile, name))) for name in THRESHOLD_NAMES]
    shapes = [dict(type="line", x0=v, x1=v, y0=0, y1=1, xref="x", yref="paper", line=dict(dash="dash", color="#57606a"))
              for _, v in values]
    annotations = [dict(x=v, y=1, xref="x", yref="paper", text=f"{name} {v:.2f}", showarrow=False, yanchor="bottom")
                   for name, v in values]
    if len(scores) == 0:
        annotations.append(dict(text="no stored runs yet", showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5))
    return go.Figure(data=bars, layout=dict(
        barmode="stack", bargap=0, height=340, margin=dict(l=10, r=10, t=40, b=10), shapes=shapes,
        annotations=annotations, xaxis=dict(range=[0, 1], title="final confidence"), yaxis=dict(title="runs"),
        legend=dict(orientation="h", y=-0.2)))


def _plain(label: str) -> str:
    """Profile names are user input and plotly reads a few HTML tags in text: show them literally."""
    return html.escape(label, quote=False)


def _level_bars(groups: Mapping[str, Mapping[str, int]], colors: tuple[str, ...]) -> go.Figure:
    bars = []
    for (label, counts), color in zip(groups.items(), colors):
        name = _plain(label)
        values = [int(counts.get(level, 0)) for level in LEVELS]
        bars.append(go.Bar(name=name, x=list(LEVELS), y=values, marker_color=color, text=values, textposition="outside",
                           hovertemplate=f"{name} · %{{x}}: %{{y}} runs<extra></extra>"))
    return go.Figure(data=bars, layout=dict(barmode="group", height=300, margin=dict(l=10, r=10, t=30, b=10),
                                            yaxis=dict(title="runs", rangemode="tozero"),
                                            legend=dict(orientation="h", y=-0.2)))


def level_counts_figure(before: Mapping[str, int], after: Mapping[str, int], *, before_name: str = "active profile",
                        after_name: str = "sliders") -> go.Figure:
    """Runs per level under two scorings, side by side in LEVELS order."""
    return _level_bars({before_name: before, after_name: after}, (REFERENCE_COLOR, CURRENT_COLOR))


def compare_figure(result: Mapping[str, Any]) -> go.Figure:
    """Level counts of the two sides of services.scoring.tuning.compare_profiles, side by side."""
    return _level_bars({f"A: {result['a']['profile']}": result["a"]["counts"],
                        f"B: {result['b']['profile']}": result["b"]["counts"]}, (REFERENCE_COLOR, CURRENT_COLOR))


def confusion_figure(result: Mapping[str, Any]) -> go.Figure:
    """The level confusion matrix of compare_profiles: rows profile A, columns profile B;
    off-diagonal cells are runs that change level."""
    levels = list(result["levels"])
    z = np.asarray(result["confusion"], dtype=np.int64)
    heatmap = go.Heatmap(z=z, x=levels, y=levels, colorscale="Blues", showscale=False, texttemplate="%{z}",
                         hovertemplate="A %{y} → B %{x}: %{z} runs<extra></extra>")
    return go.Figure(data=[heatmap], layout=dict(
        height=320, margin=dict(l=10, r=10, t=30, b=10),
        xaxis=dict(title=f"B: {_plain(result['b']['profile'])}", side="top"),
        yaxis=dict(title=f"A: {_plain(result['a']['profile'])}", autorange="reversed")))


def _reliability_trace(report: CalibrationReport, label: str, color: str) -> go.Scatter:
    name = _plain(label)
    filled = [i for i, count in enumerate(report.counts) if count]
    counts = [report.counts[i] for i in filled]
    return go.Scatter(
        name=f"{name} (ECE {report.ece:.3f})",
        x=[report.mean_predicted[i] for i in filled], y=[report.observed[i] for i in filled],
        mode="lines+markers", line=dict(color=color),
        marker=dict(size=[min(6 + 2 * c ** 0.5, 26) for c in counts]), customdata=counts,
        hovertemplate=f"{name}: predicted %{{x:.2f}} → approved %{{y:.2f}} (%{{customdata}} runs)<extra></extra>",
    )


def reliability_figure(report: CalibrationReport, *, name: str = "sliders", reference: CalibrationReport | None = None,
                       reference_name: str = "active profile") -> go.Figure:
    """Share approved against mean confidence per bin, the diagonal being perfect calibration.
    Marker size and the grey bars (right axis) show how many reviewed runs each bin holds;
    empty bins are left out of the curve. `reference` is drawn for comparison."""
    traces: list[go.Bar | go.Scatter] = [
        go.Bar(name=f"{_plain(name)}: reviewed runs per bin", x=list(report.bin_centers), y=list(report.counts),
               width=[b - a for a, b in zip(report.bin_edges, report.bin_edges[1:])], yaxis="y2",
               marker_color="rgba(9, 105, 218, 0.15)", hovertemplate="%{y} reviewed runs in this bin<extra></extra>"),
        go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name=DIAGONAL_NAME, line=dict(dash="dot", color=REFERENCE_COLOR),
                   hoverinfo="skip"),
    ]
    if reference is not None:
        traces.append(_reliability_trace(reference, reference_name, REFERENCE_COLOR))
    traces.append(_reliability_trace(report, name, CURRENT_COLOR))
    return go.Figure(data=traces, layout=dict(
        height=380, margin=dict(l=10, r=10, t=30, b=10), xaxis=dict(range=[0, 1], title="confidence (mean of the bin)"),
        yaxis=dict(range=[0, 1.02], title="share approved by reviewers"),
        yaxis2=dict(overlaying="y", side="right", showgrid=False, title="reviewed runs", rangemode="tozero",
                    tickmode="auto"),  # synced to the left axis, counts got ticks like 20.64
        legend=dict(orientation="h", y=-0.2)))
