"""The Review queue page under AppTest, on the real store and model: actions land with their
history, a stale save is a visible conflict that overwrites nothing, filters and order drive
the queue, and question / answer / comment text is always shown as plain text."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from app_pages.common import REVIEWER_KEY
from services.answering import pipeline
from services.answering.runs import Run, load_run, save_run
from services.review.queue import review_history, review_queue, submit_review
from services.scoring.calibration import QUEUE_MIN_VERDICTS, calibrator_for_queue
from services.scoring.weights import DEFAULT_PROFILE
from services.store import transaction

APP = str(Path(__file__).resolve().parents[2] / "app.py")
PAGE = str(Path(__file__).resolve().parents[2] / "app_pages" / "review.py")
XSS = "<script>alert(1)</script>"
QUESTIONS = ("What does SRVO-062 mean?", "How often is J2 grease replaced?", "What is a DSZ zone?")
# Element kinds whose text Streamlit renders as markdown (labels of blocks included below).
MARKDOWN_KINDS = ("markdown", "caption", "latex", "success", "info", "warning", "error", "title", "header", "subheader")


# --- fixtures and helpers ----------------------------------------------------------------------

@pytest.fixture()
def demo_runs(clean_db, tmp_path) -> list[Run]:
    """Three pending runs through the real pipeline (minimal preset, scripted answers)."""
    from services.corpus.ingest import ingest_paths
    from tests.services.test_pipeline import DOCS, ScriptedBackend

    for name, body in DOCS.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    ingest_paths([tmp_path])
    backend = ScriptedBackend((0.5,))
    return [pipeline.run(q, "minimal", DEFAULT_PROFILE, backend=backend) for q in QUESTIONS]


def save_copy(run: Run, **changes) -> int:  # type: ignore[no-untyped-def]
    """Store a copy of a real run with some fields changed (confidence, signals, text...)."""
    with transaction() as session:
        return save_run(dataclasses.replace(run, run_id=None, **changes), session=session)


def reviewed_runs(base: Run, n: int = QUEUE_MIN_VERDICTS) -> list[int]:
    """Enough verdicts for the queue's calibrator: confident copies approved, the others flagged."""
    ids = []
    for i in range(n):
        confident = i % 2 == 0
        rid = save_copy(base, query=f"verdict {i}", final_confidence=0.6 + i / 100 if confident else 0.2 + i / 100)
        if confident:
            submit_review(rid, expected_version=0, action="approve", reviewer="calibrator")
        else:
            submit_review(rid, expected_version=0, action="flag", reviewer="calibrator", flag_reason="wrong answer")
        ids.append(rid)
    return ids


def open_review(run_id: int | None = None, *, reviewer: str | None = "ana") -> AppTest:
    """The page in its own session. AppTest runs a page file without app.py's sidebar even after
    switch_page, so the name the sidebar's reviewer box would hold goes into its session key."""
    at = AppTest.from_file(PAGE, default_timeout=120)
    if reviewer:
        at.session_state[REVIEWER_KEY] = reviewer
    at.run()
    assert not at.exception, at.exception
    if run_id is not None:
        at.selectbox(key="review.pick").select(run_id).run()
        assert not at.exception, at.exception
    return at


def queue_ids(at: AppTest) -> list[int]:
    frames = [d.value for d in at.dataframe if "disagreement" in d.value.columns]
    return [int(x) for x in frames[0]["run id"]] if frames else []


def history_table(at: AppTest) -> pd.DataFrame:
    return next(d.value for d in at.dataframe if "action" in d.value.columns)


def markdown_values(at: AppTest) -> list[str]:
    values = [str(e.value) for kind in MARKDOWN_KINDS for e in at.get(kind)]
    return values + [e.label for e in at.expander] + [t.label for t in at.tabs]


def plain_values(at: AppTest) -> list[str]:
    return [str(e.value) for e in at.text] + [str(e.value) for e in at.code]


def set_statuses(at: AppTest, statuses: list[str]) -> None:
    at.multiselect(key="review.statuses").set_value(statuses).run()
    assert not at.exception, at.exception


