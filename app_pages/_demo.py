"""The live demo on the pages: load the demo runs (with a progress bar), remove them, and say
what they are wherever they show."""

from __future__ import annotations

import streamlit as st

from app_pages.common import show_error
from services.demo import DemoProgress, DemoStatus, DemoSummary, demo_status, load_demo, remove_demo
from services.errors import WorkbenchError

NOTICE_KEY = "demo.notice"
ANSWER_KEY_NOTE = ("Answer-key verdicts come from the demo questions' answer key (which handbook documents answer "
                   "each question), not from a person's review.")


# --- pure helpers ------------------------------------------------------------------------------

def summary_text(summary: DemoSummary) -> str:
    statuses = ", ".join(f"{n} {status.replace('_', '-')}" for status, n in sorted(summary.by_status.items()))
    verdicts = sum(summary.answer_key_verdicts.values())
    return (f"Loaded {summary.runs} demo runs in {summary.seconds:.0f} s ({statuses}); {verdicts} of them carry "
            "answer-key verdicts.")


# Where each phase of a load sits on the one bar: the runs take most of it.
_PHASE_SPANS = {"start": (0.0, 0.05), "handbook": (0.05, 0.35), "runs": (0.35, 1.0)}


def progress_fraction(progress: DemoProgress) -> float:
    low, high = _PHASE_SPANS.get(progress.phase, (0.0, 1.0))
    return low + (high - low) * (progress.done / progress.total if progress.total else 1.0)


def progress_text(progress: DemoProgress) -> str:
    if progress.phase == "start":
        return "Starting the store and loading the embedding model…"
    if progress.phase == "handbook":
        return f"Loading the demo handbook: {progress.done} of {progress.total} documents"
    return f"Answered {progress.done} of {progress.total} demo runs ({progress.label})"


def status_text(status: DemoStatus) -> str:
    if status.demo_runs == 0:
        return f"No demo runs are loaded; the store holds {status.runs:,} runs of your own."
    own = status.runs - status.demo_runs
    return (f"{status.demo_runs:,} demo runs are loaded, {status.answer_key_verdicts:,} with answer-key verdicts"
            + (f", beside {own:,} runs of your own." if own else "."))


# --- cached getter and widgets -------------------------------------------------------------------

@st.cache_data(ttl=10, show_spinner=False)
def cached_demo_status() -> DemoStatus:
    return demo_status()


def render_notice() -> None:
    notice = st.session_state.pop(NOTICE_KEY, None)
    if notice:
        st.success(notice)


def render_load_button(key: str) -> None:
    """"Load demo runs": the demo questions through the pipeline with every preset, a bar meanwhile."""
    if not st.button("Load demo runs", type="primary", icon=":material/play_arrow:", key=f"{key}.load_demo",
                     help="Answers the handbook's 25 demo questions with the minimal, balanced and research presets "
                          "(75 runs, about a minute here) and stores the answer key's verdicts on the minimal and "
                          "research runs. Remove them all again from the Start here page."):
        return
    bar = st.progress(0.0, text="Starting the store and loading the embedding model…")

    def on_progress(progress: DemoProgress) -> None:
        bar.progress(progress_fraction(progress), text=progress_text(progress))

    try:
        summary = load_demo(on_progress=on_progress)
    except WorkbenchError as exc:
        bar.empty()
        show_error(exc)
        return
    st.cache_data.clear()  # every page's cached counts and matrices are stale now
    st.session_state[NOTICE_KEY] = summary_text(summary)
    st.rerun()


def render_remove_button(key: str) -> None:
    if not st.button("Remove demo runs", icon=":material/delete:", key=f"{key}.remove_demo",
                     help="Deletes every demo run and every verdict on them; the handbook's documents stay."):
        return
    try:
        removed = remove_demo()
    except WorkbenchError as exc:
        show_error(exc)
        return
    st.cache_data.clear()
    st.session_state[NOTICE_KEY] = (f"Removed {removed.runs} demo runs and {removed.reviews} review actions on them. "
                                    "The handbook's documents stay in the corpus.")
    st.rerun()
