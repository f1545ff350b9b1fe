"""Finding runs on the Review queue page: the filters (status, level, preset, dates, reviewer,
trace id, source), a run's label in "Open run", and the ?trace_id= link another system sends."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

import streamlit as st

from app_pages._claim_evidence import p_supported_text
from services.answering.presets import PRESETS
from services.domain import STATUSES
from services.review.days import day_range
from services.review.queue import QueueFilters, QueueItem, run_for_trace, run_sources
from services.scoring.weights import LEVELS

ORDERS = {"most likely wrong first": "uncertainty", "largest disagreement between signals": "disagreement"}
STATUS_FILTER_KEY = "review.statuses"
TRACE_FILTER_KEY = "review.trace_id"
TRACE_LINK = "trace_id"  # ?trace_id=<id> opens that run, so a link from another system lands on it
APP_LINK = "app"  # &app=<app>: whose trace id it is, where two systems sent the same one


def queue_filters(*, statuses: Sequence[str], levels: Sequence[str], presets: Sequence[str], reviewer: str,
                  start: date | None, end: date | None, sources: Sequence[str] = (), trace_id: str = "") -> QueueFilters:
    """The filter widgets' values as QueueFilters; no status chosen means every status."""
    since, until = day_range(start, end)  # whole UTC days, the end day included
    return QueueFilters(statuses=tuple(statuses) or STATUSES, levels=tuple(levels), presets=tuple(presets),
                        reviewer=reviewer.strip() or None, since=since, until=until, sources=tuple(sources),
                        trace_id=trace_id.strip() or None)


def run_label(item: QueueItem) -> str:
    """An "Open run" choice: enough to tell runs apart without the table (a complaint names a trace id)."""
    trace = f"trace {item.trace_id}" if item.trace_id else "no trace id"
    return (f"#{item.run_id} · {item.source} · {trace} · {item.status} · P(supported) "
            f"{p_supported_text(item.p_supported)} · {item.query[:70]}")


def render_filters() -> tuple[QueueFilters, str]:
    with st.expander("Filters", expanded=True):
        c1, c2, c3 = st.columns(3)
        statuses = c1.multiselect("Status", STATUSES, default=["pending"], key=STATUS_FILTER_KEY, placeholder="any status")
        levels = c2.multiselect("Level", LEVELS, key="review.levels")
        presets = c3.multiselect("Preset", tuple(PRESETS), key="review.presets")
        d1, d2, d3 = st.columns(3)
        start = d1.date_input("Created from (UTC)", value=None, key="review.since")
        end = d2.date_input("Created to (UTC)", value=None, key="review.until")
        reviewer = d3.text_input("Reviewed by", key="review.reviewer_filter", placeholder="any reviewer")
        t1, t2 = st.columns([2, 1])
        trace_id = t1.text_input("Trace id", key=TRACE_FILTER_KEY, placeholder="a whole trace id, or how it starts",
                                 help="The id the source system gave the run (runs imported, pushed or traced).")
        sources = t2.multiselect("Source", run_sources(), key="review.sources", placeholder="any source")
    order = st.radio("Order", tuple(ORDERS), horizontal=True, key="review.order")
    filters = queue_filters(statuses=statuses, levels=levels, presets=presets, reviewer=reviewer, start=start, end=end,
                            sources=sources, trace_id=trace_id)
    return filters, ORDERS[order]


def take_trace_link() -> tuple[str, tuple[int, int] | None] | None:
    """The ?trace_id= link, read once and dropped (so the reviewer can move on): the trace id and
    (run id, review version) of its run, None when no run has it. The filters are set to show that
    run whatever its status. None when there is no link."""
    trace_id = st.query_params.get(TRACE_LINK, "").strip()
    if not trace_id:
        return None
    app = st.query_params.get(APP_LINK, "").strip() or None
    del st.query_params[TRACE_LINK]
    if app is not None:
        del st.query_params[APP_LINK]
    found = run_for_trace(trace_id, app)
    if found is not None:
        st.session_state[STATUS_FILTER_KEY] = []  # every status: a linked run may be reviewed or auto-accepted
        st.session_state[TRACE_FILTER_KEY] = trace_id
    return trace_id, found
