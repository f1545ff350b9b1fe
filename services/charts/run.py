"""Run figures: reflection per iteration, one run's route, route Sankey and frequency, event timeline.

Text from users or the model (questions, messages, reasons) reaches plotly only through
`_plain`, because plotly reads `<...>` in labels and hover text as markup.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import plotly.graph_objects as go

from services.answering.runs import Event, Run
from services.domain import RouterAction, RunStatus
from services.review.paths import START, RoutePath, count_routes, count_transitions
from services.scoring.blend import REFLECTION_MIN_SCORE

DECISION_COLORS: dict[str, str] = {
    RouterAction.COMPLETE: "#1a7f37",
    RouterAction.REFINE_QUERY: "#bf8700",
    RouterAction.FALLBACK_SEARCH: "#0969da",
    RouterAction.DECOMPOSE: "#8250df",
    RouterAction.ACCEPT_BEST: "#6e7781",
}
STATUS_COLORS: dict[str, str] = {
    RunStatus.AUTO_ACCEPTED: "#1a7f37",
    RunStatus.APPROVED: "#2da44e",
    RunStatus.PENDING: "#bf8700",
    RunStatus.FLAGGED: "#d1242f",
    RunStatus.CORRECTED: "#0969da",
}
NEUTRAL = "#57606a"


def _plain(value: str, limit: int = 300) -> str:
    value = value if len(value) <= limit else value[: limit - 1] + "…"
    return html.escape(value, quote=False)


def reflection_figure(run: Run, threshold: float = REFLECTION_MIN_SCORE) -> go.Figure:
    """Reflection score and blended confidence per iteration against the reflection threshold.

    An iteration without reflection (off in the preset, or it failed) has a gap, not a zero.
    """
    ordinals = [it.ordinal for it in run.iterations]
    scores = [it.reflection.reflection_score if it.reflection else None for it in run.iterations]
    fig = go.Figure()
    fig.add_trace(go.Scatter(name="reflection score", x=ordinals, y=scores, mode="lines+markers",
                             connectgaps=False, marker=dict(size=10)))
    fig.add_trace(go.Scatter(name="blended confidence", x=ordinals, y=[it.confidence for it in run.iterations],
                             mode="lines+markers", line=dict(dash="dot"), marker=dict(symbol="diamond")))
    fig.add_hline(y=threshold, line_dash="dash", line_color="#d1242f", annotation_text=f"threshold {threshold:.2f}")
    fig.add_vline(x=run.best_iteration, line_dash="dot", line_color="grey", annotation_text="best")
    fig.update_layout(height=260, margin=dict(l=10, r=10, t=30, b=10), legend=dict(orientation="h", y=-0.3),
                      xaxis=dict(title="iteration", tickmode="array", tickvals=ordinals, range=[0.5, len(ordinals) + 0.5]),
                      yaxis=dict(title="score", range=[0, 1.05]))
    return fig


def route_figure(run: Run) -> go.Figure:
    """START → each iteration's decision → END, left to right, nodes colored by decision."""
    labels = [START, *(f"{it.ordinal}. {it.decision}" for it in run.iterations), f"END ({run.status})"]
    colors = [NEUTRAL, *(DECISION_COLORS.get(it.decision, NEUTRAL) for it in run.iterations),
              STATUS_COLORS.get(run.status, NEUTRAL)]
    hovers = [_plain(f"question: {run.query}"),
              *(_plain(f"{it.decision} (confidence {it.confidence:.2f}): {it.decision_reason}") for it in run.iterations),
              _plain(f"final confidence {run.final_confidence:.2f} ({run.final_level}), best iteration {run.best_iteration}")]
    sizes = [18, *(30 if it.ordinal == run.best_iteration else 22 for it in run.iterations), 18]
    x = list(range(len(labels)))
    fig = go.Figure(go.Scatter(
        x=x, y=[0] * len(x), mode="markers+text", text=labels, textposition="top center",
        hovertext=hovers, hoverinfo="text", marker=dict(size=sizes, color=colors, line=dict(width=1, color="white")),
        showlegend=False,
    ))
    for i in range(len(x) - 1):
        fig.add_annotation(x=x[i + 1], y=0, ax=x[i], ay=0, xref="x", yref="y", axref="x", ayref="y",
                           showarrow=True, arrowhead=3, arrowsize=1.5, arrowwidth=1.5, arrowcolor="#8c959f",
                           standoff=12, startstandoff=12, text="")
    fig.update_layout(height=170, margin=dict(l=20, r=20, t=20, b=10),
                      xaxis=dict(visible=False, range=[-0.5, len(x) - 0.5]), yaxis=dict(visible=False, range=[-1, 1.2]))
    return fig


