"""Corpus: upload and ingest files (then self-calibrate a big enough collection), corpus statistics,
the documents list, deleting a document."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd
import streamlit as st

from app_pages.common import (
    as_plain,
    cached_active_profile_label,
    cached_corpus_stats,
    current_user,
    ensure_store,
    require_sign_in,
    show_error,
)
from services.auth import CurrentUser, require_admin
from services.charts import evaluation as charts
from services.corpus.extract import SUPPORTED_SUFFIXES
from services.corpus.ingest import IngestProgress, IngestSummary, ingest_uploads
from services.corpus.progress import ProgressMeter
from services.corpus.stats import DocumentInfo, delete_document, list_documents, sample_documents
from services.errors import WorkbenchError
from services.scoring.recalibration import AFTER_INGEST, Recalibration, decide_recalibration, describe_calibration, recalibrate

COLLECTION = "default"  # the collection the Ask and Search pages answer from
PAGE_SIZE = 100  # documents per page of the list: one page is read, never the whole collection
HISTOGRAM_SAMPLE = 2_000  # documents the chunks-per-document histogram is drawn from
UPLOADS_KEY = "corpus.uploads"
LAST_INGEST_KEY = "corpus.last_ingest"
LAST_CALIBRATION_KEY = "corpus.last_calibration"  # the Recalibration after the last ingest, when one ran
DELETE_TARGET_KEY = "corpus.delete_target"
DELETE_CONFIRM_KEY = "corpus.delete_confirm"
DELETE_RESULT_KEY = "corpus.delete_result"
FILTER_KEY = "corpus.filter"
PAGE_KEY = "corpus.page"  # 0-based page of the documents list
OUTCOME_COLUMNS = ["file", "document", "status", "chunks", "reason"]


# --- pure helpers (tested without Streamlit) -----------------------------------------------

def ingest_files(
    files: Sequence[tuple[str, bytes]], *, on_progress: Callable[[IngestProgress], None] | None = None
) -> IngestSummary:
    """Ingest uploaded (name, bytes) pairs into the corpus; bad files come back as skipped rows."""
    try:
        return ingest_uploads(files, collection=COLLECTION, on_progress=on_progress)
    finally:
        cached_corpus_stats.clear()  # even a failed batch may have committed earlier batches


def outcomes_frame(summary: IngestSummary) -> pd.DataFrame:
    """One row per file (or JSONL line/document): what happened to it and why."""
    rows = [
        {"file": str(o.get("source", "")), "document": str(o.get("external_id", "")), "status": str(o["status"]),
         "chunks": o.get("chunks"), "reason": str(o.get("reason", ""))}
        for o in summary.outcomes
    ]
    return pd.DataFrame(rows, columns=OUTCOME_COLUMNS).astype({"chunks": "Int64"})


def summary_line(summary: IngestSummary) -> str:
    return (f"{summary.ingested} ingested, {summary.replaced} replaced, {summary.unchanged} unchanged, "
            f"{len(summary.skipped)} skipped; {summary.chunks_added} chunks added")


def progress_state(progress: IngestProgress, meter: ProgressMeter) -> tuple[float, str]:
    """Bar fraction and text: documents of those expected (counted before reading), chunks/s and
    the time left over the last half minute, and the documents skipped as already ingested.
    The bar stops short of full until the ingest says it is done."""
    reading = meter.read(progress)
    fraction = reading.fraction if progress.documents_total is not None else min(reading.fraction, 0.99)
    return fraction, reading.describe()


def documents_frame(documents: Sequence[DocumentInfo]) -> pd.DataFrame:
    """One page of the documents list (filtered by the store, see list_documents)."""
    rows = [
        {"external id": d.external_id, "title": d.title, "chunks": d.chunks, "tokens": d.tokens, "updated": d.updated_at}
        for d in documents
    ]
    return pd.DataFrame(rows, columns=["external id", "title", "chunks", "tokens", "updated"])


def page_caption(*, page: int, shown: int, more: bool, total: int, filtered: bool) -> str:
    """e.g. 'documents 101–200 of 1,234' or, filtered, 'documents 1–7 matching the filter'."""
    if not shown:
        return "no documents match the filter" if filtered else "no documents on this page"
    first = page * PAGE_SIZE + 1
    span = f"documents {first:,}–{first + shown - 1:,}"
    if filtered:
        return f"{span} matching the filter" + (" (more on the next page)" if more else "")
    return f"{span} of {total:,}"


def delete_as(user: CurrentUser, external_id: str) -> None:
    """Delete one document if `user` is an administrator (PermissionDeniedError otherwise)."""
    require_admin(user, "delete documents")
    delete_document(external_id, COLLECTION)
    cached_corpus_stats.clear()


# --- the page --------------------------------------------------------------------------------

def main() -> None:
    user = require_sign_in()
    st.title("Corpus")
    try:
        ensure_store()
    except WorkbenchError as exc:
        show_error(exc)
        return
    stats_area = st.container()  # filled last, so it shows the corpus after this run's ingest
    _render_upload()
    try:
        filter_text = st.session_state.get(FILTER_KEY, "").strip()
        page = int(st.session_state.get(PAGE_KEY, 0))
        # One row past the page tells whether there is a next one, without counting the matches.
        listed = list_documents(COLLECTION, limit=PAGE_SIZE + 1, offset=page * PAGE_SIZE, contains=filter_text)
        documents, more = listed[:PAGE_SIZE], len(listed) > PAGE_SIZE
        with stats_area:
            total = _render_stats()
    except WorkbenchError as exc:
        show_error(exc)
        return
    _render_documents(documents, page=page, more=more, total=total, filtered=bool(filter_text))
    _render_delete(user, documents)


def _render_upload() -> None:
    st.subheader("Add documents")
    suffixes = [s.lstrip(".") for s in SUPPORTED_SUFFIXES]
    uploads = st.file_uploader("Files", type=suffixes, accept_multiple_files=True, key=UPLOADS_KEY,
                               help="Re-uploading a file replaces the document if its text changed.")
    st.caption(f"Supported: {', '.join(SUPPORTED_SUFFIXES)}. JSONL files hold one BEIR document per line.")
    if st.button("Ingest", key="corpus.ingest", type="primary", disabled=not uploads):
        files = [(f.name, f.getvalue()) for f in uploads or []]
        bar = st.progress(0.0, text="Reading files…")
        meter = ProgressMeter()

        def on_progress(progress: IngestProgress) -> None:
            fraction, label = progress_state(progress, meter)
            bar.progress(fraction, text=label)

        try:
            summary = ingest_files(files, on_progress=on_progress)
        except WorkbenchError as exc:
            bar.empty()
            show_error(exc)
            return
        bar.progress(1.0, text=summary_line(summary))
        st.session_state[PAGE_KEY] = 0
        st.session_state[LAST_INGEST_KEY] = summary
        st.session_state[LAST_CALIBRATION_KEY] = _recalibrate(summary)
    summary = st.session_state.get(LAST_INGEST_KEY)
    if summary is not None:
        st.text(f"Last ingest: {summary_line(summary)}")
        if summary.unchanged:
            st.caption(f"{summary.unchanged:,} skipped: already ingested with the same content, not embedded again.")
        _render_recalibration(st.session_state.get(LAST_CALIBRATION_KEY))
        st.dataframe(outcomes_frame(summary), hide_index=True)


def _recalibrate(summary: IngestSummary) -> Recalibration | str | None:
    """Self-calibrate the collection when this ingest calls for it (the same rule as `workbench
    ingest`). The ingest is committed already, so a failure here only comes back as a warning."""
    try:
        decision = decide_recalibration(summary, collection=COLLECTION)
        if not decision.recalibrate:
            return None
        bar = st.progress(0.0, text=f"Self-calibrating: {decision.reason}…")

        def on_progress(done: int, total: int) -> None:
            bar.progress(min(done / total, 1.0), text=f"Self-calibrating: {done:,} of {total:,} searches")

        user = current_user()
        outcome = recalibrate(decision, created_by=f"{AFTER_INGEST} by {user.name}" if user.name else AFTER_INGEST,
                              on_progress=on_progress)
        bar.empty()
    except WorkbenchError as exc:
        return f"Self-calibration was not done: {exc}"
    cached_active_profile_label.clear()  # the sidebar names the profile now active
    return outcome


def _render_recalibration(outcome: Recalibration | str | None) -> None:
    if isinstance(outcome, str):
        st.warning(as_plain(outcome))
    elif outcome is not None and outcome.warning is not None:
        st.warning(as_plain(outcome.warning))
    elif outcome is not None and outcome.result is not None:
        lines = describe_calibration(outcome.result)
        st.success(as_plain(f"Self-calibrated after the ingest: {lines[0]}; it is now the active profile."))
        st.text("\n".join(lines[1:]))


def _render_stats() -> int:
    """The collection's figures (stored totals and samples: fast at a million chunks); returns
    the document count."""
    stats = cached_corpus_stats()
    about = "~" if stats.estimated else ""
    cols = st.columns(4)
    cols[0].metric("Documents", f"{about}{stats.documents:,}")
    cols[1].metric("Chunks", f"{stats.chunks:,}")
    cols[2].metric("Terms", f"{about}{stats.terms:,}")
    cols[3].metric("Avg chunk tokens", f"{stats.avg_chunk_tokens:.1f}")
    if stats.estimated:
        st.caption("~ estimated from the database's statistics (counting takes too long at this size).")
    sample = sample_documents(COLLECTION, n=HISTOGRAM_SAMPLE, documents=stats.documents)
    st.plotly_chart(charts.chunks_per_document_figure(sample), key="corpus.chunks_histogram")
    if stats.documents > len(sample):
        st.caption(f"Chunks per document over a sample of {len(sample):,} of the {stats.documents:,} documents.")
    return stats.documents


def _filter_changed() -> None:
    st.session_state[PAGE_KEY] = 0  # a new filter starts at its first match


def _turn_page(step: int) -> None:
    st.session_state[PAGE_KEY] = max(0, int(st.session_state.get(PAGE_KEY, 0)) + step)


def _render_documents(documents: Sequence[DocumentInfo], *, page: int, more: bool, total: int, filtered: bool) -> None:
    st.subheader("Documents")
    st.text_input("Filter", key=FILTER_KEY, placeholder="part of an id or title", on_change=_filter_changed)
    st.dataframe(documents_frame(documents), hide_index=True)
    left, middle, right = st.columns([1, 4, 1])
    left.button("Previous", key="corpus.previous", disabled=page == 0, on_click=_turn_page, args=(-1,))
    middle.caption(page_caption(page=page, shown=len(documents), more=more, total=total, filtered=filtered))
    right.button("Next", key="corpus.next", disabled=not more, on_click=_turn_page, args=(1,))


def _delete_clicked() -> None:
    """Runs before the next script run: decide with the user as of the click, not the render."""
    target = st.session_state.get(DELETE_TARGET_KEY)
    if not st.session_state.get(DELETE_CONFIRM_KEY):
        st.session_state[DELETE_RESULT_KEY] = ("warning", "Tick the box to confirm the deletion first.", "")
        return
    try:
        delete_as(current_user(), str(target))
    except WorkbenchError as exc:
        st.session_state[DELETE_RESULT_KEY] = ("error", str(exc), "")
        return
    st.session_state[DELETE_CONFIRM_KEY] = False
    st.session_state[DELETE_RESULT_KEY] = ("success", "Deleted this document:", str(target))


def _render_delete(user: CurrentUser, documents: Sequence[DocumentInfo]) -> None:
    st.subheader("Delete a document")
    result = st.session_state.pop(DELETE_RESULT_KEY, None)
    if result is not None:
        kind, message, deleted = result
        {"error": st.error, "warning": st.warning, "success": st.success}[kind](message)
        if deleted:
            st.text(deleted)  # an id is user data: plain text, never markdown
    if not documents:
        st.caption("No documents to delete.")
        return
    st.selectbox("Document (on this page of the list)", [d.external_id for d in documents], key=DELETE_TARGET_KEY,
                 disabled=not user.is_admin)
    st.checkbox("I understand the document, its chunks and its index entries are removed for good",
                key=DELETE_CONFIRM_KEY, disabled=not user.is_admin)
    st.button("Delete document", key="corpus.delete", on_click=_delete_clicked, disabled=not user.is_admin)
    if not user.is_admin:
        st.caption("Only administrators can delete documents; ask an admin to add you to the admin list.")


if __name__ == "__main__":  # run as a page (Streamlit runs it as __main__); importable for tests
    main()
