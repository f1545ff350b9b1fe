"""Document trends: the documents that keep turning up in answers a reviewer flagged or corrected,
or answered with low confidence and not approved."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime

import pandas as pd
import streamlit as st

from app_pages.common import ensure_store, require_sign_in, show_error
from services.charts.documents import FIX_FIRST_TOP, document_label, document_trend_figure, fix_first_figure
from services.errors import WorkbenchError
from services.review.days import day_range
from services.review.documents import DocumentRun, DocumentTrend, document_runs, document_trends
from services.store import read_transaction

TABLE_LIMIT = 200  # documents listed (and offered in the drill-down), in fix-first order
RUNS_LIMIT = 200
SINCE_KEY = "documents.since"
UNTIL_KEY = "documents.until"
MIN_RUNS_KEY = "documents.min_runs"
SELECTED_KEY = "documents.selected"
TREND_COLUMNS = ("document", "collection", "title", "runs", "flagged", "corrected", "low confidence", "troubled share",
                 "mean confidence", "retrieved", "cited", "approved", "pending", "auto-accepted")
RUN_COLUMNS = ("run id", "question", "status", "confidence", "level", "rank", "cited", "source", "created")
EMPTY_STATE = ("No stored run has retrieved or cited a document{scope}. Every answered question fills this page: "
               "ask on the Ask page, or bring another system's answers in on the Import runs page; the documents "
               "their answers drew on are listed here with how those answers fared.")


# --- pure data helpers -----------------------------------------------------------------------

def trends_frame(trends: Sequence[DocumentTrend]) -> pd.DataFrame:
    """The fix-first table: one row per document, in the order given."""
    return pd.DataFrame([
        {"document": t.external_id, "collection": t.collection, "title": t.title, "runs": t.runs,
         "flagged": t.flagged, "corrected": t.corrected, "low confidence": t.low_confidence,
         "troubled share": t.troubled_share, "mean confidence": t.mean_confidence, "retrieved": t.retrieved,
         "cited": t.cited, "approved": t.approved, "pending": t.pending, "auto-accepted": t.auto_accepted}
        for t in trends
    ], columns=list(TREND_COLUMNS))


def runs_frame(runs: Sequence[DocumentRun]) -> pd.DataFrame:
    """The drill-down: the runs one document appeared in, newest first."""
    return pd.DataFrame([
        {"run id": r.run_id, "question": r.query, "status": r.status, "confidence": r.final_confidence,
         "level": r.final_level, "rank": r.best_rank, "cited": r.cited, "source": r.source, "created": r.created_at}
        for r in runs
    ], columns=list(RUN_COLUMNS)).astype({"rank": "Int64"})


# --- cached getters --------------------------------------------------------------------------

@st.cache_data(ttl=10, show_spinner="Counting documents in stored runs…")
def cached_trends(since: datetime | None, until: datetime | None, min_runs: int) -> list[DocumentTrend]:
    """One more than TABLE_LIMIT, so the page can say when the list was cut (read on the replica
    when there is one: DATABASE_READ_URL)."""
    with read_transaction() as session:
        return document_trends(since=since, until=until, min_runs=min_runs, limit=TABLE_LIMIT + 1, session=session)


@st.cache_data(ttl=10, show_spinner=False)
def cached_document_runs(external_id: str, collection: str, since: datetime | None,
                         until: datetime | None) -> list[DocumentRun]:
    with read_transaction() as session:
        return document_runs(external_id, collection=collection, since=since, until=until, limit=RUNS_LIMIT,
                             session=session)


# --- page ------------------------------------------------------------------------------------

def main() -> None:
    require_sign_in()
    st.title("Document trends")
    st.caption("Which documents keep appearing in troubled answers (flagged or corrected by a reviewer, or low "
               "confidence and not approved): the ones to fix first. A document appears in a run when the run's best "
               "iteration retrieved it or its answer cited it. Documents another system's answers drew on that the "
               "corpus does not hold are listed under \"outside the corpus\" and the runs' source.")
    try:
        ensure_store()
        start, end, min_runs = _render_filters()
        since, until = day_range(start, end)
        trends = cached_trends(since, until, min_runs)
    except WorkbenchError as exc:
        show_error(exc)
        return
    if not trends:
        filtered = start is not None or end is not None or min_runs > 1
        st.info(EMPTY_STATE.format(scope=" with these filters" if filtered else " yet"))
        st.page_link("app_pages/ask.py", label="Ask a question", icon=":material/chat:")
        st.page_link("app_pages/import_runs.py", label="Import runs", icon=":material/upload_file:")
        return
    shown = trends[:TABLE_LIMIT]
    _render_fix_first(shown, cut=len(trends) > TABLE_LIMIT)
    _render_drilldown(shown, since, until)


def _render_filters() -> tuple[date | None, date | None, int]:
    left, middle, right = st.columns(3)
    start = left.date_input("Runs from (UTC)", value=None, key=SINCE_KEY)
    end = middle.date_input("Runs to (UTC)", value=None, key=UNTIL_KEY)
    min_runs = right.number_input("At least this many runs", min_value=1, value=1, step=1, key=MIN_RUNS_KEY,
                                  help="Leave out documents that appeared in fewer runs.")
    return start, end, int(min_runs)


def _render_fix_first(trends: Sequence[DocumentTrend], *, cut: bool) -> None:
    st.subheader("Fix first")
    st.plotly_chart(fix_first_figure(trends), key="documents.fix_first_chart")
    st.dataframe(trends_frame(trends), hide_index=True, column_config={
        "troubled share": st.column_config.NumberColumn(format="percent",
                                                        help="Runs flagged or corrected by a reviewer, or answered "
                                                             "with LOW / VERY LOW confidence and not approved"),
        "mean confidence": st.column_config.NumberColumn(format="%.3f"),
    })
    shown = f"{len(trends):,} documents, most troubled runs first"
    if cut:
        shown += f" (the list stops at the first {TABLE_LIMIT:,}; narrow the dates or raise the minimum runs)"
    st.caption(shown + f". The chart shows the first {min(FIX_FIRST_TOP, len(trends))}.")


def _render_drilldown(trends: Sequence[DocumentTrend], since: datetime | None, until: datetime | None) -> None:
    st.subheader("One document over time")
    by_label = {document_label(t): t for t in trends}
    label = st.selectbox("Document", tuple(by_label), key=SELECTED_KEY)
    trend = by_label.get(label) if label is not None else None
    if trend is None:
        return
    cols = st.columns(4)
    cols[0].metric("Runs", f"{trend.runs:,}")
    cols[1].metric("Mean confidence", f"{trend.mean_confidence:.3f}")
    cols[2].metric("Flagged or corrected", f"{trend.rejected:,}")
    cols[3].metric("Low confidence", f"{trend.low_confidence:,}")
    st.plotly_chart(document_trend_figure(trend), key="documents.trend_chart")
    # Drawn with the page: the runs come from the per-document index of runs (migration 0018),
    # 0.01-0.02 s for any document of a million-run store (bench/volume.py).
    try:
        runs = cached_document_runs(trend.external_id, trend.collection, since, until)
    except WorkbenchError as exc:
        show_error(exc)
        return
    st.dataframe(runs_frame(runs), hide_index=True)
    st.caption(f"The {len(runs):,} newest runs this document appeared in"
               + (f" (at most {RUNS_LIMIT:,})" if len(runs) >= RUNS_LIMIT else "")
               + "; rank is its best hit's rank, empty when the answer cited it without it being retrieved. "
                 "Open a run on the Review queue page to see it whole.")


if __name__ == "__main__":  # run as a page (Streamlit runs it as __main__); importable for tests
    main()