def test_the_page_is_in_the_navigation(demo_runs):
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("app_pages/review.py").run()
    assert not at.exception and at.title[0].value == "Review queue"
    assert set(queue_ids(at)) == {r.run_id for r in demo_runs}


# --- actions ---------------------------------------------------------------------------------

def test_approve_flag_correct_land_and_the_history_table_shows_them(demo_runs):
    rid = demo_runs[0].run_id
    at = open_review(rid, reviewer="ana")
    assert rid in queue_ids(at)
    at.text_area(key=f"review.approve.comment.{rid}").input("fine as is")
    at.button(key="review.approve.save").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "approved" in at.success[0].value
    assert load_run(rid).status == "approved"
    assert rid not in queue_ids(at) and at.selectbox(key="review.pick").value is None  # moved on

    set_statuses(at, ["approved"])
    at.selectbox(key="review.pick").select(rid).run()
    at.selectbox(key=f"review.flag.reason.{rid}").select("incomplete answer")
    at.text_area(key=f"review.flag.comment.{rid}").input("misses the remastering step")
    at.button(key="review.flag.save").click().run()
    assert not at.exception and not at.error and "flagged" in at.success[0].value
    assert load_run(rid).status == "flagged"

    set_statuses(at, ["flagged"])
    at.selectbox(key="review.pick").select(rid).run()
    prefilled = at.text_area(key=f"review.correct.answer.{rid}")
    assert prefilled.value == demo_runs[0].final_answer  # the correction starts from the answer
    prefilled.input("Replace the battery pack, then remaster the axis.")
    at.button(key="review.correct.save").click().run()
    assert not at.exception and not at.error and "corrected" in at.success[0].value
    assert load_run(rid).status == "corrected"

    history = review_history(rid)
    assert [(h.action, h.reviewer, h.previous_status, h.new_status, h.version) for h in history] == [
        ("approve", "ana", "pending", "approved", 1), ("flag", "ana", "approved", "flagged", 2),
        ("correct", "ana", "flagged", "corrected", 3)]
    assert history[0].comment == "fine as is" and history[1].flag_reason == "incomplete answer"
    assert history[2].corrected_answer == "Replace the battery pack, then remaster the axis."

    set_statuses(at, ["corrected"])
    at.selectbox(key="review.pick").select(rid).run()
    table = history_table(at)
    assert list(table["action"]) == ["approve", "flag", "correct"]
    assert list(table["comment"]) == ["fine as is", "misses the remastering step", ""]
    assert table["corrected answer"].iloc[-1] == "Replace the battery pack, then remaster the axis."
    # a second correction starts from the last corrected text, not the original answer
    assert at.text_area(key=f"review.correct.answer.{rid}").value == history[2].corrected_answer


def test_conflicting_save_shows_what_changed_and_overwrites_nothing(demo_runs):
    rid = demo_runs[1].run_id
    first, second = open_review(rid, reviewer="ana"), open_review(rid, reviewer="ben")
    first.text_area(key=f"review.approve.comment.{rid}").input("looks right")
    first.button(key="review.approve.save").click().run()
    assert not first.exception and "approved" in first.success[0].value

    second.selectbox(key=f"review.flag.reason.{rid}").select("wrong answer")
    second.text_area(key=f"review.flag.comment.{rid}").input("the interval is wrong")
    second.button(key="review.flag.save").click().run()
    assert not second.exception
    assert len(second.error) == 1 and "ana approved it" in second.error[0].value and "not saved" in second.error[0].value
    shown = plain_values(second)
    for line in ("status: approved", "reviewer: ana", "comment: looks right",  # what is saved now
                 "status: flagged", "reviewer: ben", "comment: the interval is wrong", "flag reason: wrong answer"):
        assert line in shown
    assert [(h.action, h.reviewer) for h in review_history(rid)] == [("approve", "ana")]
    assert load_run(rid).status == "approved"

    # saving again without reloading still conflicts: the version seen is kept, never re-read
    second.button(key="review.flag.save").click().run()
    assert second.error and [h.reviewer for h in review_history(rid)] == ["ana"]

    second.button(key="review.reload").click().run()
    assert not second.error and any("you are reviewing version 1" in c.value for c in second.caption)
    second.button(key="review.flag.save").click().run()  # the form kept ben's inputs
    assert not second.exception and not second.error and "flagged" in second.success[0].value
    assert [(h.action, h.reviewer, h.previous_status) for h in review_history(rid)] == [
        ("approve", "ana", "pending"), ("flag", "ben", "approved")]