def _node_color(label: str) -> str:
    if label.startswith("END · "):
        return STATUS_COLORS.get(label.removeprefix("END · "), NEUTRAL)
    return DECISION_COLORS.get(label.split(" · ")[-1], NEUTRAL)


def _translucent(hex_color: str, alpha: float = 0.35) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _node_order(label: str) -> tuple[int, str]:
    """START, then decisions by step, then the final statuses."""
    if label == START:
        return (0, "")
    step, _, name = label.partition(" · ")
    return (int(step), name) if step.isdigit() else (10**6, name)


def route_sankey_figure(paths: Sequence[RoutePath]) -> go.Figure:
    """Decision paths across runs: nodes are (step, decision) plus START and final status."""
    transitions = count_transitions(paths)
    labels = sorted({label for t in transitions for label in (t.source, t.target)}, key=_node_order)
    index = {label: i for i, label in enumerate(labels)}
    fig = go.Figure(go.Sankey(
        arrangement="snap",
        node=dict(label=labels, color=[_node_color(label) for label in labels], pad=18, thickness=16),
        link=dict(source=[index[t.source] for t in transitions], target=[index[t.target] for t in transitions],
                  value=[t.count for t in transitions], color=[_translucent(_node_color(t.target)) for t in transitions]),
    ))
    fig.update_layout(height=420, margin=dict(l=10, r=10, t=10, b=10))
    return fig


def route_frequency_figure(paths: Sequence[RoutePath], top: int = 10) -> go.Figure:
    """The most common full routes as horizontal bars (whatever status they ended in)."""
    counts = count_routes(paths)[:top]
    fig = go.Figure(go.Bar(x=[n for _, n in counts], y=[label for label, _ in counts], orientation="h",
                           marker_color=[DECISION_COLORS.get(label.split(" → ")[-1], NEUTRAL) for label, _ in counts],
                           hovertemplate="%{y}: %{x} runs<extra></extra>"))
    fig.update_layout(height=max(180, 40 * len(counts) + 60), margin=dict(l=10, r=10, t=10, b=10),
                      xaxis=dict(title="runs"), yaxis=dict(autorange="reversed"))
    return fig


def event_iterations(events: Sequence[Event]) -> list[int]:
    """The iteration each event belongs to (0 before the first iteration starts)."""
    current, out = 0, []
    for event in events:
        if event.event_type == "refinement_iteration_start":
            current = int(event.data.get("iteration", current + 1))
        out.append(current)
    return out


def timeline_figure(events: Sequence[Event]) -> go.Figure:
    """Events on a time axis (ms since the run started), one row per event type, colored by iteration."""
    iterations = event_iterations(events)
    types = list(dict.fromkeys(e.event_type for e in events))
    fig = go.Figure()
    for iteration in sorted(set(iterations)):
        members = [e for e, i in zip(events, iterations) if i == iteration]
        fig.add_trace(go.Scatter(
            name=f"iteration {iteration}" if iteration else "start",
            x=[e.elapsed_ms for e in members], y=[e.event_type for e in members], mode="markers",
            marker=dict(size=11), hovertext=[_plain(f"#{e.seq} {e.elapsed_ms:.0f} ms: {e.message}") for e in members],
            hoverinfo="text",
        ))
    for event in events:
        if event.event_type == "refinement_iteration_start":
            fig.add_vline(x=event.elapsed_ms, line_dash="dot", line_color="grey",
                          annotation_text=f"iteration {event.data.get('iteration', '')}")
    fig.update_layout(height=max(260, 28 * len(types) + 100), margin=dict(l=10, r=10, t=30, b=10),
                      xaxis=dict(title="elapsed (ms)"),
                      yaxis=dict(categoryorder="array", categoryarray=types, autorange="reversed"),
                      legend=dict(orientation="h", y=-0.25))
    return fig
