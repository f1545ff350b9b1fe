"""The Document trends page under AppTest on the real store: the fix-first table and chart when
runs exist, the drill-down for one document, the empty state when there are none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.pages._support import frame_by_first_column, open_page
from tests.services.test_documents import at, make_run, store

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


@pytest.fixture()
def documents_page(load_page):  # type: ignore[no-untyped-def]
    return load_page("documents")


@pytest.fixture()
def three_runs(clean_db) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """manual.md: in a flagged run and a LOW one; faq.md: in the LOW one and an approved HIGH one."""
    return {
        "flagged": store(make_run("Why does J2 drift?", hits=("manual.md",), cited=("manual.md",), confidence=0.55,
                                  level="MEDIUM", status="flagged"), at(6)),
        "low": store(make_run("How to remaster?", hits=("manual.md", "faq.md"), confidence=0.2, level="LOW",
                              status="pending"), at(13)),
        "fine": store(make_run("What is the payload?", hits=("faq.md",), cited=("faq.md",), confidence=0.9,
                               level="HIGH", status="approved"), at(14)),
    }


def _open(at_: AppTest) -> AppTest:
    return open_page(at_, "documents", "Document trends")


def _charts(at_: AppTest) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(chart.proto.spec) for chart in at_.get("plotly_chart")]


def test_empty_store_says_what_fills_the_page(clean_db):  # type: ignore[no-untyped-def]
    page = _open(AppTest.from_file(APP, default_timeout=60))
    (info,) = page.info
    assert info.value.startswith("No stored run has retrieved or cited a document yet.")
    assert "Import runs page" in info.value
    assert not page.dataframe and not page.get("plotly_chart")


def test_fix_first_table_chart_and_drill_down(three_runs):  # type: ignore[no-untyped-def]
    page = _open(AppTest.from_file(APP, default_timeout=60))
    table = frame_by_first_column(page, "document")
    assert table["document"].tolist() == ["manual.md", "faq.md"]  # two troubled runs before one
    manual = table.iloc[0]
    assert (manual["runs"], manual["flagged"], manual["low confidence"]) == (2, 1, 1)
    assert manual["troubled share"] == 1.0 and manual["mean confidence"] == pytest.approx(0.375)
    assert (table.iloc[1]["runs"], table.iloc[1]["approved"], table.iloc[1]["troubled share"]) == (2, 1, 0.5)

    bars, trend = _charts(page)
    assert bars["layout"]["title"]["text"] == "Documents to fix first"
    assert [t["name"] for t in bars["data"]] == ["Flagged or corrected by a reviewer", "Low confidence, not approved",
                                                 "Neither"]
    assert bars["data"][0]["y"] == ["faq.md", "manual.md"] and bars["data"][0]["x"] == [0, 1]
    assert trend["layout"]["title"]["text"] == "manual.md: confidence per week"  # the first document is selected

    runs = frame_by_first_column(page, "run id")
    assert runs["run id"].tolist() == [three_runs["low"], three_runs["flagged"]]
    assert runs["status"].tolist() == ["pending", "flagged"] and runs["cited"].tolist() == [False, True]

    page.selectbox(key="documents.selected").select("faq.md").run()
    assert not page.exception
    assert _charts(page)[1]["layout"]["title"]["text"] == "faq.md: confidence per week"
    assert frame_by_first_column(page, "run id")["run id"].tolist() == [three_runs["fine"], three_runs["low"]]
    assert {m.label: m.value for m in page.metric} == {"Runs": "2", "Mean confidence": "0.550",
                                                       "Flagged or corrected": "0", "Low confidence": "1"}


def test_an_approved_low_run_is_no_trouble_and_a_correction_is(clean_db):  # type: ignore[no-untyped-def]
    """The issue's case: one document, one low-confidence run a reviewer approved and one run a
    reviewer corrected. Only the correction is trouble: 50%, not 100% (nor 0%)."""
    approved = store(make_run("How to remaster?", hits=("manual.md",), confidence=0.2, level="LOW",
                              status="approved"), at(6))
    corrected = store(make_run("Why does J2 drift?", hits=("manual.md",), confidence=0.9, level="HIGH",
                               status="corrected"), at(7))
    page = _open(AppTest.from_file(APP, default_timeout=60))
    (manual,) = frame_by_first_column(page, "document").to_dict("records")
    assert (manual["runs"], manual["approved"], manual["corrected"], manual["low confidence"]) == (2, 1, 1, 1)
    assert manual["troubled share"] == 0.5
    bars = _charts(page)[0]
    assert [t["x"] for t in bars["data"]] == [[1], [0], [1]]  # corrected; low and not approved: none; the rest
    assert {m.label: m.value for m in page.metric}["Flagged or corrected"] == "1"
    assert set(frame_by_first_column(page, "run id")["run id"]) == {approved, corrected}


def test_the_legends_sit_above_the_plots_clear_of_the_axis_titles(three_runs):  # type: ignore[no-untyped-def]
    for figure in _charts(_open(AppTest.from_file(APP, default_timeout=60))):
        legend = figure["layout"]["legend"]
        assert legend["y"] >= 1 and legend["yanchor"] == "bottom", legend  # the x-axis title is below the plot
        assert figure["layout"]["margin"]["t"] >= 70  # room for the title and the legend above the plot


def test_filters_narrow_the_documents(three_runs):  # type: ignore[no-untyped-def]
    page = _open(AppTest.from_file(APP, default_timeout=60))
    page.date_input(key="documents.since").set_value(at(14).date()).run()
    assert frame_by_first_column(page, "document")["document"].tolist() == ["faq.md"]
    page.number_input(key="documents.min_runs").set_value(2).run()
    assert page.info and page.info[0].value.startswith("No stored run has retrieved or cited a document with these "
                                                        "filters.")


def test_frames_keep_their_columns_when_empty(documents_page):  # type: ignore[no-untyped-def]
    assert list(documents_page.trends_frame([]).columns) == list(documents_page.TREND_COLUMNS)
    assert list(documents_page.runs_frame([]).columns) == list(documents_page.RUN_COLUMNS)
