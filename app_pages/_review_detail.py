"""The Review page's run in full: its decision, origin and iterations, the reviewer's three actions
(saved against the version shown when it was opened) and a conflict shown side by side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from app_pages import _demo as demo
from app_pages._decision_text import corrected_answer
from app_pages._decision_view import render_decision
from app_pages.common import as_plain, show_error
from services.answering.runs import Run, load_run
from services.auth import CurrentUser, require_reviewer
from services.errors import ConflictError, WorkbenchError
from services.review.queue import (
    ACTIONS,
    ANSWER_KEY_REVIEWER,
    FLAG_REASONS,
    MAX_ANSWER_CHARS,
    MAX_COMMENT_CHARS,
    Review,
    review_history,
    submit_review,
)

VERSION_KEY = "review.expected_version"  # the version shown when the run was opened; never re-read at save time
CONFLICT_KEY = "review.conflict"
FLASH_KEY = "review.flash"
CLEAR_KEY = "review.clear_selection"


def history_frame(history: Sequence[Review]) -> pd.DataFrame:
    return pd.DataFrame([
        {"version": h.version, "when": h.created_at, "reviewer": h.reviewer, "action": h.action,
         "from": h.previous_status, "to": h.new_status, "flag reason": h.flag_reason, "comment": h.comment,
         "corrected answer": h.corrected_answer}
        for h in history
    ])


def correction_prefill(run: Run, history: Sequence[Review]) -> str:
    correction = corrected_answer(history)
    return correction.corrected_answer or "" if correction is not None else run.final_answer


def state_lines(state: Mapping[str, Any]) -> list[str]:
    """One side of a conflict (what is saved now, or what the reviewer tried) as plain lines."""
    lines = [f"status: {state.get('status')}", f"reviewer: {state.get('reviewer') or '(none)'}"]
    if state.get("flag_reason"):
        lines.append(f"flag reason: {state['flag_reason']}")
    lines.append(f"comment: {state.get('comment') or '(none)'}")
    lines.append(f"corrected answer: {state.get('corrected_answer') or '(none)'}")
    return lines


def render_detail(run_id: int, user: CurrentUser) -> None:
    try:
        run = load_run(run_id)
        history = review_history(run_id)
    except WorkbenchError as exc:
        show_error(exc)
        return
    st.divider()
    st.subheader(f"Run {run_id}")
    st.caption(f"Status {run.status} · {run.final_level} · confidence {run.final_confidence:.2f} · "
               f"you are reviewing version {st.session_state[VERSION_KEY]}")
    render_decision(run, history, key="review.detail")
    if run.outcome_note:
        st.text(f"Note: {run.outcome_note}")
    _render_origin(run)
    if history and history[-1].reviewer == ANSWER_KEY_REVIEWER:
        st.info(f"The current verdict is an answer-key verdict: {demo.ANSWER_KEY_NOTE}", icon=":material/key:")
    _render_iterations(run)
    _render_actions(run_id, run, history, user)
    _render_conflict(run_id)
    st.markdown("#### History")
    if history:
        st.dataframe(history_frame(history), hide_index=True, key="review.history")
    else:
        st.caption("No review actions on this run yet.")


def _render_origin(run: Run) -> None:
    """Where a run from another system came from, and what its contexts could not give."""
    assessment = run.config.get("assessment")
    if not assessment:
        return
    judges = "on" if assessment.get("judges") else "off (no CRAG, reflection or grading)"
    st.text(f"Source: {run.source} (another RAG system's answer) · trace id {assessment.get('trace_id') or '(none)'} "
            f"· judges {judges}")
    reference = (run.external or {}).get("reference")
    if reference is not None:
        cols = st.columns(2)
        cols[0].markdown("**The answer**")
        cols[0].text(run.final_answer or "(none: the source system abstained)")
        cols[1].markdown("**Reference answer** (from the imported dataset)")
        cols[1].text(reference)


def _render_iterations(run: Run) -> None:
    st.markdown("#### Iterations")
    for it in run.iterations:
        best = " · best" if it.ordinal == run.best_iteration else ""
        with st.expander(f"Iteration {it.ordinal}: {it.decision} · confidence {it.confidence:.2f} ({it.level}){best}"):
            st.text(f"Query used: {it.query_used}")
            st.text(f"Decision: {it.decision} — {it.decision_reason}")
            reflection = it.reflection
            st.text(f"Reflection score: {reflection.reflection_score:.2f}" if reflection else "Reflection score: not run")
            st.text(f"Grade: {it.grade.score}/5 ({it.grade.label})" if it.grade else "Grade: not run")
            st.text("Gaps: " + ("; ".join(it.gaps) if it.gaps else "none"))
            for error in it.errors:
                st.text(f"Error in {error.get('stage')} ({error.get('kind')}): {error.get('message')}")
            if not it.errors:
                st.text("Errors: none")


def _render_actions(run_id: int, run: Run, history: Sequence[Review], user: CurrentUser) -> None:
    st.markdown("#### Your review")
    try:
        require_reviewer(user)
    except WorkbenchError as exc:
        st.warning(as_plain(str(exc)))
    approve_tab, flag_tab, correct_tab = st.tabs(["Approve", "Flag", "Correct"])
    with approve_tab, st.form("review.approve_form"):
        comment = st.text_area("Comment (optional)", key=f"review.approve.comment.{run_id}", max_chars=MAX_COMMENT_CHARS)
        if st.form_submit_button("Approve", type="primary", key="review.approve.save"):
            _save(run_id, "approve", user, comment=comment)
    with flag_tab, st.form("review.flag_form"):
        reason = st.selectbox("Reason", FLAG_REASONS, key=f"review.flag.reason.{run_id}")
        comment = st.text_area("Comment", key=f"review.flag.comment.{run_id}", max_chars=MAX_COMMENT_CHARS)
        if st.form_submit_button("Flag", key="review.flag.save"):
            _save(run_id, "flag", user, comment=comment, flag_reason=reason)
    with correct_tab, st.form("review.correct_form"):
        corrected = st.text_area("Corrected answer", value=correction_prefill(run, history), height=200,
                                 key=f"review.correct.answer.{run_id}", max_chars=MAX_ANSWER_CHARS)
        comment = st.text_area("Comment (optional)", key=f"review.correct.comment.{run_id}", max_chars=MAX_COMMENT_CHARS)
        if st.form_submit_button("Save correction", key="review.correct.save"):
            _save(run_id, "correct", user, comment=comment, corrected_answer=corrected)


def _save(run_id: int, action: str, user: CurrentUser, **fields: Any) -> None:
    try:
        require_reviewer(user)
        review = submit_review(run_id, expected_version=st.session_state[VERSION_KEY], action=action,
                               reviewer=user.name, **fields)
    except ConflictError as exc:
        attempted = {"status": ACTIONS[action], "reviewer": user.name, **fields}
        st.session_state[CONFLICT_KEY] = {"run_id": run_id, "message": str(exc), "current": dict(exc.current),
                                          "attempted": attempted}
        return
    except WorkbenchError as exc:
        show_error(exc)
        return
    st.session_state[FLASH_KEY] = f"Saved: run {run_id} is now {review.new_status} (version {review.version})."
    st.session_state[CLEAR_KEY] = True
    st.rerun()


def _render_conflict(run_id: int) -> None:
    conflict = st.session_state.get(CONFLICT_KEY)
    if not conflict or conflict["run_id"] != run_id:
        return
    show_error(conflict["message"])
    theirs, yours = st.columns(2)
    theirs.markdown("**Saved meanwhile (current)**")
    for line in state_lines(conflict["current"]):
        theirs.text(line)
    yours.markdown("**Yours (not saved)**")
    for line in state_lines(conflict["attempted"]):
        yours.text(line)
    st.button("Reload", key="review.reload", on_click=_reload, args=(conflict["current"].get("version"),),
              help="Review against the current version; your inputs stay in the forms above.")


def _reload(version: int) -> None:
    # The version shown in the conflict is the one the reviewer has now seen; a change after
    # it conflicts again rather than being overwritten unseen.
    st.session_state[VERSION_KEY] = version
    st.session_state.pop(CONFLICT_KEY, None)
