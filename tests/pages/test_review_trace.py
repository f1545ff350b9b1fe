"""Finding a run by its trace id on the Review page, under AppTest on the real store and judge:
trace id and source as queue columns, the trace id filter (whole or its start), "Open run"
labels that tell runs apart, and ?trace_id= opening the run whatever its status."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from app_pages._review_find import run_label
from app_pages.common import REVIEWER_KEY
from app_pages.review import BROWSE_TAB, TAB_KEY
from services.review.queue import QueueFilters, review_queue, submit_review
from tests.pages.test_claim_evidence import FABRICATED, store_import

PAGE = str(Path(__file__).resolve().parents[2] / "app_pages" / "review.py")


def open_page(*, trace_link: str | None = None) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.session_state[REVIEWER_KEY] = "ana"
    if trace_link is not None:
        at.query_params["trace_id"] = trace_link
    at.run()
    assert not at.exception, at.exception
    return at


def queue_table(at: AppTest):  # type: ignore[no-untyped-def]
    return next(d.value for d in at.dataframe if "disagreement" in d.value.columns)


def test_the_queue_shows_trace_id_and_source_and_filters_by_a_trace_ids_start(clean_db, settings):
    wrong = store_import(FABRICATED, settings)  # trace id "t-The make"
    right = store_import("Osaka", settings)  # trace id "t-Osaka"
    at = open_page()
    at.multiselect(key="review.statuses").set_value([]).run()
    table = queue_table(at)
    assert list(table.columns[:3]) == ["run id", "trace id", "source"]
    assert dict(zip(table["run id"], table["trace id"])) == {wrong: "t-The make", right: "t-Osaka"}
    assert set(table["source"]) == {"import"}
    untraced = store_import("Osaka", settings, trace_id=None)
    table = queue_table(open_page())
    assert dict(zip(table["run id"], table["trace id"]))[untraced] == ""  # an empty cell, not "None"
    at.text_input(key="review.trace_id").input("t-Os").run()  # the start of a trace id
    assert list(queue_table(at)["run id"]) == [right]
    at.text_input(key="review.trace_id").input("t-Osaka").run()  # the whole of it
    assert list(queue_table(at)["run id"]) == [right]
    at.text_input(key="review.trace_id").input("t-%").run()  # a LIKE wildcard is a character like any other
    assert "No runs match these filters." in [i.value for i in at.info]


def test_open_run_labels_name_the_source_trace_and_status(clean_db, settings):
    run_id = store_import(FABRICATED, settings)
    (item,) = review_queue(QueueFilters(statuses=("pending", "auto_accepted")))
    label = run_label(item)
    assert label.startswith(f"#{run_id} · import · trace t-The make · {item.status} · P(supported) 0.")
    at = open_page()
    assert label in at.selectbox(key="review.pick").options


def test_a_trace_id_link_opens_its_run_whatever_its_status(clean_db, settings):
    run_id = store_import(FABRICATED, settings)
    store_import("Osaka", settings)
    submit_review(run_id, expected_version=0, action="approve", reviewer="bo")  # out of the pending queue
    at = open_page(trace_link="t-The make")
    assert at.session_state[TAB_KEY] == BROWSE_TAB
    assert at.subheader[0].value == f"Run {run_id}"
    assert list(queue_table(at)["run id"]) == [run_id]
    assert "trace_id" not in at.query_params  # read once: the reviewer can move on
    missing = open_page(trace_link="t-nowhere")
    assert "No stored run has trace id t-nowhere." in [w.value for w in missing.warning]