def test_an_unnamed_reviewer_gets_an_error_and_nothing_is_saved(demo_runs):
    rid = demo_runs[0].run_id
    at = open_review(rid, reviewer=None)
    assert any("reviewer name" in w.value for w in at.warning)
    at.button(key="review.approve.save").click().run()
    assert not at.exception and any("reviewer name" in e.value for e in at.error)
    assert review_history(rid) == [] and load_run(rid).status == "pending"
    assert rid in queue_ids(at)


# --- queue -----------------------------------------------------------------------------------

def test_filters_change_the_queue_rows(demo_runs):
    base = demo_runs[0]
    high = save_copy(base, final_level="HIGH", final_confidence=0.9)
    balanced = save_copy(base, preset="balanced")
    pending = {r.run_id for r in demo_runs} | {high, balanced}
    submit_review(demo_runs[2].run_id, expected_version=0, action="approve", reviewer="ana")
    at = open_review()
    assert set(queue_ids(at)) == pending - {demo_runs[2].run_id}

    at.multiselect(key="review.levels").set_value(["HIGH"]).run()
    assert queue_ids(at) == [high]
    at.multiselect(key="review.levels").set_value([]).run()
    at.multiselect(key="review.presets").set_value(["balanced"]).run()
    assert queue_ids(at) == [balanced]
    at.multiselect(key="review.presets").set_value([]).run()

    set_statuses(at, ["approved"])
    assert queue_ids(at) == [demo_runs[2].run_id]
    at.text_input(key="review.reviewer_filter").input("ben").run()
    assert queue_ids(at) == [] and any("No runs match" in i.value for i in at.info)
    at.text_input(key="review.reviewer_filter").input("ana").run()
    assert queue_ids(at) == [demo_runs[2].run_id]

    set_statuses(at, [])  # none chosen: every status
    today = datetime.now(UTC).date()
    assert set(queue_ids(at)) == {demo_runs[2].run_id}  # still only ana's
    at.text_input(key="review.reviewer_filter").input("").run()
    assert set(queue_ids(at)) == pending
    at.date_input(key="review.since").set_value(today + timedelta(days=1)).run()
    assert queue_ids(at) == []
    at.date_input(key="review.since").set_value(today).run()
    assert set(queue_ids(at)) == pending
    at.date_input(key="review.until").set_value(today - timedelta(days=1)).run()
    assert not at.exception and any("after it ends" in e.value for e in at.error)  # a backwards range


def test_disagreement_order_puts_the_largest_spread_first(demo_runs):
    base = demo_runs[0]
    for run in demo_runs:
        submit_review(run.run_id, expected_version=0, action="approve", reviewer="ana")
    calm = save_copy(base, final_confidence=0.2, signals={"retrieval": 0.5, "heuristic": 0.5})
    split = save_copy(base, final_confidence=0.4, signals={"retrieval": 0.1, "heuristic": 0.9})
    middle = save_copy(base, final_confidence=0.3, signals={"retrieval": 0.3, "heuristic": 0.6})
    at = open_review()
    assert queue_ids(at) == [calm, middle, split]  # most likely wrong first (none judged: least confident)
    assert any("Most likely wrong first: by the judge's P(supported) where it judged the answer, else by raw "
               "confidence" in c.value for c in at.caption)
    at.radio(key="review.order").set_value("largest disagreement between signals").run()
    assert queue_ids(at) == [split, middle, calm]
    assert queue_ids(at) == [i.run_id for i in review_queue(order="disagreement")]
    assert any("Largest spread" in c.value for c in at.caption)
    frame = next(d.value for d in at.dataframe if "disagreement" in d.value.columns)
    assert list(frame["disagreement"]) == pytest.approx([0.8, 0.3, 0.0])
    assert "calibrated" not in frame.columns  # no column of grey "None"s before a calibrator is fitted


