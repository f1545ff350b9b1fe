"""The `workbench` command line: ingest, search, eval, serve (bodies only call services)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from tqdm import tqdm

from services.errors import WorkbenchError
from services.settings import get_settings

app = typer.Typer(add_completion=False, no_args_is_help=True, help="RAG Confidence Workbench")
ROOT = Path(__file__).resolve().parent.parent


@app.callback()
def main(
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help="Embedded database directory (WORKBENCH_DATA_DIR)."),
    database_url: Optional[str] = typer.Option(None, "--database-url", help="Use this PostgreSQL instead (DATABASE_URL)."),
) -> None:
    """Ask questions of a corpus and see why the answers are or are not trustworthy."""
    # Exported so that `serve`'s Streamlit child process sees the same store.
    if data_dir is not None:
        os.environ["WORKBENCH_DATA_DIR"] = str(data_dir)
    if database_url is not None:
        os.environ["DATABASE_URL"] = database_url
    get_settings.cache_clear()


def _emit(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def _fail(exc: WorkbenchError) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(1)


@app.command()
def ingest(
    paths: list[Path] = typer.Argument(..., help="Files or directories (searched recursively)."),
    collection: str = typer.Option("default", help="Collection to ingest into."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Ingest .txt, .md, .html, .pdf files and BEIR .jsonl corpora."""
    from services.corpus.ingest import ingest_paths

    def progress(p) -> None:  # type: ignore[no-untyped-def]
        bar.total = p.documents_total
        bar.n = p.documents_done
        bar.set_postfix(chunks=p.chunks_done)
        bar.refresh()

    try:
        # The bar closes (ending its line) before an error is printed on a line of its own.
        with tqdm(desc="ingesting", unit="doc", disable=as_json, file=sys.stderr) as bar:
            summary = ingest_paths(paths, collection=collection, on_progress=progress)
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        _emit(summary.to_dict())
        return
    typer.echo(f"ingested {summary.ingested}, replaced {summary.replaced}, unchanged {summary.unchanged}, "
               f"chunks added {summary.chunks_added}, skipped {len(summary.skipped)}")
    for skipped in summary.skipped:
        typer.echo(f"  skipped {skipped.source}: {skipped.reason}")


@app.command()
def search(
    query: str = typer.Argument(..., help="The question."),
    mode: str = typer.Option("hybrid", help="bm25, dense or hybrid."),
    k: int = typer.Option(10, help="Number of hits."),
    collection: str = typer.Option("default"),
    as_json: bool = typer.Option(False, "--json", help="Print hits and confidence as JSON."),
) -> None:
    """Retrieve hits with both legs' scores and ranks, and the confidence breakdown."""
    from services.retrieval.search import default_params
    from services.retrieval.search import search as run_search
    from services.scoring.confidence import score_retrieval

    try:
        result = run_search(query, default_params(mode=mode, k=k, collection=collection))
    except WorkbenchError as exc:
        _fail(exc)
    confidence = score_retrieval(result)
    if as_json:
        _emit({**result.to_dict(), "confidence": confidence.to_dict()})
        return
    typer.echo(f"{confidence.interpretation} ({confidence.overall:.2f}); reranker: {result.reranker}")
    for hit in result.hits:
        typer.echo(f"{hit.rank:>3}. [{hit.external_id}] fused={hit.fused_score:.4f} "
                   f"bm25={_fmt(hit.bm25_score)}#{hit.bm25_rank or '-'} dense={_fmt(hit.dense_similarity)}#{hit.dense_rank or '-'}")
        typer.echo(f"     {hit.text[:160]}")
    for line in confidence.recommendations:
        typer.echo(f"  - {line}")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


@app.command("eval")
def evaluate(
    corpus: Optional[Path] = typer.Option(None, help="BEIR corpus.jsonl to ingest first (idempotent)."),
    queries: Path = typer.Option(..., help="BEIR queries.jsonl."),
    qrels: Path = typer.Option(..., help="BEIR qrels TSV."),
    modes: str = typer.Option("bm25,dense,hybrid", help="Comma-separated modes."),
    collection: Optional[str] = typer.Option(None, help="Collection (default: eval-<corpus dir name>)."),
    limit: Optional[int] = typer.Option(None, help="Evaluate only the first N judged queries."),
    as_json: bool = typer.Option(False, "--json", help="Print metrics as JSON."),
) -> None:
    """nDCG@10, Recall@100, MRR@10 per mode, and AUROC of confidence for hit@10."""
    from services.corpus.ingest import ingest_paths
    from services.errors import InputError
    from services.retrieval.evaluation import evaluate as run_eval
    from services.retrieval.evaluation import load_qrels, load_queries

    name = collection or (f"eval-{corpus.resolve().parent.name}" if corpus else "default")
    try:
        if corpus is not None:
            loaded = ingest_paths([corpus], collection=name)
            if loaded.ingested + loaded.replaced + loaded.unchanged == 0:
                reasons = "; ".join(f"{s.source}: {s.reason}" for s in loaded.skipped[:3])
                raise InputError(f"no documents could be read from the corpus {corpus} ({reasons})")
        judgements = load_qrels(qrels)
        items = [q for q in load_queries(queries) if judgements.get(q.query_id)][:limit]
        with tqdm(total=len(items) * len(modes.split(",")), desc="evaluating", unit="query", file=sys.stderr,
                  disable=as_json) as bar:
            reports = run_eval(items, judgements, modes=[m.strip() for m in modes.split(",")], collection=name,
                               on_progress=lambda done, total: bar.update(done - bar.n))
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        _emit({"collection": name, "queries": len(items), "modes": {r.mode: r.to_dict() for r in reports}})
        return
    typer.echo(f"{'mode':8} {'nDCG@10':>8} {'R@100':>8} {'MRR@10':>8} {'conf AUROC':>10}   ({len(items)} queries)")
    for r in reports:
        auroc = "-" if r.confidence_auroc is None else f"{r.confidence_auroc:.3f}"
        typer.echo(f"{r.mode:8} {r.metrics['ndcg@10']:8.3f} {r.metrics['recall@100']:8.3f} {r.metrics['mrr@10']:8.3f} {auroc:>10}")


