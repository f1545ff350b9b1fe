"""Ask: one question through the pipeline, streamed live, then every number behind its answer."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from app_pages import _ask_details as details
from app_pages import _demo as demo
from app_pages._decision_text import came_from_outside, reviewer_hints
from app_pages.common import (
    corpus_stats_or_error,
    empty_state,
    render_quote_in_chunk,
    require_sign_in,
    run_or_error,
    selected_preset,
    show_error,
)
from services.answering.pipeline import run as run_pipeline
from services.answering.presets import ALL_PRESETS, configured
from services.answering.runs import Event, Iteration, Run, retrieval_breakdown
from services.auth import CurrentUser
from services.charts import confidence as conf_charts
from services.charts import run as run_charts
from services.corpus.stats import demo_questions
from services.domain import HIT_COLUMNS, Hit, RunStatus, hit_rows
from services.errors import WorkbenchError
from services.review.paths import recent_runs
from services.review.queue import send_to_review
from services.scoring.blend import BLEND_WEIGHTS, blend_terms
from services.scoring.confidence import ConfidenceBreakdown
from services.scoring.profiles import active_profile
from services.settings import get_settings

QUERY_KEY = "ask.query"
DEMO_KEY = "ask.demo"
PRESET_KEY = "ask.preset"
RUN_ID_KEY = "ask.run_id"
NOTICE_KEY = "ask.notice"
CACHE_KEY = "ask.cache_hit"  # the cache's message for the run shown, when it came from the cache
SWITCH_KEY = "ask.{option}.{preset}"  # one switch per option and preset: each starts at that preset's value
# The loop options a question can be asked with, beside its preset (services.answering.presets).
SWITCHES = {
    "adaptive_k": ("Adaptive cut-off (adaptive_k)",
                   "Seed 001: the answer reads only as many chunks as the question's kind needs; the run shows where "
                   "each iteration stopped and why. Starts at the preset's setting."),
    "gaps_as_context": ("Gaps as context (gaps_as_context)",
                        "Seed 000: passages that gap queries find for what the previous answer lacked reach the "
                        "generator as labelled additional context (at most 400 tokens), not only fused into the "
                        "retrieval. Starts at the preset's setting; as-written and full turn it on."),
}
SIDEBAR_PRESET = "sidebar"
LEVEL_BADGES = {"HIGH": "green", "MEDIUM": "yellow", "LOW": "orange", "VERY LOW": "red"}
SIGNAL_LABELS = {"retrieval": "retrieval", "reflection": "reflection", "grade": "answer grade",
                 "heuristic": "heuristic (no judge ran)", "heuristic_value": "heuristic (reference, not blended)"}


# --- pure data helpers -----------------------------------------------------------------------

def answerable_questions(questions: Sequence[Mapping[str, Any]]) -> list[str]:
    return [str(q["text"]) for q in questions if (q.get("metadata") or {}).get("answerable", True)]


def chunk_texts(run: Run) -> dict[int, str]:
    """Chunk id -> text for every chunk the run retrieved (the best iteration wins on repeats)."""
    texts: dict[int, str] = {}
    best = run.best()
    for it in (best, *run.iterations) if best else run.iterations:
        for hit in it.hits:
            texts.setdefault(hit.chunk_id, hit.text)
    return texts


def hits_frame(hits: Sequence[Hit]) -> pd.DataFrame:
    """Every hit's scores, and where it came from: the asked collection, a fallback source, or a
    gap query whose passage was given to the generator as additional context."""
    rows = [{**row, "found by": details.found_by(hit)} for row, hit in zip(hit_rows(hits), hits)]
    return pd.DataFrame(rows, columns=[*HIT_COLUMNS, "found by"])


def final_gauge_breakdown(breakdown: ConfidenceBreakdown, run: Run) -> ConfidenceBreakdown:
    # gauge_figure reads only `overall` and `level`; the gauge shows the run's final (blended) confidence.
    return dataclasses.replace(breakdown, overall=run.final_confidence, level=run.final_level)


def signals_frame(signals: Mapping[str, float]) -> pd.DataFrame:
    """Blended signals in blend order with their renormalized weights, then reference-only values."""
    terms = blend_terms(signals)
    others = sorted(name for name in signals if name not in BLEND_WEIGHTS)
    return pd.DataFrame(
        [{"signal": SIGNAL_LABELS.get(t.signal, t.signal), "value": t.value, "blend weight": t.share} for t in terms]
        + [{"signal": SIGNAL_LABELS.get(name, name), "value": float(signals[name]), "blend weight": None}
           for name in others],
        columns=["signal", "value", "blend weight"])


def blend_caption(run: Run) -> str:
    """How the final confidence was made, from constants and numbers only."""
    parts = [f"{SIGNAL_LABELS[t.signal]} {t.value:.2f} × {t.weight:.2f}" for t in blend_terms(run.signals)]
    text = (f"Final confidence {run.final_confidence:.2f} is the weighted mean of the signals that ran: "
            f"{', '.join(parts)} (weights renormalized over those signals). Only the retrieval part is broken "
            "down into its seven components below.")
    if not run.final_answer:
        text += " No answer was produced, so the final confidence is capped at the retrieval confidence."
    return text


def event_line(event: Event) -> str:
    return f"{event.elapsed_ms:8.0f} ms  {event.message}"


# --- page ------------------------------------------------------------------------------------

def _fill_from_demo() -> None:
    chosen = st.session_state.get(DEMO_KEY)
    if chosen:
        st.session_state[QUERY_KEY] = chosen


def main() -> None:
    user = require_sign_in()
    st.title("Ask")
    stats = corpus_stats_or_error()
    if stats is None:
        return
    _render_demo_offer()
    if stats.chunks == 0:
        empty_state("The corpus is empty: there is nothing to answer from yet. Add documents on the Corpus page, or "
                    "load the demo runs above (they bring the demo handbook).",
                    "app_pages/corpus.py", "Open the Corpus page", ":material/library_books:")
        return
    preset, options, asked = _render_question_form()
    if asked:
        run_id = _ask(st.session_state.get(QUERY_KEY, ""), preset, options)
        if run_id is None:
            return
        st.session_state[RUN_ID_KEY] = run_id
        demo.cached_demo_status.clear()  # the store has a run now: the demo offer goes
    run_id = st.session_state.get(RUN_ID_KEY)
    if run_id is None and (run_id := _latest_run_id()) is not None:
        st.caption(f"Showing the newest stored run, #{run_id}, until you ask a question of your own.")
    run = run_or_error(run_id)
    if run is not None:
        _render_run(run, user)


def _latest_run_id() -> int | None:
    """Something to read before the first question: the newest stored run (demo runs included)."""
    try:
        newest = recent_runs(limit=1)
    except WorkbenchError as exc:
        show_error(exc)
        return None
    return newest[0].run_id if newest else None


def _render_demo_offer() -> None:
    """On a store without runs, the one-click way to fill every page with real runs."""
    demo.render_notice()
    try:
        empty = demo.cached_demo_status().store_empty
    except WorkbenchError as exc:
        show_error(exc)
        return
    if not empty:
        return
    with st.container(border=True):
        st.markdown("**New here?** No question has been answered yet, so the review queue, router paths and "
                    "calibration are empty. Ask one below, or load the demo runs: the handbook's 25 questions "
                    "answered with every preset.")
        demo.render_load_button("ask")


def _preset_option(preset: str, option: str) -> bool:
    """The preset's loop option as configured now (environment, active profile)."""
    try:
        return bool(getattr(configured(preset, get_settings(), active_profile().weights.loop), option))
    except WorkbenchError:
        return False  # a store that cannot be read: the switch starts off, asking shows the error


