"""Router paths: which decision sequences stored runs took, how often, and one run's timeline;
and the loop's health per day and preset (its own tab, app_pages/_loop_health.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

import pandas as pd
import streamlit as st

from app_pages._loop_health import render_loop_health
from app_pages.common import empty_state, ensure_store, require_sign_in, run_or_error, show_error
from services.answering.presets import ALL_PRESETS
from services.answering.runs import Run
from services.charts import run as run_charts
from services.domain import STATUSES
from services.errors import WorkbenchError
from services.review.days import day_range
from services.review.paths import RecentRun, RouteFilters, RouteStats, recent_runs, route_stats

PRESETS_KEY = "routes.presets"
STATUSES_KEY = "routes.statuses"
DATES_KEY = "routes.dates"
SELECTED_KEY = "routes.selected_run"
TAB_KEY = "routes.tab"
PATHS_TAB, HEALTH_TAB = "Decision paths", "Loop health"
DEFAULT_DAYS = 30
RECENT_LIMIT = 100
TOP_ROUTES = 10


# --- pure data helpers -----------------------------------------------------------------------

def filters_from_inputs(presets: Sequence[str], statuses: Sequence[str], dates: Sequence[date]) -> RouteFilters:
    """Dates are whole UTC days, the end day included; one date alone means "from then on"."""
    since, until = day_range(dates[0] if len(dates) >= 1 else None, dates[1] if len(dates) >= 2 else None)
    return RouteFilters(presets=tuple(presets), statuses=tuple(statuses), since=since, until=until)


def run_label(run: RecentRun, width: int = 70) -> str:
    query = " ".join(run.query.split())
    query = query if len(query) <= width else query[: width - 1] + "…"
    return f"#{run.run_id} · {query}"


def routes_frame(stats: RouteStats) -> pd.DataFrame:
    return pd.DataFrame([
        {"route": p.label, "final status": p.status, "runs": p.count, "share": p.count / stats.n_runs}
        for p in stats.paths
    ], columns=["route", "final status", "runs", "share"])


def events_frame(run: Run) -> pd.DataFrame:
    iterations = run_charts.event_iterations(run.events)
    return pd.DataFrame([
        {"seq": e.seq, "elapsed ms": round(e.elapsed_ms, 1), "iteration": i, "event": e.event_type, "message": e.message}
        for e, i in zip(run.events, iterations)
    ], columns=["seq", "elapsed ms", "iteration", "event", "message"])


# --- page ------------------------------------------------------------------------------------

def main() -> None:
    require_sign_in()
    st.title("Router paths")
    try:
        ensure_store()
        filters = _render_filters()
        # Read fresh on every rerun (one grouped query): a run just asked shows up at once.
        stats = route_stats(filters)
    except WorkbenchError as exc:
        show_error(exc)
        return
    if stats.n_runs == 0:
        empty_state("No stored runs match these filters. Every answered question adds its path of router decisions "
                    "here: widen the filters, ask questions, or load the demo runs on the Start here page.",
                    "app_pages/home.py", "Start here: load the demo runs", ":material/waving_hand:")
        st.page_link("app_pages/ask.py", label="Ask a question", icon=":material/chat:")
        return
    # Lazy tabs: only the open one runs its queries.
    tabs = st.tabs((PATHS_TAB, HEALTH_TAB), key=TAB_KEY, on_change="rerun")
    if tabs[1].open:
        with tabs[1]:
            render_loop_health(filters)
        return
    with tabs[0]:
        _render_summary(stats)
        _render_drilldown(filters)


def _render_filters() -> RouteFilters:
    today = datetime.now(UTC).date()
    left, middle, right = st.columns(3)
    presets = left.multiselect("Presets", tuple(ALL_PRESETS), key=PRESETS_KEY, placeholder="all presets")
    statuses = middle.multiselect("Status", STATUSES, key=STATUSES_KEY, placeholder="all statuses")
    dates = right.date_input("Created (UTC days)", value=(today - timedelta(days=DEFAULT_DAYS), today), key=DATES_KEY)
    dates = dates if isinstance(dates, tuple) else (dates,)
    return filters_from_inputs(presets, statuses, [d for d in dates if d is not None])


def _render_summary(stats: RouteStats) -> None:
    cols = st.columns(4)
    cols[0].metric("Runs", f"{stats.n_runs:,}")
    cols[1].metric("Mean iterations", f"{stats.mean_iterations:.2f}")
    cols[2].metric("Ending in ACCEPT_BEST", f"{stats.share_accept_best:.0%}")
    cols[3].metric("Distinct routes", f"{len(stats.route_counts()):,}")
    st.subheader("Decision paths")
    st.plotly_chart(run_charts.route_sankey_figure(stats.paths), key="routes.sankey")
    st.caption("Each column is an iteration's decision; the last column is the status the run ended in.")
    st.subheader(f"Most common routes (top {TOP_ROUTES})")
    st.plotly_chart(run_charts.route_frequency_figure(stats.paths, top=TOP_ROUTES), key="routes.frequency")
    with st.expander("Routes by final status"):
        st.dataframe(routes_frame(stats), hide_index=True, key="routes.table")


def _render_drilldown(filters: RouteFilters) -> None:
    st.subheader("One run, event by event")
    try:
        runs = recent_runs(filters, RECENT_LIMIT)
    except WorkbenchError as exc:
        show_error(exc)
        return
    labels = {r.run_id: run_label(r) for r in runs}
    run_id = st.selectbox(f"Run (newest {RECENT_LIMIT} matching the filters)", list(labels), key=SELECTED_KEY,
                          format_func=lambda rid: labels.get(rid, f"#{rid}"))
    run = run_or_error(run_id)
    if run is None:
        return
    st.text(f"question: {run.query}")
    st.plotly_chart(run_charts.route_figure(run), key="routes.route")
    st.plotly_chart(run_charts.timeline_figure(run.events), key="routes.timeline")
    st.dataframe(events_frame(run), hide_index=True, key="routes.events")


if __name__ == "__main__":  # Streamlit runs pages as __main__; tests import the pure helpers
    main()
