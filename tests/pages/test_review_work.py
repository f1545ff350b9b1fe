"""The Review queue's "Work the queue" view under AppTest, on runs from the real pipeline: one
pending run at a time, approve / flag / next, the count of what is left, and the answer key's
verdicts labelled as such in the full view."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_pages._review_work import SHORTCUTS, left_text, next_item
from app_pages.common import REVIEWER_KEY
from app_pages.review import BROWSE_TAB, TAB_KEY, WORK_TAB
from services.answering.runs import load_run
from services.demo import answer_key, load_demo
from services.review.queue import ANSWER_KEY_REVIEWER, QueueFilters, current_review_state, review_history, review_queue
from tests.pages.test_review_page import demo_runs  # noqa: F401  (fixture: three pending runs)

PAGE = str(Path(__file__).resolve().parents[2] / "app_pages" / "review.py")


def open_work(reviewer: str | None = "ana") -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=300)
    if reviewer:
        at.session_state[REVIEWER_KEY] = reviewer
    at.session_state[TAB_KEY] = WORK_TAB
    at.run()
    assert not at.exception, at.exception
    return at


def shown_run_id(at: AppTest) -> int:
    (header,) = [m.value for m in at.markdown if m.value.startswith("**Run ")]
    return int(header.split()[1].strip("*"))


def left(at: AppTest) -> str:
    return next(c.value for c in at.caption if "pending left" in c.value)


# --- pure helpers ------------------------------------------------------------------------------

def test_next_item_is_the_first_in_queue_order_not_skipped(demo_runs) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    items = review_queue()
    assert next_item(items, []) == items[0]
    assert next_item(items, [items[0].run_id]) == items[1]
    assert next_item(items, [i.run_id for i in items]) is None


def test_left_text_counts_what_is_left_done_and_skipped() -> None:
    assert left_text(3, at_limit=False, done=2, skipped=1) == "3 pending left · 2 reviewed here this session · 1 skipped"
    assert left_text(500, at_limit=True, done=0, skipped=0).startswith("500+ pending left")


# --- the view ------------------------------------------------------------------------------------

def test_the_buttons_carry_single_key_shortcuts(demo_runs) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    at = open_work()
    shortcuts = {b.key: b.proto.shortcut.upper() for b in at.button if b.key and b.key.startswith("review.work.")}
    assert shortcuts["review.work.approve"] == SHORTCUTS["approve"] == "A"
    assert shortcuts["review.work.flag"] == "F" and shortcuts["review.work.next"] == "N"


def test_approve_saves_and_loads_the_next_run_with_one_less_left(demo_runs) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    at = open_work()
    first = shown_run_id(at)
    assert first == review_queue()[0].run_id and left(at).startswith("3 pending left")
    at.button(key="review.work.approve").click().run()
    assert not at.exception, at.exception
    assert current_review_state(first)[0] == "approved"
    assert [(h.action, h.reviewer) for h in review_history(first)] == [("approve", "ana")]
    assert at.success[0].value == f"Run {first} approved."
    assert shown_run_id(at) != first and left(at).startswith("2 pending left · 1 reviewed here")


def test_flag_uses_the_reason_shown_and_next_skips_without_a_verdict(demo_runs) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    at = open_work()
    first = shown_run_id(at)
    at.button(key="review.work.next").click().run()
    second = shown_run_id(at)
    assert second != first and current_review_state(first)[0] == "pending"
    assert "1 skipped" in left(at)
    at.selectbox(key="review.work.reason").set_value("not supported by the sources")
    at.button(key="review.work.flag").click().run()
    (flag,) = review_history(second)
    assert (flag.action, flag.flag_reason) == ("flag", "not supported by the sources")
    third = shown_run_id(at)
    assert third not in (first, second)
    at.button(key="review.work.next").click().run()  # everything left is skipped now
    assert "You skipped the 2 runs still pending." in [i.value for i in at.info]
    at.button(key="review.work.again").click().run()
    assert shown_run_id(at) == review_queue()[0].run_id


def test_without_a_reviewer_name_nothing_is_saved_and_the_run_stays(demo_runs) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    at = open_work(reviewer=None)
    first = shown_run_id(at)
    at.button(key="review.work.approve").click().run()
    assert "set your reviewer name" in at.error[0].value
    assert current_review_state(first) == ("pending", 0) and shown_run_id(at) == first


def test_when_nothing_is_pending_the_view_says_the_queue_is_worked_through(demo_runs) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    at = open_work()
    for _ in demo_runs:
        at.button(key="review.work.approve").click().run()
    assert "the queue is worked through" in at.success[-1].value
    assert left(at).startswith("0 pending left · 3 reviewed")


def test_the_start_here_link_opens_the_work_view(demo_runs) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.query_params["view"] = "work"
    at.run()
    assert not at.exception, at.exception
    assert at.session_state[TAB_KEY] == WORK_TAB and left(at).startswith("3 pending left")
    assert "view" not in at.query_params  # read once: switching tabs afterwards is not undone


def test_correct_or_read_in_full_opens_the_run_in_the_browse_view(demo_runs) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    at = open_work()
    first = shown_run_id(at)
    at.button(key="review.work.full").click().run()
    assert not at.exception, at.exception
    assert at.session_state[TAB_KEY] == BROWSE_TAB
    assert at.subheader[0].value == f"Run {first}"


@pytest.mark.usefixtures("clean_db")
def test_an_answer_key_verdict_is_labelled_as_not_a_persons() -> None:
    load_demo(presets=("minimal",), questions=answer_key()[:1])
    (item,) = review_queue(QueueFilters(statuses=("approved", "flagged")))
    assert item.reviewer == ANSWER_KEY_REVIEWER and load_run(item.run_id).source == "demo"
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.session_state[REVIEWER_KEY] = "ana"
    at.run()
    at.multiselect(key="review.statuses").set_value(["approved", "flagged"]).run()
    assert any("not from a person's review" in c.value for c in at.caption)
    at.selectbox(key="review.pick").select(item.run_id).run()
    assert any("answer-key verdict" in i.value for i in at.info)
