"""The Ask page's run details: CRAG's verdict and the action it took, each iteration of the loop
with the passages its gap queries added as context, and where seed 001's adaptive cut-off
stopped reading chunks (its stop reason)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import streamlit as st

from services.answering.llm.base import gap_query_of
from services.answering.presets import ALL_PRESETS
from services.answering.runs import Event, Iteration, Run
from services.charts import run as run_charts
from services.domain import Hit
from services.scoring.blend import REFLECTION_MIN_SCORE

STOP_REASONS = {  # services.retrieval.adaptive's stop reasons, in words
    "threshold": "the kept chunks reached the confidence the question's kind needs",
    "max_k": "it reached the most chunks the question's kind may read",
    "no_results": "there was nothing to read",
}


def adaptive_cuts(run: Run, ordinal: int | None = None) -> list[Event]:
    """Where the adaptive cut-off (preset option adaptive_k) stopped reading chunks, and why:
    one iteration's, or every iteration's."""
    return [e for e in run.events if e.event_type == "adaptive_cut"
            and (ordinal is None or e.data.get("iteration") == ordinal)]


def cut_line(event: Event) -> str:
    """One cut as a reader reads it: what was kept, where it stopped and what that means."""
    reason = str(event.data.get("stop_reason", ""))
    meaning = f" — {STOP_REASONS[reason]}" if reason in STOP_REASONS else ""
    return f"iteration {event.data.get('iteration')}: {event.message}{meaning}"


def found_by(hit: Hit) -> str:
    """Where a hit came from, in words: a gap query's additional context, or its origin."""
    gap = gap_query_of(hit)
    return f"gap query: {gap}" if gap is not None else (hit.origin or "")


def gap_context_lines(iteration: Iteration) -> list[str]:
    """One line per passage a gap query added to what the generator read in this iteration."""
    return [f"[{position}] {hit.external_id} (chunk {hit.chunk_id}) — gap query: {gap_query_of(hit)}"
            for position, hit in enumerate(iteration.hits, 1) if gap_query_of(hit) is not None]


def latency_frame(iteration: Iteration) -> pd.DataFrame:
    return pd.DataFrame([{"stage": stage, "ms": round(ms, 1)} for stage, ms in iteration.latency_ms.items()],
                        columns=["stage", "ms"])


def render_adaptive_k(run: Run) -> None:
    """Whether the run read adaptively, and where each iteration stopped."""
    if not run.config.get("adaptive_k"):
        return
    cuts = adaptive_cuts(run)
    with st.container(border=True):
        st.markdown("**Adaptive cut-off (adaptive_k) was on**")
        for event in cuts:
            st.text(cut_line(event))
        if not cuts:
            st.text("no iteration had chunks to cut")


def render_crag(best: Iteration, preset: str) -> None:
    verdict = best.crag
    if verdict is None:
        st.info(f"CRAG evaluation is off in the {preset if preset in ALL_PRESETS else 'chosen'} preset.")
        return
    cols = st.columns(3)
    cols[0].metric("Verdict", verdict.verdict.value)
    cols[1].metric("Score", f"{verdict.score:.2f}")
    cols[2].metric("Confidence", f"{verdict.confidence:.2f}")
    st.text(verdict.reasoning)
    st.text(f"action: {verdict.action} → {verdict.action_outcome or 'applied'}")
    st.dataframe(pd.DataFrame([{"signal": k, "value": v} for k, v in verdict.signals.items()]), hide_index=True,
                 key="ask.crag_signals")
    strips = [dataclasses.asdict(s) for s in verdict.strips]
    with st.expander(f"Knowledge strips ({len(strips)})"):
        st.dataframe(pd.DataFrame(strips, columns=["chunk_id", "relevance", "text"]), hide_index=True, key="ask.strips")


def render_iterations(run: Run) -> None:
    threshold = float(run.config.get("reflection_min_score", REFLECTION_MIN_SCORE))
    st.plotly_chart(run_charts.reflection_figure(run, threshold), key="ask.reflection")
    for it in run.iterations:
        best = " · best" if it.ordinal == run.best_iteration else ""
        with st.expander(f"Iteration {it.ordinal}: {it.decision} · confidence {it.confidence:.2f}{best}"):
            st.text(f"query used: {it.query_used}")
            if it.sub_queries:
                st.text("sub-questions: " + " | ".join(it.sub_queries))
            st.text(f"decision: {it.decision} — {it.decision_reason}")
            for event in adaptive_cuts(run, it.ordinal):
                st.text(f"adaptive k: {event.message}")
            if it.reflection:
                st.text(f"reflection {it.reflection.reflection_score:.2f}: {it.reflection.reflection_reason}")
            if it.grade:
                st.text(f"grade {it.grade.score}/5 ({it.grade.label})")
            st.text("gaps: " + (", ".join(it.gaps) if it.gaps else "none"))
            for line in gap_context_lines(it):
                st.text(f"additional context {line}")
            if it.errors:
                st.dataframe(pd.DataFrame(list(it.errors)), hide_index=True, key=f"ask.errors.{it.ordinal}")
            st.dataframe(latency_frame(it), hide_index=True, key=f"ask.latency.{it.ordinal}")


