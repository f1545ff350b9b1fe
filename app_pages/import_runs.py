"""Import runs: another RAG system's answers into the intake, assessed, then into the review queue."""

from __future__ import annotations

import json
import time
from datetime import UTC

import pandas as pd
import streamlit as st

from app_pages._import_traces import cached_traces, rate_and_left, render_traces
from app_pages.common import backlog_line, ensure_store, require_sign_in, show_error
from services.errors import InputError, WorkbenchError
from services.intake.assess import ProcessSummary, process_queue
from services.intake.importing import ImportSummary, import_file
from services.intake.readers import detect_format
from services.intake.schema import ExternalRun, record_json_schema
from services.intake.status import Backlog, IntakeCounts, IntakeFailure, intake_counts, queue_backlog, recent_failures
from services.settings import get_settings
from services.store import transaction

UPLOAD_KEY = "import.upload"
IMPORT_BUTTON_KEY = "import.import"
LAST_IMPORT_KEY = "import.last_import"
JUDGES_KEY = "import.judges"
ASSESS_BUTTON_KEY = "import.assess"
ASSESS_REQUESTED_KEY = "import.assess_requested"
LAST_ASSESS_KEY = "import.last_assess"
UPLOAD_SUFFIXES = ("jsonl", "ndjson", "csv", "parquet", "pq")
ERROR_COLUMNS = ["line", "reason"]
FAILURE_COLUMNS = ["intake id", "trace id", "source", "reason", "when"]
EXAMPLE_FILE_NAME = "example-runs.jsonl"
# Two records: one with everything a context can carry, one with only what is required (a
# context may be its text alone).
_EXAMPLE_RECORDS = (
    {"question": "How do I clear alarm SRVO-062?",
     "answer": "Replace the encoder backup battery, then remaster the axis [1].",
     "trace_id": "example-0001",
     "contexts": [
         {"text": "SRVO-062 BZAL alarm: the encoder backup battery is low. Replace the battery pack, "
                  "then perform a quick mastering of the affected axis.",
          "document_id": "alarm-manual.md", "source": "manuals/alarm-manual.md", "rank": 1, "score": 0.82,
          "bm25_score": 11.4, "dense_similarity": 0.71},
         {"text": "Grease the J2 reducer every 20,000 hours of operation.", "document_id": "maintenance.md",
          "rank": 2, "score": 0.31},
     ],
     "metadata": {"app": "support-bot", "model": "my-llm-v3", "user": "u-123",
                  "timestamp": "2025-05-06T09:30:00Z", "extra": {"latency_ms": 840}}},
    {"question": "What is the maximum payload of the robot?", "answer": "",
     "contexts": ["The robot's rated payload is 7 kg at the wrist flange."]},
)


# --- pure helpers (tested without Streamlit) -----------------------------------------------

def example_jsonl() -> bytes:
    """The downloadable example: valid records (checked against the schema here, not just in tests)."""
    return b"".join(json.dumps(ExternalRun.model_validate(r).to_payload()).encode() + b"\n" for r in _EXAMPLE_RECORDS)


def import_upload(name: str, data: bytes, *, max_bytes: int) -> ImportSummary:
    """Validate one uploaded file and queue its good records; the format comes from the name."""
    if len(data) > max_bytes:
        raise InputError(f"{name} is {len(data):,} bytes, over the upload limit of {max_bytes:,} bytes "
                         "(MAX_UPLOAD_BYTES); split it, or import it with `workbench import FILE`, which has no limit")
    return import_file(data, fmt=detect_format(name))


def import_line(summary: ImportSummary) -> str:
    return (f"{summary.accepted:,} accepted, {summary.duplicates:,} already imported (same trace id), "
            f"{summary.error_count:,} bad")


def errors_frame(summary: ImportSummary) -> pd.DataFrame:
    """One row per bad record: its line (row, for Parquet) and what to fix."""
    return pd.DataFrame([{"line": e.line, "reason": e.reason} for e in summary.errors], columns=ERROR_COLUMNS)


