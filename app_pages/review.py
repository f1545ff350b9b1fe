"""Review queue: pick the least certain runs, see why, and approve / flag / correct them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd
import streamlit as st

from app_pages import _demo as demo
from app_pages._claim_evidence import p_supported_text
from app_pages._review_detail import CLEAR_KEY, CONFLICT_KEY, FLASH_KEY, VERSION_KEY, render_detail
from app_pages._review_find import render_filters, run_label, take_trace_link
from app_pages._review_work import render_work_queue
from app_pages.common import (
    as_plain,
    empty_state,
    ensure_store,
    require_sign_in,
    show_error,
)
from services.charts import review as review_charts
from services.errors import WorkbenchError
from services.review.queue import (
    ANSWER_KEY_REVIEWER,
    QueueItem,
    queue_counts,
    review_queue,
)
from services.scoring.calibration import QUEUE_MIN_VERDICTS, Calibrator, calibrator_for_queue

SELECTED_KEY = "review.selected_run"
FLASH_WARNING_KEY = "review.flash_warning"
PICK_KEY = "review.pick"
OPEN_KEY = "review.open_request"  # (run id, version) the Work view asked to open in full
TAB_KEY = "review.view"
WORK_LINK = {"view": "work"}  # ?view=work opens the Work view (the Start here page links so)
BROWSE_TAB, WORK_TAB = "Browse and review", "Work the queue"
REVIEWED = ("approved", "flagged", "corrected")
QUEUE_LIMIT = 500
QUEUE_COLUMNS = ("run id", "trace id", "source", "question", "P(supported)", "level", "confidence", "calibrated", "disagreement", "preset",
                 "status", "reviewer", "created")


# --- pure data helpers -----------------------------------------------------------------------

def queue_frame(items: Sequence[QueueItem], *, calibrated: bool) -> pd.DataFrame:
    """Queue rows in queue order; the `calibrated` column only once a calibrator has been fitted
    (before, it would be a column of grey "None"s; the caption says why it is missing),
    P(supported) says "not judged" for runs the judge never saw, and a run sent without a trace
    id has an empty cell there."""
    columns = [c for c in QUEUE_COLUMNS if calibrated or c != "calibrated"]
    return pd.DataFrame([
        {"run id": i.run_id, "trace id": i.trace_id or "", "source": i.source, "question": i.query,
         "P(supported)": p_supported_text(i.p_supported), "level": i.level,
         "confidence": i.confidence, "calibrated": i.calibrated, "disagreement": i.disagreement, "preset": i.preset,
         "status": i.status, "reviewer": i.reviewer, "created": i.created_at}
        for i in items
    ], columns=columns)


# --- page ------------------------------------------------------------------------------------

def main() -> None:
    user = require_sign_in()
    st.title("Review queue")
    _apply_requests()
    if flash := st.session_state.pop(FLASH_KEY, None):
        st.success(flash)
    try:
        ensure_store()
        counts = queue_counts()
        calibrator = calibrator_for_queue()
        _open_linked_trace()
    except WorkbenchError as exc:
        show_error(exc)
        return
    if not sum(counts.values()):
        _render_empty()
        return
    if warning := st.session_state.pop(FLASH_WARNING_KEY, None):
        st.warning(as_plain(warning))
    try:
        filters, order = render_filters()
    except WorkbenchError as exc:
        show_error(exc)
        return
    # Lazy tabs: only the open one runs, so working the queue does not redraw the table and charts.
    browse, work = st.tabs((BROWSE_TAB, WORK_TAB), key=TAB_KEY, on_change="rerun")
    if work.open:
        with work:
            render_work_queue(filters, order, calibrator, _request_open)
        return
    with browse:
        _render_progress(counts)
        try:
            items = review_queue(filters, order=order, calibrate=calibrator, limit=QUEUE_LIMIT)
        except WorkbenchError as exc:
            show_error(exc)
            return
        _render_queue(items, order, calibrator)
        run_id = _render_picker(items)
        if run_id is not None:
            render_detail(run_id, user)


def _apply_requests() -> None:
    """State changes asked for by the last run, made before any widget they touch is drawn."""
    if st.session_state.pop(CLEAR_KEY, False):  # after a save: close the run before the picker is drawn
        st.session_state[PICK_KEY] = None  # set, not deleted: the browser's picker must show the change too
        st.session_state[SELECTED_KEY] = None
    if st.query_params.get("view") == WORK_LINK["view"]:
        # Read once, then dropped, so switching tabs afterwards is not undone by the parameter.
        st.session_state[TAB_KEY] = WORK_TAB
        del st.query_params["view"]
    if request := st.session_state.pop(OPEN_KEY, None):
        run_id, version = request
        st.session_state[TAB_KEY] = BROWSE_TAB
        st.session_state[SELECTED_KEY] = st.session_state[PICK_KEY] = run_id
        st.session_state[VERSION_KEY] = version
        st.session_state.pop(CONFLICT_KEY, None)


def _open_linked_trace() -> None:
    """?trace_id=<id>: the run stored under that trace id opened in Browse and review."""
    linked = take_trace_link()
    if linked is None:
        return
    trace_id, found = linked
    if found is None:
        st.session_state[FLASH_WARNING_KEY] = f"No stored run has trace id {trace_id}."
        return
    run_id, version = found
    st.session_state[TAB_KEY] = BROWSE_TAB
    st.session_state[SELECTED_KEY] = st.session_state[PICK_KEY] = run_id
    st.session_state[VERSION_KEY] = version
    st.session_state.pop(CONFLICT_KEY, None)


def _request_open(item: QueueItem) -> None:
    st.session_state[OPEN_KEY] = (item.run_id, item.review_version)


def _render_empty() -> None:
    empty_state("No runs are stored yet, so there is nothing to review. Answers land here when a question is asked "
                "on the Ask page, when another system's answers are imported, or when the demo runs are loaded.",
                "app_pages/ask.py", "Ask a question", ":material/chat:")
    st.page_link("app_pages/import_runs.py", label="Import runs", icon=":material/upload_file:")
    demo.render_load_button("review")


AUTO_ACCEPTED_HELP = ("Runs whose status is auto-accepted: the pipeline accepted them when it stored them (HIGH "
                      "confidence, CRAG correct, reflection approved) and nobody has reviewed them since. The Tuning "
                      "page's Would auto-accept applies that rule again to every stored run under its sliders.")


def _render_progress(counts: Mapping[str, int]) -> None:
    reviewed = sum(counts[s] for s in REVIEWED)
    pending = counts["pending"]
    left, right = st.columns([3, 2])
    with left:
        cols = st.columns(3)
        cols[0].metric("Pending", f"{pending:,}")
        cols[1].metric("Reviewed", f"{reviewed:,}")
        cols[2].metric("Auto-accepted", f"{counts['auto_accepted']:,}", help=AUTO_ACCEPTED_HELP)
        share = reviewed / (reviewed + pending) if reviewed + pending else 0.0
        st.progress(share, text=f"{reviewed:,} of {reviewed + pending:,} queued runs reviewed")
    right.plotly_chart(review_charts.status_figure(counts), key="review.status_chart")


def _render_queue(items: Sequence[QueueItem], order: str, calibrator: Calibrator | None) -> None:
    if calibrator is not None:
        basis = f"calibrated probability of approval (isotonic fit on {calibrator.n_fitted} verdicts)"
    else:
        basis = (f"raw confidence, not calibrated: a calibrator is fitted once there are {QUEUE_MIN_VERDICTS} "
                 "verdicts, some approved and some flagged or corrected")
    judged = "the judge's P(supported) where it judged the answer, else by"
    if order == "disagreement":
        st.caption(f"Largest spread between the retrieval, reflection and grade signals first; ties most likely "
                   f"wrong first, by {judged} {basis}.")
    else:
        st.caption(f"Most likely wrong first: by {judged} {basis}.")
    if not items:
        st.info("No runs match these filters.")
        return
    if len(items) == QUEUE_LIMIT:
        st.caption(f"Showing only the {QUEUE_LIMIT} runs with the lowest raw confidence; narrow the filters to see others.")
    if any(i.reviewer == ANSWER_KEY_REVIEWER for i in items):
        st.caption(f"Reviewer '{ANSWER_KEY_REVIEWER}': {demo.ANSWER_KEY_NOTE}")
    st.dataframe(queue_frame(items, calibrated=calibrator is not None), hide_index=True, key="review.table",
                 column_config={"question": st.column_config.TextColumn(width="large"),
                                **{name: st.column_config.NumberColumn(format="%.3f", width="small")
                                   for name in ("confidence", "calibrated", "disagreement")},
                                "run id": st.column_config.NumberColumn(width="small"),
                                "source": st.column_config.TextColumn(width="small"),
                                "P(supported)": st.column_config.TextColumn(
                                    help="The judge's P(answer supported); \"not judged\" for runs stored before "
                                         "the judge or with its judges off")})


def _render_picker(items: Sequence[QueueItem]) -> int | None:
    by_id = {i.run_id: i for i in items}
    selected = st.session_state.get(SELECTED_KEY)
    st.session_state.setdefault(PICK_KEY, None)
    options: list[int | None] = [None, *by_id]
    if selected is not None and selected not in by_id:  # keep an open run open when it leaves the queue
        options.append(selected)

    def label(run_id: int | None) -> str:
        if run_id is None:
            return "— choose a run to review —"
        item = by_id.get(run_id)
        return run_label(item) if item else f"#{run_id} (no longer in this queue)"

    pick = st.selectbox("Open run", options, format_func=label, key=PICK_KEY, placeholder="choose a run to review")
    if pick != selected and (pick is None or pick in by_id):
        st.session_state[SELECTED_KEY] = pick
        st.session_state.pop(CONFLICT_KEY, None)
        if pick is not None:
            st.session_state[VERSION_KEY] = by_id[pick].review_version
    return st.session_state.get(SELECTED_KEY)


# Streamlit runs pages as __main__; tests import this module for its pure helpers.
if __name__ == "__main__":
    main()
