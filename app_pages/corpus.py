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
from services.corpus.stats import DocumentInfo, delete_document, list_documents
from services.errors import WorkbenchError
from services.scoring.recalibration import AFTER_INGEST, Recalibration, decide_recalibration, describe_calibration, recalibrate

COLLECTION = "default"  # the collection the Ask and Search pages answer from
DOCUMENT_LIMIT = 10_000
UPLOADS_KEY = "corpus.uploads"
LAST_INGEST_KEY = "corpus.last_ingest"
LAST_CALIBRATION_KEY = "corpus.last_calibration"  # the Recalibration after the last ingest, when one ran
DELETE_TARGET_KEY = "corpus.delete_target"
DELETE_CONFIRM_KEY = "corpus.delete_confirm"
DELETE_RESULT_KEY = "corpus.delete_result"
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


def progress_state(progress: IngestProgress, expected_files: int) -> tuple[float, str]:
    """Bar fraction and text. Until the end the total is unknown (a JSONL file holds many
    documents), so the file count stands in for it and the bar stops short of full."""
    done = progress.documents_done
    if progress.documents_total is not None:
        fraction = 1.0 if progress.documents_total == 0 else min(done / progress.documents_total, 1.0)
        return fraction, f"{done} documents processed, {progress.chunks_done} chunks added"
    fraction = min(done / max(expected_files, done + 1), 0.99)
    return fraction, f"{done} documents processed so far, {progress.chunks_done} chunks added"


def documents_frame(documents: Sequence[DocumentInfo], filter_text: str = "") -> pd.DataFrame:
    """The documents list, narrowed to those whose id, title or source contains the filter."""
    needle = filter_text.strip().lower()
    rows = [
        {"external id": d.external_id, "title": d.title, "chunks": d.chunks, "tokens": d.tokens, "updated": d.updated_at}
        for d in documents
        if not needle or needle in d.external_id.lower() or needle in d.title.lower() or needle in d.source.lower()
    ]
    return pd.DataFrame(rows, columns=["external id", "title", "chunks", "tokens", "updated"])


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
        documents = list_documents(COLLECTION, limit=DOCUMENT_LIMIT)
        with stats_area:
            _render_stats(documents)
    except WorkbenchError as exc:
        show_error(exc)
        return
    _render_documents(documents)
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

        def on_progress(progress: IngestProgress) -> None:
            fraction, label = progress_state(progress, len(files))
            bar.progress(fraction, text=label)

        try:
            summary = ingest_files(files, on_progress=on_progress)
        except WorkbenchError as exc:
            bar.empty()
            show_error(exc)
            return
        bar.progress(1.0, text=summary_line(summary))
        st.session_state[LAST_INGEST_KEY] = summary
        st.session_state[LAST_CALIBRATION_KEY] = _recalibrate(summary)
    summary = st.session_state.get(LAST_INGEST_KEY)
    if summary is not None:
        st.text(f"Last ingest: {summary_line(summary)}")
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


def _render_stats(documents: list[DocumentInfo]) -> None:
    stats = cached_corpus_stats()
    cols = st.columns(4)
    cols[0].metric("Documents", f"{stats.documents:,}")
    cols[1].metric("Chunks", f"{stats.chunks:,}")
    cols[2].metric("Terms", f"{stats.terms:,}")
    cols[3].metric("Avg chunk tokens", f"{stats.avg_chunk_tokens:.1f}")
    st.plotly_chart(charts.chunks_per_document_figure(documents), key="corpus.chunks_histogram")


def _render_documents(documents: list[DocumentInfo]) -> None:
    st.subheader("Documents")
    filter_text = st.text_input("Filter", key="corpus.filter", placeholder="part of an id, title or file name")
    frame = documents_frame(documents, filter_text)
    st.dataframe(frame, hide_index=True)
    shown = f"{len(frame):,} of {len(documents):,} documents"
    if len(documents) >= DOCUMENT_LIMIT:
        shown += f" (the list stops at the first {DOCUMENT_LIMIT:,})"
    st.caption(shown)


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


def _render_delete(user: CurrentUser, documents: list[DocumentInfo]) -> None:
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
    st.selectbox("Document", [d.external_id for d in documents], key=DELETE_TARGET_KEY, disabled=not user.is_admin)
    st.checkbox("I understand the document, its chunks and its index entries are removed for good",
                key=DELETE_CONFIRM_KEY, disabled=not user.is_admin)
    st.button("Delete document", key="corpus.delete", on_click=_delete_clicked, disabled=not user.is_admin)
    if not user.is_admin:
        st.caption("Only administrators can delete documents; ask an admin to add you to the admin list.")


if __name__ == "__main__":  # run as a page (Streamlit runs it as __main__); importable for tests
    main()
