"""Export: choose runs by status, verdict, reviewer, date and profile; preview; download. The page
says "reviewed answers", so it starts with the reviewed runs only; each record carries the
contexts the answer was given, so the file is a ready evaluation set."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import pandas as pd
import streamlit as st

from app_pages.common import empty_state, ensure_store, require_sign_in, show_error
from services.domain import STATUSES
from services.errors import WorkbenchError
from services.review.days import day_range
from services.review.export import DATE_FIELDS, VERDICTS, ExportFilters, count_export_records, export_records
from services.review.export_formats import FORMATS, export_bytes
from services.scoring.calibration import QUEUE_MIN_VERDICTS, calibrator_for_queue
from services.scoring.profiles import list_profiles
from services.scoring.weights import DEFAULT_PROFILE

ANY = "any"
PREVIEW_ROWS = 50
PREVIEW_COLUMNS = ("run_id", "created_at", "question", "final_answer", "contexts", "final_level", "final_confidence",
                   "calibrated_probability", "status", "verdict", "reviewer", "flag_reason", "reviewed_at",
                   "weights_profile")
# A download is built in this process's memory (Streamlit hands bytes to the browser): up to
# this many runs; past it the page gives the `workbench export` command, which streams.
DOWNLOAD_MAX_RUNS = 20_000
MIME_TYPES = {"csv": "text/csv", "jsonl": "application/jsonl", "parquet": "application/vnd.apache.parquet"}


@dataclass(frozen=True)
class Download:
    data: bytes
    file_name: str
    mime: str


# --- pure data helpers -----------------------------------------------------------------------

def export_filters(*, statuses: Sequence[str], verdict: str, reviewer: str, date_field: str, start: date | None,
                   end: date | None, profile: str) -> ExportFilters:
    """The widgets' values as ExportFilters; dates are whole UTC days, `end` included
    (a range that ends before it starts is an InputError)."""
    since, until = day_range(start, end)
    return ExportFilters(
        statuses=tuple(statuses), verdict=None if verdict == ANY else verdict, reviewer=reviewer.strip() or None,
        date_field=date_field, profile=None if profile == ANY else profile, since=since, until=until,
    )


def export_download(records: Sequence[dict[str, Any]], fmt: str, *, now: datetime) -> Download:
    """The file the download button hands out: export_bytes of exactly the previewed records."""
    return Download(export_bytes(records, fmt), f"workbench-export-{now:%Y%m%d-%H%M}.{fmt}", MIME_TYPES[fmt])


def export_command(filters: ExportFilters) -> str:
    """The `workbench export` line that writes the same selection (shell-quoted)."""
    parts = ["workbench", "export", "-o", "export.jsonl"]
    for status in filters.statuses:
        parts += ["--status", status]
    for option, value in (("--verdict", filters.verdict), ("--reviewer", filters.reviewer),
                          ("--profile", filters.profile), ("--collection", filters.collection),
                          ("--since", filters.since.isoformat() if filters.since else None),
                          ("--until", filters.until.isoformat() if filters.until else None)):
        if value is not None:
            parts += [option, value]
    if filters.date_field != "created":
        parts += ["--date-field", filters.date_field]
    return shlex.join(parts)


def preview_frame(records: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The first records, their contexts counted (the file holds them whole)."""
    return pd.DataFrame([{c: len(r[c]) if c == "contexts" else r[c] for c in PREVIEW_COLUMNS}
                         for r in records[:PREVIEW_ROWS]], columns=list(PREVIEW_COLUMNS))


# --- page ------------------------------------------------------------------------------------

@st.cache_data(ttl=30, show_spinner=False)
def _profile_labels() -> list[str]:
    return sorted({DEFAULT_PROFILE.label, *(profile.label for _, profile, _ in list_profiles())})


