"""The Import runs page's trace backlog under AppTest on the real store: traces waiting to be
assembled and runs from traces waiting for assessment are counted, and the bar follows them
through as the worker's two steps (assembly, assessment) take them, until none waits."""

from __future__ import annotations

import re
from pathlib import Path

import streamlit as st
from streamlit.testing.v1 import AppTest

from services.intake.assess import process_queue
from services.intake.otlp import decode_export
from services.intake.trace_status import TraceCounts
from services.intake.traces import assemble_ready_traces, store_spans
from services.store import transaction
from tests._otlp import protobuf_body, rag_trace
from tests.pages._support import open_page

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def _store(spans) -> None:  # type: ignore[no-untyped-def]
    with transaction() as session:
        store_spans(decode_export(protobuf_body(spans), content_type="application/x-protobuf", content_encoding=None,
                                  max_bytes=10_000_000), session=session)


def _assemble(*, quiet: float) -> None:
    with transaction() as session:
        assemble_ready_traces(settle_seconds=0, quiet_seconds=quiet, session=session)


def _backlog(page: AppTest) -> tuple[dict[str, str], list[tuple[int, str]]]:
    """The backlog's two counts and the page's progress bars (value, text)."""
    metrics = {m.label: m.value for m in page.metric}
    counts = {k: metrics[k] for k in ("Traces waiting to be assembled", "Runs from traces waiting for assessment")}
    return counts, [(bar.proto.value, bar.proto.text) for bar in page.get("progress")]


def _rerun(page: AppTest) -> None:
    st.cache_data.clear()  # the page's counts are cached for 5 s
    page.run()
    assert not page.exception, page.exception


def test_the_trace_backlog_is_counted_and_its_bar_follows_the_worker(clean_db):  # type: ignore[no-untyped-def]
    for _ in range(3):
        _store(rag_trace())
    _store([s for s in rag_trace() if s.name == "retrieve"])  # rootless and not RAG: waits for the quiet period
    _store([s for s in rag_trace() if s.parent is not None])  # rootless RAG: waits too
    page = open_page(AppTest.from_file(APP, default_timeout=120), "import_runs", "Import runs")
    assert _backlog(page) == ({"Traces waiting to be assembled": "5", "Runs from traces waiting for assessment": "0"},
                              [(0, "0 of 5 traces through since this page saw the backlog")])

    _assemble(quiet=60)  # the three whole traces become queued runs
    _rerun(page)
    assert _backlog(page) == ({"Traces waiting to be assembled": "2", "Runs from traces waiting for assessment": "3"},
                              [(0, "0 of 5 traces through since this page saw the backlog")])

    assert process_queue(judges=False).assessed == 3
    _rerun(page)
    counts, [(value, line)] = _backlog(page)
    assert counts == {"Traces waiting to be assembled": "2", "Runs from traces waiting for assessment": "0"}
    assert value == 60  # 3 of 5
    # the rate is measured, not asserted: only that it and the time left are said
    assert re.fullmatch(r"3 of 5 traces through since this page saw the backlog · [\d.]+ traces/s · about \d+ (s|min) left",
                        line), line

    _assemble(quiet=0)  # the quiet period over: one dropped, one a run
    assert process_queue(judges=False).assessed == 1
    _rerun(page)
    assert _backlog(page) == ({"Traces waiting to be assembled": "0", "Runs from traces waiting for assessment": "0"}, [])
    assert "No trace backlog: every trace received is assessed, dropped or refused." in [c.value for c in page.caption]
    metrics = {m.label: m.value for m in page.metric}
    assert (metrics["Became runs"], metrics["Dropped (not RAG)"]) == ("4", "1")


def test_backlog_progress_state_counts_from_the_mark(load_page) -> None:  # type: ignore[no-untyped-def]
    traces = load_page("_import_traces")

    def counts(open_: int, assembled: int, runs_waiting: int, dropped: int = 0) -> TraceCounts:
        return TraceCounts(open=open_, assembled=assembled, dropped=dropped, refused=0, late_spans=0,
                           runs_waiting=runs_waiting)

    first = counts(10, 10, 5)  # 5 through already (their runs assessed); 10 to assemble and 5 to assess
    mark = traces.next_backlog_mark(None, first, 100.0)
    assert (mark.through, mark.at_s) == (5, 100.0)
    assert traces.backlog_progress_state(mark, first, 100.0) == (0.0, "0 of 15 traces through since this page saw the backlog")
    later = counts(0, 18, 3, dropped=2)  # 8 assembled and 2 dropped since; 3 runs still queued
    assert traces.next_backlog_mark(mark, later, 106.0) is mark  # kept while the backlog lasts
    assert traces.backlog_progress_state(mark, later, 106.0) == (
        0.8, "12 of 15 traces through since this page saw the backlog · 2.0 traces/s · about 2 s left")
    assert traces.next_backlog_mark(mark, counts(0, 18, 0, dropped=2), 108.0) is None  # gone: no bar
