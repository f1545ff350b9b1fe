"""The Import runs page's traces section: the backlog of traces the API's worker has yet to
take through (waiting to be assembled, their runs waiting for assessment) with a progress bar
like `workbench ingest`'s, what became of the traces, and the ones that became no run."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from app_pages.common import show_error
from services.errors import WorkbenchError
from services.intake.trace_status import DroppedTrace, TraceCounts, dropped_traces, trace_counts
from services.store import transaction

BACKLOG_MARK_KEY = "import.traces_backlog_mark"
BACKLOG_REFRESH_SECONDS = 5  # while traces wait, the section redraws itself this often (the counts' cache lives 5 s)
DROPPED_COLUMNS = ["trace id", "app", "what", "spans", "reason", "when"]


# --- pure helpers (tested without Streamlit) -----------------------------------------------

def rate_and_left(done: int, total: int, elapsed_s: float | None, unit: str) -> str:
    """' · 2.0 runs/s · about 15 s left', as `workbench ingest` shows it; '' before anything is done."""
    if not (elapsed_s and done):
        return ""
    rate = done / elapsed_s
    left = max(total - done, 0) / rate
    return f" · {rate:.1f} {unit}/s · about {left / 60:.0f} min left" if left >= 90 else \
        f" · {rate:.1f} {unit}/s · about {left:.0f} s left"


@dataclass(frozen=True)
class BacklogMark:
    """Where the page first saw the current trace backlog: how many traces were through then, and when."""

    through: int
    at_s: float  # time.monotonic()


def backlog_progress_state(mark: BacklogMark, counts: TraceCounts, now_s: float) -> tuple[float, str]:
    """Bar fraction and text for the trace backlog the API's worker drains: the traces gone
    through since `mark` of those plus the ones still waiting, with the rate and time left."""
    done = max(counts.through - mark.through, 0)
    total = done + counts.backlog
    line = f"{done:,} of {total:,} traces through since this page saw the backlog" + \
        rate_and_left(done, total, now_s - mark.at_s, "traces")
    return (done / total if total else 1.0), line


def next_backlog_mark(mark: BacklogMark | None, counts: TraceCounts, now_s: float) -> BacklogMark | None:
    """The mark kept while a backlog lasts: set when one appears, dropped when it is gone."""
    if not counts.backlog:
        return None
    return mark if mark is not None and mark.through <= counts.through else BacklogMark(counts.through, now_s)


def dropped_frame(dropped: list[DroppedTrace]) -> pd.DataFrame:
    return pd.DataFrame([
        {"trace id": d.trace_id, "app": d.service_name, "what": d.state, "spans": d.spans, "reason": d.reason,
         "when": d.closed_at} for d in dropped
    ], columns=DROPPED_COLUMNS)


# --- cached getter -------------------------------------------------------------------------

@st.cache_data(ttl=5, show_spinner=False)
def cached_traces() -> tuple[TraceCounts, list[DroppedTrace]]:
    with transaction() as session:
        return trace_counts(session=session), dropped_traces(limit=50, session=session)


# --- section ---------------------------------------------------------------------------------

def render_traces() -> None:
    st.subheader("Traces (OpenTelemetry)")
    st.caption("Spans sent to POST /v1/traces wait until their trace is whole (its root span arrived), then each "
               "trace becomes one queued run, which the API's worker assesses. A trace with no question or answer "
               "is not RAG: it is dropped, and said so here.")
    try:
        counts, _ = cached_traces()
    except WorkbenchError as exc:
        show_error(exc)
        return
    # Only while traces wait does the section redraw itself, to move its bar.
    st.fragment(_render_trace_state, run_every=BACKLOG_REFRESH_SECONDS if counts.backlog else None)()


def _render_trace_state() -> None:
    try:
        counts, dropped = cached_traces()
    except WorkbenchError as exc:
        show_error(exc)
        return
    if not (counts.open or counts.assembled or counts.dropped or counts.refused):
        st.caption("No traces received yet: point an OTLP exporter at POST /v1/traces (README, *Traces*).")
        return
    _render_backlog(counts)
    cols = st.columns(4)
    cols[0].metric("Became runs", f"{counts.assembled:,}")
    cols[1].metric("Dropped (not RAG)", f"{counts.dropped:,}")
    cols[2].metric("Refused", f"{counts.refused:,}")
    cols[3].metric("Late spans", f"{counts.late_spans:,}",
                   help="Spans that arrived after their trace was closed: counted, not added to its run.")
    if dropped:
        with st.expander(f"Traces that became no run (the {len(dropped):,} newest)"):
            st.dataframe(dropped_frame(dropped), hide_index=True)


def _render_backlog(counts: TraceCounts) -> None:
    now = time.monotonic()
    mark = next_backlog_mark(st.session_state.get(BACKLOG_MARK_KEY), counts, now)
    st.session_state[BACKLOG_MARK_KEY] = mark
    cols = st.columns(2)
    cols[0].metric("Traces waiting to be assembled", f"{counts.open:,}",
                   help="Their root span has not arrived, or more spans may follow (OTLP_SETTLE_SECONDS).")
    cols[1].metric("Runs from traces waiting for assessment", f"{counts.runs_waiting:,}")
    if mark is None:
        st.caption("No trace backlog: every trace received is assessed, dropped or refused.")
        return
    st.progress(*backlog_progress_state(mark, counts, now))