def failures_frame(failures: list[IntakeFailure]) -> pd.DataFrame:
    return pd.DataFrame([
        {"intake id": f.intake_id, "trace id": f.trace_id, "source": f.source, "reason": f.error, "when": f.assessed_at}
        for f in failures
    ], columns=FAILURE_COLUMNS)


def assess_progress_state(done: int, total: int, elapsed_s: float | None = None) -> tuple[float, str]:
    """Bar fraction and text while process_queue drains the queue (`total` as known so far);
    with the seconds since it began, the rate and the time left, as `workbench ingest` shows."""
    line = f"{done:,} of {total:,} runs assessed" + rate_and_left(done, total, elapsed_s, "runs")
    return (min(done / total, 1.0) if total else 1.0), line


def assess_line(summary: ProcessSummary) -> str:
    return f"{summary.assessed:,} assessed, {summary.failed:,} failed, {summary.remaining:,} still queued"


def _clear_cached_counts() -> None:
    cached_intake_counts.clear()
    cached_backlog_now.clear()
    cached_failures.clear()
    cached_traces.clear()  # the assessment moves the trace backlog too


# --- cached getters --------------------------------------------------------------------------

@st.cache_data(ttl=5, show_spinner=False)
def cached_intake_counts() -> IntakeCounts:
    with transaction() as session:
        return intake_counts(session=session)


@st.cache_data(ttl=5, show_spinner=False)
def cached_backlog_now() -> Backlog:
    with transaction() as session:
        return queue_backlog(session=session)


@st.cache_data(ttl=5, show_spinner=False)
def cached_failures() -> list[IntakeFailure]:
    with transaction() as session:
        return recent_failures(limit=50, session=session)


# --- page ------------------------------------------------------------------------------------

def main() -> None:
    require_sign_in()
    st.title("Import runs")
    st.caption("Bring the answers another RAG system gave into the workbench: each record is validated, queued, "
               "then assessed on the contexts it came with (the seven-metric confidence and the judges) and routed "
               "to the review queue like the workbench's own runs.")
    try:
        ensure_store()
    except WorkbenchError as exc:
        show_error(exc)
        return
    _render_format()
    _render_upload()
    _render_assess()
    render_traces()


def _render_format() -> None:
    st.subheader("What to upload")
    st.markdown("A `.jsonl` file with one record per line, or a `.csv` / `.parquet` file with one record per row "
                "(columns `question`, `answer`, `trace_id`, `contexts` as a JSON array of context objects or of "
                "their texts, `metadata` as a JSON object). A record that carries a `trace_id` is imported once: "
                "re-importing a file adds only what is new.")
    st.download_button("Download an example file", data=example_jsonl(), file_name=EXAMPLE_FILE_NAME,
                       mime="application/x-ndjson", key="import.example")
    with st.expander("The schema of one record (JSON Schema)"):
        st.json(record_json_schema(), expanded=2)


def _render_upload() -> None:
    st.subheader("Import a file")
    max_bytes = get_settings().max_upload_bytes
    upload = st.file_uploader("Records", type=list(UPLOAD_SUFFIXES), key=UPLOAD_KEY,
                              help=f"Up to {max_bytes / 1e6:,.0f} MB; larger files: `workbench import FILE`.")
    if st.button("Validate and import", key=IMPORT_BUTTON_KEY, type="primary", disabled=upload is None):
        assert upload is not None  # the button is disabled without a file
        try:
            with st.spinner("Validating and queueing records…"):
                summary = import_upload(upload.name, upload.getvalue(), max_bytes=max_bytes)
        except WorkbenchError as exc:
            show_error(exc)
        else:
            st.session_state[LAST_IMPORT_KEY] = (upload.name, summary)
        finally:
            _clear_cached_counts()
    last = st.session_state.get(LAST_IMPORT_KEY)
    if last is not None:
        _render_import_summary(*last)