def test_with_enough_verdicts_the_queue_is_ordered_by_calibrated_probability(demo_runs):
    reviewed_runs(demo_runs[0])
    calibrator = calibrator_for_queue()
    assert calibrator is not None
    at = open_review()
    assert any("calibrated probability of approval" in c.value for c in at.caption)
    frame = next(d.value for d in at.dataframe if "disagreement" in d.value.columns)
    expected = review_queue(calibrate=calibrator)
    assert list(frame["run id"]) == [i.run_id for i in expected]
    assert list(frame["calibrated"]) == pytest.approx([i.calibrated for i in expected])
    assert frame["calibrated"].notna().all()


def test_progress_counts_and_status_chart(demo_runs):
    submit_review(demo_runs[0].run_id, expected_version=0, action="approve", reviewer="ana")
    at = open_review()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Pending"] == "2" and metrics["Reviewed"] == "1"
    donut = next(json.loads(c.proto.spec) for c in at.get("plotly_chart") if json.loads(c.proto.spec)["data"][0]["type"] == "pie")
    assert dict(zip(donut["data"][0]["labels"], donut["data"][0]["values"])) == {"Pending": 2, "Approved": 1}


# --- detail ----------------------------------------------------------------------------------

def test_detail_shows_cited_passage_breakdown_and_iterations(demo_runs):
    run = demo_runs[0]
    at = open_review(run.run_id)
    citation = run.citations[0]
    assert run.query in plain_values(at) and run.final_answer in plain_values(at)
    assert citation.quote in [c.value for c in at.code]  # the quote, set apart from the chunk text
    chunk = next(h.text for h in run.iterations[0].hits if h.chunk_id == citation.chunk_id)
    after = chunk[len(citation.quote):].strip()
    assert after and after in plain_values(at)
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    stacked = next(s for s in specs if s["layout"].get("barmode") == "stack")
    assert len(stacked["data"]) == 7
    assert [e.label for e in at.expander if e.label.startswith("Iteration")] == [
        f"Iteration 1: {run.iterations[0].decision} · confidence {run.iterations[0].confidence:.2f} "
        f"({run.iterations[0].level}) · best"]
    assert f"Query used: {run.iterations[0].query_used}" in plain_values(at)


def test_script_tags_in_question_answer_and_comment_are_shown_as_text(demo_runs):
    rid = save_copy(demo_runs[0], query=f"{XSS} What does SRVO-062 mean?", final_answer=f"Replace it. {XSS}",
                    final_confidence=0.01)
    at = open_review(rid, reviewer="ana")
    assert f"{XSS} What does SRVO-062 mean?" in plain_values(at)
    assert f"Replace it. {XSS}" in plain_values(at)
    assert not [v for v in markdown_values(at) if "<script>" in v]
    at.text_area(key=f"review.approve.comment.{rid}").input(XSS)
    at.button(key="review.approve.save").click().run()
    assert review_history(rid)[0].comment == XSS
    set_statuses(at, ["approved"])
    at.selectbox(key="review.pick").select(rid).run()
    assert history_table(at)["comment"].iloc[0] == XSS
    assert not at.exception and not [v for v in markdown_values(at) if "<script>" in v]


# --- pure helpers ----------------------------------------------------------------------------

def test_queue_filters_map_the_widgets_and_reject_a_backwards_range():
    from app_pages import _review_find as page  # the Review page's filters live there
    from services.domain import STATUSES
    from services.errors import InputError

    day = datetime(2025, 5, 1, tzinfo=UTC).date()
    filters = page.queue_filters(statuses=[], levels=["LOW"], presets=["minimal"], reviewer="  ana ", start=day, end=day)
    assert filters.statuses == STATUSES and filters.levels == ("LOW",) and filters.presets == ("minimal",)
    assert filters.reviewer == "ana"
    assert (filters.since, filters.until) == (datetime(2025, 5, 1, tzinfo=UTC), datetime(2025, 5, 2, tzinfo=UTC))
    assert page.queue_filters(statuses=["pending"], levels=[], presets=[], reviewer="", start=None,
                              end=None).reviewer is None
    with pytest.raises(InputError, match="after it ends"):
        page.queue_filters(statuses=[], levels=[], presets=[], reviewer="", start=day, end=day - timedelta(days=1))
