"""Loop health figures: the loop's rates per day and preset, the iterations runs took, and CRAG's
verdicts, from services.review.loop_health (counted in the database)."""

from __future__ import annotations

import html

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from services.review.loop_health import VERDICTS, HealthCell, LoopHealth

RATES = (  # panel title, the cell's rate
    ("Mean reflection score", "mean_reflection"),
    ("Hallucination rate (judge found an unsupported claim)", "hallucination_rate"),
    ("Refinement success (confidence rose after refining)", "refinement_success"),
    ("Fallback use (a fallback source was searched)", "fallback_use"),
)
VERDICT_COLORS = {"CORRECT": "#1a7f37", "AMBIGUOUS": "#bf8700", "INCORRECT": "#d1242f"}
PALETTE = ("#0969da", "#bf8700", "#8250df", "#1a7f37", "#d1242f", "#57606a", "#e16f24")


def _plain(value: str) -> str:
    return html.escape(value, quote=False)  # preset names reach plotly as text, not markup


def _cells(health: LoopHealth, preset: str) -> list[HealthCell]:
    return [c for c in health.cells if c.preset == preset]


def rates_figure(health: LoopHealth) -> go.Figure:
    """One panel per rate, one line per preset, a point per day (a day with nothing to count is
    left out of its line, not drawn as zero)."""
    figure = make_subplots(rows=2, cols=2, subplot_titles=[title for title, _ in RATES], shared_xaxes=True,
                           vertical_spacing=0.12)
    for index, preset in enumerate(health.presets):
        color = PALETTE[index % len(PALETTE)]
        cells = _cells(health, preset)
        for panel, (_, rate) in enumerate(RATES):
            points = [(c.day, getattr(c, rate), c.runs) for c in cells if getattr(c, rate) is not None]
            figure.add_trace(go.Scatter(
                x=[p[0] for p in points], y=[p[1] for p in points], customdata=[p[2] for p in points],
                mode="lines+markers", name=_plain(preset), legendgroup=preset, showlegend=panel == 0,
                line={"color": color}, hovertemplate="%{x}: %{y:.2f} (%{customdata} runs)<extra></extra>"),
                row=panel // 2 + 1, col=panel % 2 + 1)
    for panel in range(len(RATES)):
        figure.update_yaxes(range=[0, 1.02], row=panel // 2 + 1, col=panel % 2 + 1)
    figure.update_layout(height=560, margin={"t": 60, "b": 30}, legend_title_text="preset")
    return figure


def iterations_figure(health: LoopHealth) -> go.Figure:
    """Runs per day by the number of iterations they took, one panel per preset."""
    presets = health.presets or ("",)
    figure = make_subplots(rows=len(presets), cols=1, shared_xaxes=True, subplot_titles=[_plain(p) for p in presets])
    for count in range(1, health.max_iterations + 1):
        for row, preset in enumerate(presets, start=1):
            cells = _cells(health, preset)
            figure.add_trace(go.Bar(x=[c.day for c in cells], y=[c.iterations.get(count, 0) for c in cells],
                                    name=f"{count} iteration{'s' if count > 1 else ''}", legendgroup=str(count),
                                    showlegend=row == 1, marker_color=PALETTE[(count - 1) % len(PALETTE)]),
                             row=row, col=1)
    figure.update_layout(barmode="stack", height=max(260, 200 * len(presets)), margin={"t": 40, "b": 30},
                         legend_title_text="run took")
    figure.update_yaxes(title_text="runs")
    return figure


def verdicts_figure(health: LoopHealth) -> go.Figure:
    """CRAG's verdict shares per day, one panel per preset (the rest of a bar: CRAG was off)."""
    presets = health.presets or ("",)
    figure = make_subplots(rows=len(presets), cols=1, shared_xaxes=True, subplot_titles=[_plain(p) for p in presets])
    for verdict in VERDICTS:
        for row, preset in enumerate(presets, start=1):
            cells = _cells(health, preset)
            figure.add_trace(go.Bar(x=[c.day for c in cells], y=[c.verdict_shares().get(verdict, 0.0) for c in cells],
                                    name=verdict, legendgroup=verdict, showlegend=row == 1,
                                    marker_color=VERDICT_COLORS.get(verdict)), row=row, col=1)
    figure.update_layout(barmode="stack", height=max(260, 200 * len(presets)), margin={"t": 40, "b": 30},
                         legend_title_text="CRAG verdict")
    figure.update_yaxes(range=[0, 1], title_text="share of runs")
    return figure