def _render_question_form() -> tuple[str, dict[str, bool], bool]:
    questions = answerable_questions(demo_questions())
    st.selectbox("Demo question", questions, index=None, key=DEMO_KEY, on_change=_fill_from_demo,
                 placeholder="Pick a demo question to fill the box…")
    st.text_area("Question", key=QUERY_KEY, height=90, placeholder="Ask something the corpus should answer")
    sidebar = selected_preset()
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    # Every preset, the seeds' loop as written (as-written) and everything on (full) included.
    choice = left.selectbox("Preset", (SIDEBAR_PRESET, *ALL_PRESETS), key=PRESET_KEY,
                            format_func=lambda p: f"sidebar preset ({sidebar})" if p == SIDEBAR_PRESET else p)
    asked = right.button("Ask", type="primary", key="ask.submit", width="stretch")
    preset = sidebar if choice == SIDEBAR_PRESET else choice
    options = {}
    for option, column in zip(SWITCHES, st.columns(len(SWITCHES))):
        key = SWITCH_KEY.format(option=option, preset=preset)
        if key not in st.session_state:
            st.session_state[key] = _preset_option(preset, option)
        label, help_text = SWITCHES[option]
        options[option] = column.toggle(label, key=key, help=help_text)
    return preset, options, asked


def _ask(query: str, preset: str, options: dict[str, bool]) -> int | None:
    """Run the pipeline with its events streamed into a status box; the stored run's id, or None."""
    failure: WorkbenchError | None = None
    st.session_state.pop(CACHE_KEY, None)
    with st.status("Answering…", expanded=True) as status:
        def on_event(event: Event) -> None:
            st.text(event_line(event))
            if event.event_type == "cache_hit":
                st.session_state[CACHE_KEY] = (int(event.data["run_id"]), event.message)

        try:
            run = run_pipeline(query, preset, on_event=on_event, options=options, use_cache=True)
        except WorkbenchError as exc:
            failure = exc
            status.update(label="Could not answer", state="error", expanded=False)
        else:
            status.update(label=f"Answered in {run.latency_ms:,.0f} ms — {run.final_level} ({run.status})",
                          state="complete", expanded=False)
    if failure is not None:
        show_error(failure)
        return None
    return run.run_id