@app.command()
def ask(
    query: Optional[str] = typer.Argument(None, help="The question (or use --queries)."),
    queries: Optional[Path] = typer.Option(None, help="BEIR queries.jsonl to answer in one process."),
    preset: str = typer.Option("balanced", help="minimal, balanced or research."),
    collection: str = typer.Option("default"),
    out: Optional[Path] = typer.Option(None, help="With --queries: write one stored run per line here."),
    as_json: bool = typer.Option(False, "--json", help="Print the stored run as JSON."),
) -> None:
    """Answer a question (or a file of them); every run is stored for review."""
    from services.answering import pipeline
    from services.answering.llm.backends import backend_for
    from services.retrieval.evaluation import load_queries

    if (query is None) == (queries is None):
        _fail(WorkbenchError("give either a QUERY or --queries FILE"))
    try:
        backend = backend_for()
        if query is not None:
            run = pipeline.run(query, preset, backend=backend, collection=collection)
            if as_json:
                _emit(run.to_dict())
            else:
                typer.echo(f"[{run.final_level} {run.final_confidence:.2f} | {' -> '.join(run.route)} | "
                           f"{run.status} | run {run.run_id}]")
                typer.echo(run.final_answer or f"(no answer: {run.outcome_note})")
            return
        items = load_queries(queries)  # type: ignore[arg-type]
        sink = open(out, "w", encoding="utf-8") if out else None
        try:
            for item in tqdm(items, desc="answering", unit="question", file=sys.stderr):
                run = pipeline.run(item.text, preset, backend=backend, collection=collection, source="batch")
                record = {"query_id": item.query_id, **run.to_dict()}
                if sink:
                    sink.write(json.dumps(record, default=str) + "\n")
                elif as_json:
                    typer.echo(json.dumps(record, default=str))
        finally:
            if sink:
                sink.close()
    except WorkbenchError as exc:
        _fail(exc)


@app.command("export")
def export_runs(
    output: Path = typer.Option(..., "-o", "--output", help="File to write; replaced atomically, never left half-written."),
    fmt: str = typer.Option("jsonl", "--format", help="csv, jsonl or parquet."),
    status: Optional[list[str]] = typer.Option(None, "--status", help="Status to include; repeat or comma-separate (default: all)."),
    verdict: Optional[str] = typer.Option(None, help="Current review verdict: approved, flagged or corrected."),
    reviewer: Optional[str] = typer.Option(None, help="Exact reviewer name."),
    since: Optional[str] = typer.Option(None, help="ISO date or datetime, inclusive (UTC when no offset is given)."),
    until: Optional[str] = typer.Option(None, help="ISO datetime, exclusive; a bare date includes that whole day."),
    date_field: str = typer.Option("created", "--date-field", help="What --since/--until bound: created or reviewed."),
    profile: Optional[str] = typer.Option(None, help='Weights profile label, e.g. "default v1".'),
    collection: Optional[str] = typer.Option(None, help="Only runs against this collection."),
) -> None:
    """Export runs with their reviews (one record per run) for audits or fine-tuning sets."""
    from services.review.export import ExportFilters, check_format, export_records, parse_when, write_export

    try:
        filters = ExportFilters(
            statuses=tuple(s.strip() for item in status or () for s in item.split(",") if s.strip()),
            verdict=verdict, reviewer=reviewer, date_field=date_field, profile=profile, collection=collection,
            since=parse_when(since) if since else None, until=parse_when(until, end=True) if until else None,
        )
        check_format(fmt)
        records = export_records(filters)
        write_export(records, fmt, output)
    except WorkbenchError as exc:
        _fail(exc)
    typer.echo(f"exported {len(records)} records to {output}", err=True)


@app.command()
def serve(port: int = typer.Option(8501, help="Port on 127.0.0.1.")) -> None:
    """Start the database, load the demo corpus when empty, and run the workbench UI."""
    from services.corpus.stats import load_demo_corpus_if_empty
    from services.store import get_engine

    try:
        get_engine()
        summary = load_demo_corpus_if_empty(on_progress=lambda p: typer.echo(
            f"loading demo corpus: {p.documents_done} documents, {p.chunks_done} chunks", err=True))
    except WorkbenchError as exc:
        _fail(exc)
    if summary is not None:
        typer.echo(f"demo corpus loaded: {summary.ingested} documents, {summary.chunks_added} chunks", err=True)
    typer.echo(f"workbench on http://127.0.0.1:{port}", err=True)
    # The UI process joins the same embedded server; this process keeps its handle while
    # the UI runs, so the server stops only after both have gone.
    raise typer.Exit(subprocess.call([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
                                      "--server.port", str(port)], cwd=ROOT))
