"""The Review queue's "Work the queue" view: one pending run at a time, approved, flagged or
skipped with a single key (A, F, N). It is a fragment: a verdict reruns only this view, which
loads the next run, not the whole page with its table and charts."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import streamlit as st

from app_pages._claim_evidence import p_supported_text
from app_pages._decision_view import render_decision
from app_pages.common import as_plain, current_user, show_error
from services.answering.runs import load_run
from services.auth import require_reviewer
from services.domain import RunStatus
from services.errors import ConflictError, WorkbenchError
from services.review.queue import FLAG_REASONS, QueueFilters, QueueItem, review_history, review_queue, submit_review
from services.scoring.calibration import Calibrator

SKIPPED_KEY = "review.work.skipped"  # run ids passed over with Next in this session
DONE_KEY = "review.work.done"  # verdicts saved from this view in this session
FLASH_KEY = "review.work.flash"  # (kind, message) of the last action, shown once
REASON_KEY = "review.work.reason"
WORK_LIMIT = 500
SHORTCUTS = {"approve": "A", "flag": "F", "next": "N"}
ORDER_NOTES = {"uncertainty": "most likely wrong first", "disagreement": "largest disagreement between signals first"}


# --- pure helpers ------------------------------------------------------------------------------

def next_item(items: Sequence[QueueItem], skipped: Sequence[int]) -> QueueItem | None:
    """The first run in queue order not skipped in this session."""
    passed = set(skipped)
    return next((item for item in items if item.run_id not in passed), None)


def left_text(left: int, *, at_limit: bool, done: int, skipped: int) -> str:
    count = f"{left:,}+" if at_limit else f"{left:,}"
    return f"{count} pending left · {done:,} reviewed here this session · {skipped:,} skipped"


def item_heading(item: QueueItem, *, calibrated: bool) -> str:
    """The run's line above its answer: P(supported) first, since the queue is ordered by it."""
    probability = f" · P(approved) {item.calibrated:.2f}" if calibrated else ""
    return (f"**Run {item.run_id}** · P(supported) {p_supported_text(item.p_supported)} · {item.level} · "
            f"confidence {item.confidence:.2f}{probability} · {item.preset} preset")


# --- callbacks (run before the fragment reruns, so the next run is drawn at once) -----------------

def _act(item: QueueItem, action: str) -> None:
    user = current_user()  # who pressed the key, not who the view was drawn for
    reason = st.session_state.get(REASON_KEY, FLAG_REASONS[0]) if action == "flag" else None
    try:
        require_reviewer(user)
        review = submit_review(item.run_id, expected_version=item.review_version, action=action,
                               reviewer=user.name, flag_reason=reason)
    except ConflictError as exc:
        st.session_state.setdefault(SKIPPED_KEY, []).append(item.run_id)
        st.session_state[FLASH_KEY] = ("warning", f"{exc} It was skipped; open it under Browse and review.")
        return
    except WorkbenchError as exc:
        st.session_state[FLASH_KEY] = ("error", str(exc))
        return
    st.session_state[DONE_KEY] = st.session_state.get(DONE_KEY, 0) + 1
    what = f"flagged ({reason})" if action == "flag" else review.new_status
    st.session_state[FLASH_KEY] = ("success", f"Run {item.run_id} {what}.")


def _skip(item: QueueItem) -> None:
    st.session_state.setdefault(SKIPPED_KEY, []).append(item.run_id)
    st.session_state[FLASH_KEY] = ("info", f"Run {item.run_id} skipped; it stays pending.")


def _start_again() -> None:
    st.session_state[SKIPPED_KEY] = []


# --- the view ----------------------------------------------------------------------------------

@st.fragment
def render_work_queue(filters: QueueFilters, order: str, calibrator: Calibrator | None,
                      open_in_browse: Callable[[QueueItem], None]) -> None:
    """The pending runs the page's filters select, one at a time, in the queue's order."""
    try:
        items = review_queue(dataclasses.replace(filters, statuses=(RunStatus.PENDING,)), order=order,
                             calibrate=calibrator, limit=WORK_LIMIT)
    except WorkbenchError as exc:
        show_error(exc)
        return
    skipped = st.session_state.setdefault(SKIPPED_KEY, [])
    _render_flash()
    st.caption(left_text(len(items), at_limit=len(items) == WORK_LIMIT, done=st.session_state.get(DONE_KEY, 0),
                         skipped=len(skipped)) + f" · {ORDER_NOTES[order]}")
    if not items:
        st.success("Nothing is pending under these filters: the queue is worked through.")
        return
    item = next_item(items, skipped)
    if item is None:
        st.info(f"You skipped the {len(items):,} runs still pending.")
        st.button("Start again from the first", key="review.work.again", on_click=_start_again)
        return
    _render_item(item, calibrated=calibrator is not None)
    _render_keys(item, open_in_browse)


def _render_flash() -> None:
    flash = st.session_state.pop(FLASH_KEY, None)
    if flash:
        kind, message = flash
        {"success": st.success, "warning": st.warning, "info": st.info}.get(kind, st.error)(as_plain(message))


def _render_item(item: QueueItem, *, calibrated: bool) -> None:
    with st.container(border=True):
        st.markdown(item_heading(item, calibrated=calibrated))
        try:
            run = load_run(item.run_id)
            history = review_history(item.run_id)
        except WorkbenchError as exc:
            show_error(exc)
            return
        render_decision(run, history, key="review.work")


def _render_keys(item: QueueItem, open_in_browse: Callable[[QueueItem], None]) -> None:
    approve, flag, reason, skip, full = st.columns([1, 1, 2, 1, 2], vertical_alignment="bottom")
    approve.button("Approve", type="primary", key="review.work.approve", shortcut=SHORTCUTS["approve"],
                   on_click=_act, args=(item, "approve"), width="stretch")
    flag.button("Flag", key="review.work.flag", shortcut=SHORTCUTS["flag"], on_click=_act, args=(item, "flag"),
                width="stretch")
    reason.selectbox("Flag reason", FLAG_REASONS, key=REASON_KEY)
    skip.button("Next", key="review.work.next", shortcut=SHORTCUTS["next"], on_click=_skip, args=(item,),
                width="stretch", help="Skip this run for now; it stays pending.")
    if full.button("Correct or read in full", key="review.work.full", width="stretch",
                   help="Opens this run under Browse and review, with its breakdown, sources and the correction form."):
        open_in_browse(item)
        st.rerun(scope="app")
    st.caption("Keys: A approves, F flags with the reason shown, N skips to the next run. A correction needs the "
               "full view.")