def main() -> None:
    require_sign_in()
    st.title("Export reviewed answers")
    try:
        ensure_store()
        filters = _render_filters()
        calibrator = calibrator_for_queue()
        matching = count_export_records(filters)
        # The whole selection only when it is downloadable; else the preview's rows alone.
        records = export_records(filters, calibrate=calibrator,
                                 limit=None if matching <= DOWNLOAD_MAX_RUNS else PREVIEW_ROWS)
    except WorkbenchError as exc:
        show_error(exc)
        return
    if calibrator is not None:
        st.caption(f"calibrated_probability: P(approved) from the review queue's calibrator ({calibrator.n_fitted} verdicts).")
    else:
        st.caption(f"calibrated_probability is empty: a calibrator is fitted once there are {QUEUE_MIN_VERDICTS} "
                   "verdicts, some approved and some flagged or corrected.")
    _render_preview(records, matching)
    if records and matching <= DOWNLOAD_MAX_RUNS:
        _render_download(records)
    elif records:
        st.info(f"{matching:,} runs are more than a download from this page holds ({DOWNLOAD_MAX_RUNS:,}). Narrow "
                "the filters, or export them all with the command line, which streams them to a file:")
        st.code(export_command(filters), language="bash")


def _render_filters() -> ExportFilters:
    c1, c2, c3 = st.columns(3)
    statuses = c1.multiselect("Status", STATUSES, default=list(VERDICTS), key="export.statuses", placeholder="any status",
                              help="Reviewed runs (approved, flagged, corrected) to start with; add pending or "
                                   "auto-accepted to export runs no person has reviewed, or clear it for every run.")
    verdict = c2.selectbox("Verdict", (ANY, *VERDICTS), key="export.verdict")
    reviewer = c3.text_input("Reviewer", key="export.reviewer", placeholder="any reviewer")
    d1, d2, d3, d4 = st.columns(4)
    date_field = d1.radio("Date", DATE_FIELDS, format_func=lambda f: f"{f} at", key="export.date_field")
    start = d2.date_input("From (UTC)", value=None, key="export.since")
    end = d3.date_input("To (UTC, inclusive)", value=None, key="export.until")
    profile = d4.selectbox("Weights profile", (ANY, *_profile_labels()), key="export.profile")
    return export_filters(statuses=statuses, verdict=verdict, reviewer=reviewer, date_field=date_field, start=start,
                          end=end, profile=profile)


def _render_preview(records: Sequence[dict[str, Any]], matching: int) -> None:
    st.metric("Runs matching", f"{matching:,}")
    if not records:
        empty_state("No runs match these filters; nothing to export. Reviewed answers land here after they are "
                    "approved, flagged or corrected in the Review queue.", "app_pages/review.py", "Open the review queue",
                    ":material/fact_check:")
        return
    if matching > PREVIEW_ROWS:
        st.caption(f"Preview of the first {PREVIEW_ROWS} of {matching:,} runs (oldest first); the file holds all of them.")
    st.dataframe(preview_frame(records), hide_index=True, key="export.preview",
                 column_config={"contexts": st.column_config.NumberColumn(
                     help="How many contexts the answer was given; the file holds each one's text, document id and "
                          "scores")})
    st.caption("Each record holds the question, the contexts the answer was given (text, document id, scores), the "
               "answer a reviewer stood behind (the correction where there is one) and the verdict: with the reviewed "
               "runs only, an evaluation or fine-tuning set as it is.")


def _render_download(records: Sequence[dict[str, Any]]) -> None:
    fmt = st.radio("Format", FORMATS, horizontal=True, key="export.format")
    try:
        download = export_download(records, fmt, now=datetime.now(UTC))
    except WorkbenchError as exc:
        show_error(exc)
        return
    st.download_button(f"Download {len(records):,} runs as {fmt}", data=download.data, file_name=download.file_name,
                       mime=download.mime, key="export.download", type="primary")


# Streamlit runs pages as __main__; tests import this module for its pure helpers.
if __name__ == "__main__":
    main()
