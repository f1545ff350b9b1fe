"""Evaluate: retrieval quality per mode on a BEIR set, how well confidence predicts a hit,
and pushing the evaluated questions into the review queue."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd
import streamlit as st

from app_pages import _demo as demo
from app_pages.common import cached_corpus_stats, ensure_store, require_sign_in, selected_preset, show_error
from services.answering.presets import PRESETS
from services.charts import evaluation as charts
from services.corpus.ingest import IngestProgress, IngestSummary
from services.corpus.progress import ProgressMeter
from services.demo.answer_key import DEMO_BEIR_FILES
from services.domain import RETRIEVAL_MODES
from services.errors import InputError, WorkbenchError
from services.evaluation.beir import BeirFiles, EvaluationOutcome, evaluate_beir
from services.evaluation.measures import ModeReport
from services.evaluation.review_runs import queue_evaluation_runs
from services.retrieval.beir_files import EvalQuery
from services.scoring.profiles import active_profile

DEFAULT_COLLECTION = "eval"
PUSH_DEFAULT = 20
REPORTS_KEY = "evaluate.reports"
QUERIES_KEY = "evaluate.queries"
RUN_COLLECTION_KEY = "evaluate.run_collection"
INGEST_LINE_KEY = "evaluate.ingest_line"
PUSHED_KEY = "evaluate.pushed"
PROFILE_KEY = "evaluate.profile"
UPLOAD_NAMES = {"corpus": "corpus.jsonl", "queries": "queries.jsonl", "qrels": "qrels.tsv"}


# --- pure helpers (tested without Streamlit) -----------------------------------------------

def files_from_paths(corpus: str, queries: str, qrels: str) -> BeirFiles:
    """Paths typed by the user; queries and qrels are required, the corpus is optional."""
    given = {"corpus": corpus.strip(), "queries": queries.strip(), "qrels": qrels.strip()}
    for what in ("queries", "qrels"):
        if not given[what]:
            raise InputError(f"give the path of the {UPLOAD_NAMES[what]} file")
    for what, value in given.items():
        if value and not Path(value).expanduser().is_file():
            raise InputError(f"{UPLOAD_NAMES[what]}: no file at {value}")
    return BeirFiles(Path(given["queries"]).expanduser(), Path(given["qrels"]).expanduser(),
                     Path(given["corpus"]).expanduser() if given["corpus"] else None)


def files_from_uploads(directory: Path, uploads: dict[str, bytes | None]) -> BeirFiles:
    """Write uploaded corpus / queries / qrels bytes into `directory`, then use them as paths."""
    for what in ("queries", "qrels"):
        if not uploads.get(what):
            raise InputError(f"upload a {UPLOAD_NAMES[what]} file")
    written: dict[str, Path | None] = {}
    for what, name in UPLOAD_NAMES.items():
        data = uploads.get(what)
        written[what] = None
        if data:
            written[what] = directory / name
            written[what].write_bytes(data)  # type: ignore[union-attr]
    return BeirFiles(written["queries"], written["qrels"], written["corpus"])  # type: ignore[arg-type]


def count_documents(corpus: Path) -> int:
    """Non-empty lines of a corpus.jsonl: the document count the ingest progress aims at."""
    try:
        with open(corpus, "rb") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError as exc:
        raise InputError(f"could not read {corpus}: {exc.strerror or exc}") from exc


def run_evaluation(
    files: BeirFiles,
    *,
    collection: str,
    modes: Sequence[str],
    limit: int = 0,
    on_ingest_progress: Callable[[IngestProgress], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> EvaluationOutcome:
    """The evaluation `workbench eval` runs, scored with the active weights profile; `limit` 0 means all."""
    outcome = evaluate_beir(files, collection=collection, profile=active_profile().weights, modes=modes,
                            limit=limit or None, on_ingest_progress=on_ingest_progress, on_progress=on_progress)
    if outcome.ingest is not None:
        cached_corpus_stats.clear()
    return outcome


def metrics_frame(reports: Sequence[ModeReport]) -> pd.DataFrame:
    """One row per mode: the ranking metrics, then how well confidence predicts hit@10."""
    rows = []
    for report in reports:
        calibration = charts.mode_calibration(report)
        hits = [bool(p["hit_at_10"]) for p in report.per_query]
        rows.append({
            "mode": report.mode,
            **{label: report.metrics[name] for name, label in charts.METRIC_LABELS.items()},
            "queries": len(report.per_query),
            "hit@10 rate": sum(hits) / len(hits) if hits else None,
            "confidence AUROC": report.confidence_auroc,
            "ECE": calibration.ece if calibration else None,
            "Brier": calibration.brier if calibration else None,
        })
    return pd.DataFrame(rows)


def push_to_queue(
    queries: Sequence[EvalQuery], *, count: int, preset: str, collection: str, requested_by: str,
    on_progress: Callable[[int, int], None] | None = None,
) -> list[int]:
    """Answer the first `count` evaluated questions; their runs enter the review queue as pending."""
    if count < 1:
        raise InputError("push at least one question")
    return queue_evaluation_runs(list(queries[:count]), preset=preset, collection=collection,
                                 requested_by=requested_by, on_progress=on_progress)


# --- the page --------------------------------------------------------------------------------

def main() -> None:
    user = require_sign_in()
    st.title("Evaluate retrieval")
    st.caption("nDCG@10, Recall@100 and MRR@10 per retrieval mode on a BEIR set, and how well "
               "confidence predicts that a relevant document is in the top 10.")
    try:
        ensure_store()
    except WorkbenchError as exc:
        show_error(exc)
        return
    try:
        demo_loaded = demo.cached_demo_status().demo_runs > 0
    except WorkbenchError as exc:
        show_error(exc)
        return
    # Folded once there is something to read, so the results are not below a screen of inputs.
    with st.expander("Evaluate a BEIR set", expanded=not (st.session_state.get(REPORTS_KEY) or demo_loaded)):
        _render_run_form()
    if not st.session_state.get(REPORTS_KEY):
        _render_demo_evaluation(demo_loaded)
    reports = st.session_state.get(REPORTS_KEY)
    if reports:
        _render_results(reports)
        _render_push(user.name or "evaluation")


def _render_demo_evaluation(loaded: bool) -> None:
    """With the demo runs loaded, the demo questions are evaluated at once (a second or two);
    otherwise a button offers it."""
    if not loaded:
        st.info("Nothing has been evaluated in this session. Give a BEIR set above, or evaluate the demo questions: "
                "the handbook's answerable questions with the documents that answer them, searched in the Ask "
                "page's corpus.")
        if not st.button("Evaluate the demo questions", key="evaluate.demo"):
            return
    try:
        with st.spinner("Evaluating the demo questions…"):
            outcome = run_evaluation(DEMO_BEIR_FILES, collection="default", modes=RETRIEVAL_MODES)
    except WorkbenchError as exc:
        show_error(exc)
        return
    _remember(outcome)
    st.session_state[INGEST_LINE_KEY] = "the demo questions and their answer key (services/demo_data)"


def _render_run_form() -> None:
    source = st.radio("BEIR set from", ("paths", "uploads"), horizontal=True, key="evaluate.source",
                      format_func={"paths": "files on the server", "uploads": "uploaded files"}.get)
    if source == "paths":
        corpus = st.text_input("corpus.jsonl (optional: ingested into the collection first)", key="evaluate.corpus_path")
        queries = st.text_input("queries.jsonl", key="evaluate.queries_path")
        qrels = st.text_input("qrels.tsv", key="evaluate.qrels_path")
    else:
        uploaded = {
            "corpus": st.file_uploader("corpus.jsonl (optional: ingested into the collection first)", type=["jsonl"],
                                       key="evaluate.corpus_upload"),
            "queries": st.file_uploader("queries.jsonl", type=["jsonl"], key="evaluate.queries_upload"),
            "qrels": st.file_uploader("qrels.tsv", type=["tsv", "txt"], key="evaluate.qrels_upload"),
        }
    collection = st.text_input("Collection", value=DEFAULT_COLLECTION, key="evaluate.collection",
                               help="Where the corpus is ingested and searched; 'default' is the Ask/Search corpus.")
    modes = st.multiselect("Modes", RETRIEVAL_MODES, default=list(RETRIEVAL_MODES), key="evaluate.modes")
    limit = int(st.number_input("Evaluate at most this many judged queries (0: all)", min_value=0, value=0, step=50,
                                key="evaluate.limit"))
    if not st.button("Run evaluation", key="evaluate.run", type="primary"):
        return
    ingest_bar = st.progress(0.0, text="Reading the evaluation set…")
    eval_bar = st.progress(0.0, text="Waiting for the corpus…")
    try:
        with tempfile.TemporaryDirectory(prefix="workbench-eval-") as directory:
            if source == "paths":
                files = files_from_paths(corpus, queries, qrels)
            else:
                data = {what: (f.getvalue() if f is not None else None) for what, f in uploaded.items()}
                files = files_from_uploads(Path(directory), data)
            expected = count_documents(files.corpus) if files.corpus else 0

            meter = ProgressMeter()

            def on_ingest(progress: IngestProgress) -> None:
                done = progress.documents_done
                fraction = 1.0 if progress.documents_total is not None else min(done / max(expected, 1), 0.99)
                ingest_bar.progress(fraction, text=f"corpus: {meter.read(progress).describe()}")

            def on_progress(done: int, total: int) -> None:
                eval_bar.progress(done / total, text=f"evaluated {done} of {total} query × mode searches")

            outcome = run_evaluation(files, collection=collection, modes=modes, limit=limit,
                                     on_ingest_progress=on_ingest, on_progress=on_progress)
    except WorkbenchError as exc:
        ingest_bar.empty()
        eval_bar.empty()
        show_error(exc)
        return
    if outcome.ingest is None:
        ingest_bar.empty()
    else:
        ingest_bar.progress(1.0, text="corpus ingested")
    _remember(outcome)


def _remember(outcome: EvaluationOutcome) -> None:
    st.session_state[REPORTS_KEY] = outcome.reports
    st.session_state[QUERIES_KEY] = outcome.queries
    st.session_state[RUN_COLLECTION_KEY] = outcome.collection
    st.session_state[PROFILE_KEY] = outcome.profile.label
    st.session_state[INGEST_LINE_KEY] = _ingest_line(outcome.ingest)
    st.session_state.pop(PUSHED_KEY, None)


def _ingest_line(summary: IngestSummary | None) -> str:
    if summary is None:
        return "no corpus given: evaluated against the documents already in the collection"
    return (f"corpus: {summary.ingested} ingested, {summary.replaced} replaced, {summary.unchanged} unchanged, "
            f"{len(summary.skipped)} skipped")


def _render_results(reports: list[ModeReport]) -> None:
    queries = st.session_state.get(QUERIES_KEY, [])
    st.subheader("Retrieval quality")
    st.text(f"{len(queries)} judged queries in collection {st.session_state.get(RUN_COLLECTION_KEY, '')}; "
            f"{st.session_state.get(INGEST_LINE_KEY, '')}")
    st.plotly_chart(charts.metrics_figure(reports), key="evaluate.metrics_chart")
    st.dataframe(metrics_frame(reports), hide_index=True)
    st.subheader("Confidence vs hit@10")
    st.caption(f"Confidence scored with the weights profile {st.session_state.get(PROFILE_KEY, '')}.")
    cols = st.columns(len(reports))
    for col, report in zip(cols, reports):
        auroc = report.confidence_auroc
        col.metric(f"AUROC · {report.mode}", "n/a" if auroc is None else f"{auroc:.3f}")
    if any(r.confidence_auroc is None for r in reports):
        st.caption("n/a: every query of that mode had the same outcome (all hits or all misses), "
                   "so there is nothing for confidence to separate.")
    st.plotly_chart(charts.calibration_figure(reports), key="evaluate.calibration_chart")


def _render_push(requested_by: str) -> None:
    queries = st.session_state.get(QUERIES_KEY, [])
    if not queries or not st.checkbox("Push the evaluated questions into the review queue", key="evaluate.push"):
        return
    st.caption("Each question is answered with the pipeline and stored as a pending run for reviewers, "
               "so their verdicts can calibrate confidence.")
    preset = st.selectbox("Preset", tuple(PRESETS), index=tuple(PRESETS).index(selected_preset()),
                          key="evaluate.push_preset")
    count = int(st.number_input("Questions (the first ones evaluated)", min_value=1, max_value=len(queries),
                                value=min(PUSH_DEFAULT, len(queries)), key="evaluate.push_count"))
    if st.button("Answer and queue", key="evaluate.push_run"):
        bar = st.progress(0.0, text="Answering…")
        try:
            run_ids = push_to_queue(queries, count=count, preset=preset,
                                    collection=st.session_state.get(RUN_COLLECTION_KEY, DEFAULT_COLLECTION),
                                    requested_by=requested_by,
                                    on_progress=lambda done, total: bar.progress(done / total,
                                                                                 text=f"answered {done} of {total}"))
        except WorkbenchError as exc:
            bar.empty()
            show_error(exc)
            return
        st.session_state[PUSHED_KEY] = run_ids
    pushed = st.session_state.get(PUSHED_KEY)
    if pushed:
        st.success(f"{len(pushed)} runs are waiting in the review queue.")
        st.text("run ids: " + ", ".join(map(str, pushed)))


if __name__ == "__main__":  # run as a page (Streamlit runs it as __main__); importable for tests
    main()