def _render_import_summary(name: str, summary: ImportSummary) -> None:
    st.text(f"Last import ({name}): {import_line(summary)}")
    cols = st.columns(3)
    cols[0].metric("Accepted", f"{summary.accepted:,}")
    cols[1].metric("Already imported", f"{summary.duplicates:,}")
    cols[2].metric("Bad records", f"{summary.error_count:,}")
    if summary.error_count:
        st.caption("Bad records did not stop the good ones: fix these lines and import the file again "
                   "(records with a trace id that already landed are skipped).")
        st.dataframe(errors_frame(summary), hide_index=True)
        if summary.error_count > len(summary.errors):
            st.caption(f"Showing the first {len(summary.errors):,} of {summary.error_count:,} bad records.")


def _request_assessment() -> None:
    """The button only asks: the drain runs in the script, above the button, with its progress
    bar, so the counts and the button drawn after it already show what it changed."""
    st.session_state[ASSESS_REQUESTED_KEY] = True


def _render_assess() -> None:
    st.subheader("Assess queued runs")
    counts_area = st.container()
    judges = st.toggle("Run the judges (CRAG, reflection, grading)", value=True, key=JUDGES_KEY,
                       help="Off: only the confidence breakdown of the contexts, like the minimal preset; much "
                            "faster. On: each record as it was sent (a push with judges=false stays without).")
    if st.session_state.pop(ASSESS_REQUESTED_KEY, False):
        _assess(judges=judges)
    try:
        counts = cached_intake_counts()
    except WorkbenchError as exc:
        show_error(exc)
        return
    with counts_area:
        cols = st.columns(3)
        cols[0].metric("Queued", f"{counts.queued:,}")
        cols[1].metric("Assessed", f"{counts.assessed:,}")
        cols[2].metric("Failed", f"{counts.failed:,}")
        if counts.queued:
            _render_backlog()
    label = f"Assess {counts.queued:,} queued runs" if counts.queued else "Nothing queued to assess"
    st.button(label, key=ASSESS_BUTTON_KEY, type="primary", disabled=counts.queued == 0, on_click=_request_assessment)
    last = st.session_state.get(LAST_ASSESS_KEY)
    if last is not None:
        st.text(f"Last assessment: {assess_line(last)}")
    st.page_link("app_pages/review.py", label="Open the Review queue", icon=":material/fact_check:")
    if counts.failed:
        _render_failures()


def _render_backlog() -> None:
    """How far the assessment is behind the pushes and imports (a push is never refused for it)."""
    try:
        backlog = cached_backlog_now()
    except WorkbenchError as exc:
        show_error(exc)
        return
    received = backlog.oldest_received_at
    since = f" (accepted {received.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC)" if received is not None else ""
    st.caption(f"Backlog: {backlog_line(backlog)}{since}. While `workbench api` runs, its worker assesses queued "
               "runs in the background; otherwise the button below or `workbench intake process` does.")


def _assess(*, judges: bool) -> None:
    bar = st.progress(0.0, text="Assessing the queued runs (imported, pushed and from traces)…")
    began = time.monotonic()

    def on_progress(done: int, total: int) -> None:
        bar.progress(*assess_progress_state(done, total, time.monotonic() - began))

    try:
        summary = process_queue(judges=judges, on_progress=on_progress)
    except WorkbenchError as exc:
        bar.empty()
        show_error(exc)
        return
    finally:
        _clear_cached_counts()
    bar.progress(1.0, text=assess_line(summary))
    st.session_state[LAST_ASSESS_KEY] = summary


def _render_failures() -> None:
    try:
        failures = cached_failures()
    except WorkbenchError as exc:
        show_error(exc)
        return
    with st.expander(f"Records that could not be assessed (the {len(failures):,} newest)"):
        st.dataframe(failures_frame(failures), hide_index=True)
        st.caption("The reason says what kept the record from being assessed.")


if __name__ == "__main__":  # run as a page (Streamlit runs it as __main__); importable for tests
    main()
