"""The Import runs page under AppTest on the real store: a mixed good/bad JSONL lands its good
records and lists the bad lines with their reasons; the queue counts, the schema and the
example file; the upload limit; then the assessment with its progress bar."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from services.errors import InputError
from services.intake.readers import NumberedRun, detect_format, iter_records
from services.store import transaction
from tests.pages._support import open_page
from tests.services.intake.test_intake_readers import mixed_jsonl

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


@pytest.fixture()
def import_page(load_page):  # type: ignore[no-untyped-def]
    return load_page("import_runs")


def _open() -> AppTest:
    return open_page(AppTest.from_file(APP, default_timeout=120), "import_runs", "Import runs")


def _metrics(page: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in page.metric}


def _upload(page: AppTest, name: str, data: bytes) -> None:
    page.file_uploader(key="import.upload").set_value([(name, data, "application/octet-stream")])
    page.run()
    page.button(key="import.import").click().run()
    assert not page.exception, page.exception


def _intake() -> list[tuple[str | None, str]]:
    with transaction() as session:
        return [tuple(r) for r in session.execute(text("SELECT trace_id, status FROM run_intake ORDER BY id"))]


def test_mixed_jsonl_lands_the_good_records_and_lists_the_bad_lines(clean_db):  # type: ignore[no-untyped-def]
    page = _open()
    assert page.button(key="import.import").disabled  # nothing uploaded yet
    assert _metrics(page) == {"Queued": "0", "Assessed": "0", "Failed": "0"}
    assert page.button(key="import.assess").disabled

    _upload(page, "runs.jsonl", mixed_jsonl())
    assert _intake() == [("t-1", "queued"), ("t-3", "queued"), ("t-8", "queued")]
    assert _metrics(page) == {"Accepted": "3", "Already imported": "0", "Bad records": "6",
                              "Queued": "3", "Assessed": "0", "Failed": "0"}  # the counts include this import
    assert "Last import (runs.jsonl): 3 accepted, 0 already imported (same trace id), 6 bad" in [t.value for t in page.text]
    (errors,) = [d.value for d in page.dataframe if list(d.value.columns) == ["line", "reason"]]
    assert errors["line"].tolist() == [2, 4, 5, 6, 7, 9]
    reasons = dict(zip(errors["line"], errors["reason"]))
    assert reasons[2].startswith("not valid JSON") and "answer: required field missing" in reasons[4]
    assert "contexts.0.scor: unknown field" in reasons[5]
    assert not page.button(key="import.assess").disabled
    assert page.button(key="import.assess").label == "Assess 3 queued runs"

    _upload(page, "runs.jsonl", mixed_jsonl())  # the same file again: nothing new
    assert _metrics(page)["Accepted"] == "0" and _metrics(page)["Already imported"] == "3"
    assert len(_intake()) == 3


def test_a_file_that_cannot_be_read_is_an_error_and_nothing_lands(clean_db):  # type: ignore[no-untyped-def]
    page = _open()
    _upload(page, "runs.csv", b"question,answer,colour\nq,a,blue\n")
    (error,) = page.error
    assert error.value.replace("\\", "").startswith("unknown column(s) 'colour'; the columns are question, answer")
    assert "Last import" not in " ".join(t.value for t in page.text)
    assert _intake() == []


def test_the_schema_and_the_example_file_tell_a_user_what_to_upload(clean_db, import_page):  # type: ignore[no-untyped-def]
    page = _open()
    (schema,) = page.json
    shown = json.loads(schema.proto.body)
    assert shown["title"] == "ExternalRun" and {"question", "answer"} <= set(shown["required"])
    assert "contexts" in shown["properties"] and "ExternalContext" in shown["$defs"]
    example = page.get("download_button")[0]
    assert example.proto.label == "Download an example file"

    data = import_page.example_jsonl()
    records = list(iter_records(data, fmt=detect_format(import_page.EXAMPLE_FILE_NAME)))
    assert len(records) == 2 and all(isinstance(r, NumberedRun) for r in records)
    assert records[0].run.contexts[0].document_id == "alarm-manual.md" and records[1].run.trace_id is None
    assert records[1].run.contexts[0].text.startswith("The robot's rated payload")  # a context as its text alone
    assert import_page.import_upload(import_page.EXAMPLE_FILE_NAME, data, max_bytes=len(data)).accepted == 2


def test_uploads_over_the_limit_are_refused_before_reading(clean_db, import_page):  # type: ignore[no-untyped-def]
    data = import_page.example_jsonl()
    with pytest.raises(InputError, match=f"over the upload limit of {len(data) - 1:,} bytes"):
        import_page.import_upload("big.jsonl", data, max_bytes=len(data) - 1)
    assert _intake() == []
    for suffix in import_page.UPLOAD_SUFFIXES:  # every suffix the uploader offers has a reader
        assert detect_format(f"runs.{suffix}") in ("jsonl", "csv", "parquet")


def test_error_frame_keeps_its_columns_when_every_record_is_good(clean_db, import_page):  # type: ignore[no-untyped-def]
    summary = import_page.import_upload("ok.jsonl", import_page.example_jsonl(), max_bytes=10_000)
    frame = import_page.errors_frame(summary)
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == ["line", "reason"] and frame.empty


def _runs() -> list[tuple]:  # type: ignore[type-arg]
    with transaction() as session:
        return [tuple(r) for r in session.execute(text(
            "SELECT trace_id, source, status IN ('pending', 'auto_accepted'), reflection_score, crag_verdict "
            "FROM runs ORDER BY id"))]


def test_assessing_the_queue_turns_imported_records_into_runs(clean_db):  # type: ignore[no-untyped-def]
    page = _open()
    _upload(page, "runs.jsonl", mixed_jsonl())
    page.toggle(key="import.judges").set_value(False).run()  # judges off: the breakdown only, and quick
    page.button(key="import.assess").click().run()
    assert not page.exception and not page.error, (page.exception, page.error)

    assert _intake() == [("t-1", "assessed"), ("t-3", "assessed"), ("t-8", "assessed")]
    assert _runs() == [(trace_id, "import", True, None, None) for trace_id in ("t-1", "t-3", "t-8")]
    (bar,) = page.get("progress")
    assert bar.proto.value == 100 and bar.proto.text == "3 assessed, 0 failed, 0 still queued"
    assert "Last assessment: 3 assessed, 0 failed, 0 still queued" in [t.value for t in page.text]
    metrics = _metrics(page)
    assert (metrics["Queued"], metrics["Assessed"], metrics["Failed"]) == ("0", "3", "0")  # counted after assessing
    assert page.button(key="import.assess").disabled
    assert ("Open the Review queue", "review") in [(link.proto.label, link.proto.page) for link in page.get("page_link")]


def test_progress_state_follows_the_drain(import_page):  # type: ignore[no-untyped-def]
    assert import_page.assess_progress_state(1, 4) == (0.25, "1 of 4 runs assessed")
    assert import_page.assess_progress_state(5, 4)[0] == 1.0 and import_page.assess_progress_state(0, 0)[0] == 1.0
    assert import_page.assess_progress_state(10, 40, 5.0) == (0.25, "10 of 40 runs assessed · 2.0 runs/s · about 15 s left")
    assert import_page.assess_progress_state(10, 1_000, 5.0)[1].endswith("2.0 runs/s · about 8 min left")


def test_a_record_that_cannot_be_assessed_is_listed_with_its_reason(clean_db, import_page):  # type: ignore[no-untyped-def]
    import_page.import_upload("ok.jsonl", import_page.example_jsonl(), max_bytes=10_000)
    with transaction() as session:  # a stored payload that no longer validates (e.g. written by an older version)
        session.execute(text("UPDATE run_intake SET payload = payload - 'question' WHERE trace_id = 'example-0001'"))
    page = _open()
    page.toggle(key="import.judges").set_value(False).run()
    page.button(key="import.assess").click().run()
    assert not page.exception, page.exception
    metrics = _metrics(page)
    assert (metrics["Queued"], metrics["Assessed"], metrics["Failed"]) == ("0", "1", "1")
    (failures,) = [d.value for d in page.dataframe if d.value.columns[0] == "intake id"]
    assert failures["trace id"].tolist() == ["example-0001"]
    assert "no longer validates" in failures["reason"][0] and "question: required field missing" in failures["reason"][0]


def test_traces_that_became_no_run_are_counted_and_listed_with_the_reason(clean_db):  # type: ignore[no-untyped-def]
    from services.intake.otlp import decode_export
    from services.intake.traces import assemble_ready_traces, store_spans
    from tests._otlp import protobuf_body, rag_trace

    page = _open()
    assert any(c.value.startswith("No traces received yet") for c in page.caption)
    not_rag = [s for s in rag_trace() if s.name == "retrieve"]  # documents, but no question and no answer
    rag = rag_trace()
    with transaction() as session:
        for spans in (not_rag, rag):
            store_spans(decode_export(protobuf_body(spans), content_type="application/x-protobuf", content_encoding=None,
                                      max_bytes=10_000_000), session=session)
    with transaction() as session:
        assemble_ready_traces(settle_seconds=0, quiet_seconds=0, session=session)
    st.cache_data.clear()  # the page's counts are cached for 5 s
    page = _open()
    metrics = _metrics(page)
    assert (metrics["Became runs"], metrics["Dropped (not RAG)"], metrics["Refused"]) == ("1", "1", "0")
    [dropped] = [d.value for d in page.dataframe if "reason" in d.value.columns and "spans" in d.value.columns]
    assert list(dropped["what"]) == ["dropped"]
    assert dropped["reason"][0].startswith("not a RAG trace: no question or answer found")