def _render_run(run: Run, user: CurrentUser) -> None:
    best = run.best()
    try:
        scored = retrieval_breakdown(run)
    except WorkbenchError as exc:
        show_error(exc)
        return
    if best is None or scored is None:
        st.warning(f"Run {run.run_id} was stored without its iterations; there is nothing to show.")
        return
    profile, breakdown = scored
    left, right = st.columns([3, 2])
    with left:
        _render_answer(run)
        details.render_adaptive_k(run)
    with right:
        st.badge(run.final_level, color=LEVEL_BADGES.get(run.final_level, "gray"))
        st.plotly_chart(conf_charts.gauge_figure(final_gauge_breakdown(breakdown, run), high=profile.high,
                                                 medium=profile.medium, low=profile.low), key="ask.gauge")
        st.caption(blend_caption(run))
        st.dataframe(signals_frame(run.signals), hide_index=True, key="ask.signals")
    _render_breakdown(breakdown, best, run)
    evidence, crag, iterations, route = st.tabs(["Retrieved passages", "CRAG verdict", "Iterations", "Route"])
    with evidence:
        _render_hits(best)
    with crag:
        details.render_crag(best, run.preset)
    with iterations:
        details.render_iterations(run)
    with route:
        st.plotly_chart(run_charts.route_figure(run), key="ask.route")
        st.text(" → ".join(["START", *run.route, f"END ({run.status})"]))
    _render_review_action(run, user)


def _render_answer(run: Run) -> None:
    st.subheader("Answer")
    cached = st.session_state.get(CACHE_KEY)
    if cached is not None and cached[0] == run.run_id:
        st.info(cached[1], icon=":material/cached:")
    if not run.final_answer:
        st.warning("The source system gave no answer (it abstained)." if came_from_outside(run)
                   else "No answer could be produced from the retrieved text.")
        if run.outcome_note:
            st.text(run.outcome_note)
        return
    st.text(run.final_answer)
    st.caption(f"Run {run.run_id} · {len(run.iterations)} iteration(s) · best iteration {run.best_iteration}")
    texts = chunk_texts(run)
    for citation in run.citations:
        with st.expander(f"Citation [{citation.marker}]"):
            st.text(f"document {citation.external_id} · chunk {citation.chunk_id}")
            render_quote_in_chunk(texts.get(citation.chunk_id), citation.quote)


def _render_breakdown(breakdown: ConfidenceBreakdown, best: Iteration, run: Run) -> None:
    st.subheader(f"Retrieval confidence {breakdown.overall:.2f} — {breakdown.level}")
    st.plotly_chart(conf_charts.breakdown_figure(breakdown), key="ask.breakdown")
    st.caption(f"The total is the sum of the seven weighted contributions (iteration {best.ordinal}, "
               f"stored value {best.retrieval_confidence:.3f}).")
    st.text(f"weights profile: {breakdown.profile}")
    if came_from_outside(run):  # the newest stored run may be another system's: no advice to rephrase it
        st.caption(f"Run {run.run_id} was answered by another system ({run.source}); the Review page has what to "
                   "check before a verdict.")
    for line in reviewer_hints(run, breakdown):
        st.text(f"• {line}")


def _render_hits(best: Iteration) -> None:
    if not best.hits:
        st.info("Nothing was retrieved.")
        return
    st.dataframe(hits_frame(best.hits), hide_index=True, key="ask.hits")
    extra = details.gap_context_lines(best)
    if extra:
        st.caption(f"{len(extra)} passage(s) after the retrieval are additional context: gap queries found them "
                   "for what the previous answer lacked (preset option gaps_as_context); the retrieval confidence "
                   "is scored without them.")
    if best.retrieval.mode == "hybrid":
        st.plotly_chart(conf_charts.rank_scatter_figure(best.hits), key="ask.scatter")


def _render_review_action(run: Run, user: CurrentUser) -> None:
    st.subheader("Review")
    notice = st.session_state.pop(NOTICE_KEY, None)
    if notice:
        st.success(notice)
    if run.status == RunStatus.AUTO_ACCEPTED:
        st.caption("Auto-accepted: high confidence, CRAG correct, reflection approved and the judge sure it is supported.")
        if st.button("Send to review", key="ask.send_to_review"):
            try:
                sent = send_to_review(int(run.run_id or 0), reviewer=user.name)
            except WorkbenchError as exc:
                show_error(exc)
                return
            # False: someone changed the run's status since this page loaded it; show its state now.
            st.session_state[NOTICE_KEY] = (f"Run {run.run_id} was sent to the review queue." if sent is not False
                                            else f"Run {run.run_id} was no longer auto-accepted; nothing was changed.")
            st.rerun()
    elif run.status == RunStatus.PENDING:
        st.info("This run is already queued for review.")
        st.page_link("app_pages/review.py", label="Open the review queue", icon=":material/fact_check:")
    else:
        st.caption(f"Reviewed: {run.status}.")


if __name__ == "__main__":  # Streamlit runs pages as __main__; tests import the pure helpers
    main()
