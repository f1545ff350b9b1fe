"""The Export page under AppTest, on the real store: the preview is exactly what the filters
select, the file is export_bytes of those records, bad filters are an error, not a file."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from services.errors import InputError
from services.review.export import ExportFilters, export_records
from services.review.export_formats import FORMATS, export_bytes, read_export
from services.review.queue import submit_review
from services.scoring.calibration import calibrator_for_queue
from tests.pages.test_review_page import demo_runs, reviewed_runs  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
PAGE = str(ROOT / "app_pages" / "export.py")


def export_page():  # type: ignore[no-untyped-def]
    """The page module itself, for its pure helpers (main() only runs under Streamlit)."""
    from app_pages import export

    return export


@pytest.fixture()
def reviewed(demo_runs):  # noqa: F811
    """Three runs: one approved by ana, one flagged by ben, one still pending."""
    approved, flagged, pending = (r.run_id for r in demo_runs)
    submit_review(approved, expected_version=0, action="approve", reviewer="ana")
    submit_review(flagged, expected_version=0, action="flag", reviewer="ben", flag_reason="wrong answer")
    return {"approved": approved, "flagged": flagged, "pending": pending}


def open_export() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=120).run()
    assert not at.exception, at.exception
    return at


def preview_count(at: AppTest) -> int:
    return int(next(m.value for m in at.metric if m.label == "Runs matching").replace(",", ""))


def preview_ids(at: AppTest) -> list[int]:
    frames = [d.value for d in at.dataframe if "run_id" in d.value.columns]
    return [int(x) for x in frames[0]["run_id"]] if frames else []


def test_the_page_is_in_the_navigation(reviewed):
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("app_pages/export.py").run()
    assert not at.exception and at.title[0].value == "Export reviewed answers"
    assert preview_count(at) == 2  # the reviewed runs: the pending one is not offered unless asked for


def test_reviewed_runs_only_by_default_and_each_record_holds_its_contexts(reviewed):
    at = open_export()
    assert at.multiselect(key="export.statuses").value == ["approved", "flagged", "corrected"]
    assert preview_ids(at) == [reviewed["approved"], reviewed["flagged"]]  # not the pending one
    assert "Download 2 runs as csv" == at.get("download_button")[0].label
    records = export_records(ExportFilters(statuses=("approved", "flagged", "corrected")))
    assert all(r["contexts"] and all(c["text"] and c["document_id"] for c in r["contexts"]) for r in records)
    frame = next(d.value for d in at.dataframe if "run_id" in d.value.columns)
    assert frame["contexts"].tolist() == [len(r["contexts"]) for r in records]
    for fmt in FORMATS:  # the contexts survive every format
        assert [r["contexts"] for r in read_export(export_bytes(records, fmt), fmt)] == [r["contexts"] for r in records]


def test_preview_matches_export_records_for_the_chosen_filters(reviewed):
    at = open_export()
    at.multiselect(key="export.statuses").set_value([]).run()  # every status
    assert preview_count(at) == len(export_records()) == 3
    assert preview_ids(at) == [r["run_id"] for r in export_records()]

    at.multiselect(key="export.statuses").set_value(["approved", "flagged"]).run()
    expected = export_records(ExportFilters(statuses=("approved", "flagged")))
    assert preview_count(at) == len(expected) == 2
    assert preview_ids(at) == [r["run_id"] for r in expected]

    at.selectbox(key="export.verdict").select("flagged").run()
    assert preview_ids(at) == [reviewed["flagged"]]
    at.selectbox(key="export.verdict").select("any").run()
    at.text_input(key="export.reviewer").input("ana").run()
    assert preview_ids(at) == [reviewed["approved"]] and preview_count(at) == 1
    at.text_input(key="export.reviewer").input("").run()
    at.multiselect(key="export.statuses").set_value([]).run()

    today = datetime.now(UTC).date()
    at.date_input(key="export.since").set_value(today).run()
    assert preview_count(at) == 3  # all created today
    at.radio(key="export.date_field").set_value("reviewed").run()
    expected = export_records(ExportFilters(date_field="reviewed", since=datetime.combine(today, datetime.min.time(), UTC)))
    assert preview_count(at) == len(expected) == 2  # the pending run was never reviewed
    at.date_input(key="export.since").set_value(today + timedelta(days=1)).run()
    assert preview_count(at) == 0 and not at.get("download_button")
    assert any("No runs match" in i.value for i in at.info)

    at.date_input(key="export.since").set_value(None).run()
    at.radio(key="export.date_field").set_value("created").run()
    at.selectbox(key="export.profile").select("default v1").run()
    assert preview_count(at) == 3
    at.radio(key="export.format").set_value("parquet").run()
    button = at.get("download_button")[0]
    assert not at.exception and button.label == "Download 3 runs as parquet" and button.proto.url


def test_a_backwards_date_range_is_an_error_and_nothing_is_offered(reviewed):
    at = open_export()
    at.date_input(key="export.since").set_value(date(2025, 5, 10))
    at.date_input(key="export.until").set_value(date(2025, 5, 1)).run()
    assert not at.exception and len(at.error) == 1 and "after it ends" in at.error[0].value
    assert not at.get("download_button") and not at.metric and not at.dataframe


def test_the_page_helper_builds_exactly_export_bytes(reviewed):
    page = export_page()
    filters = page.export_filters(statuses=["approved", "flagged"], verdict="any", reviewer=" ", date_field="created",
                                  start=None, end=None, profile="any")
    assert filters == ExportFilters(statuses=("approved", "flagged"))
    records = export_records(filters)
    now = datetime(2025, 5, 1, 9, 30, tzinfo=UTC)
    for fmt in FORMATS:
        download = page.export_download(records, fmt, now=now)
        assert download.data == export_bytes(records, fmt)
        assert read_export(download.data, fmt) == records
        assert download.file_name == f"workbench-export-20250501-0930.{fmt}"
    with pytest.raises(InputError, match="starts on 2025-05-02, after it ends on 2025-05-01"):
        page.export_filters(statuses=[], verdict="any", reviewer="", date_field="created",
                            start=date(2025, 5, 2), end=date(2025, 5, 1), profile="any")
    one_day = page.export_filters(statuses=[], verdict="approved", reviewer="ana", date_field="reviewed",
                                  start=date(2025, 5, 1), end=date(2025, 5, 1), profile="default v1")
    assert (one_day.since, one_day.until) == (datetime(2025, 5, 1, tzinfo=UTC), datetime(2025, 5, 2, tzinfo=UTC))
    assert (one_day.verdict, one_day.reviewer, one_day.profile) == ("approved", "ana", "default v1")


def test_calibrated_probability_is_included_once_there_is_a_calibrator(demo_runs):  # noqa: F811
    at = AppTest.from_file(PAGE, default_timeout=120)
    at.session_state["export.statuses"] = []  # every status: the three demo runs are all pending
    at.run()
    frame = next(d.value for d in at.dataframe if "run_id" in d.value.columns)
    assert frame["calibrated_probability"].isna().all()
    assert any("calibrated_probability is empty" in c.value for c in at.caption)

    reviewed_runs(demo_runs[0])
    calibrator = calibrator_for_queue()
    assert calibrator is not None
    at.run()
    frame = next(d.value for d in at.dataframe if "run_id" in d.value.columns)
    expected = export_records(calibrate=calibrator)
    assert list(frame["run_id"]) == [r["run_id"] for r in expected]
    assert list(frame["calibrated_probability"]) == pytest.approx([r["calibrated_probability"] for r in expected])
    assert frame["calibrated_probability"].notna().all()
