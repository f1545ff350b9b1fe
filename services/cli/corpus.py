"""Corpus commands: ingest files, search them, evaluate retrieval on a BEIR set."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from tqdm import tqdm

from services.cli._app import app, emit, fail
from services.errors import WorkbenchError


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
        fail(exc)
    if as_json:
        emit(summary.to_dict())
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
    """Retrieve hits with both legs' scores and ranks, and the confidence breakdown
    (scored with the active weights profile, as the Search and Ask pages are)."""
    from services.retrieval.search import default_params
    from services.retrieval.search import search as run_search
    from services.scoring.confidence import score_retrieval
    from services.scoring.profiles import active_profile

    try:
        result = run_search(query, default_params(mode=mode, k=k, collection=collection))
        confidence = score_retrieval(result, active_profile().weights)
    except WorkbenchError as exc:
        fail(exc)
    if as_json:
        emit({**result.to_dict(), "confidence": confidence.to_dict()})
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
    """nDCG@10, Recall@100, MRR@10 per mode, and AUROC of confidence (active weights profile) for hit@10."""
    from services.retrieval.evaluation import BeirFiles, evaluate_beir
    from services.scoring.profiles import active_profile

    name = collection or (f"eval-{corpus.resolve().parent.name}" if corpus else "default")

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    try:
        # The bar closes (ending its line) before an error is printed on a line of its own.
        with tqdm(desc="evaluating", unit="query", file=sys.stderr, disable=as_json) as bar:
            outcome = evaluate_beir(BeirFiles(queries, qrels, corpus), collection=name, profile=active_profile().weights,
                                    modes=[m.strip() for m in modes.split(",") if m.strip()], limit=limit,
                                    on_progress=progress)
    except WorkbenchError as exc:
        fail(exc)
    reports, n_queries = outcome.reports, len(outcome.queries)
    if as_json:
        emit({"collection": outcome.collection, "queries": n_queries, "profile": outcome.profile.label,
               "modes": {r.mode: r.to_dict() for r in reports}})
        return
    typer.echo(f"{'mode':8} {'nDCG@10':>8} {'R@100':>8} {'MRR@10':>8} {'conf AUROC':>10}   "
               f"({n_queries} queries, profile {outcome.profile.label})")
    for r in reports:
        auroc = "-" if r.confidence_auroc is None else f"{r.confidence_auroc:.3f}"
        typer.echo(f"{r.mode:8} {r.metrics['ndcg@10']:8.3f} {r.metrics['recall@100']:8.3f} {r.metrics['mrr@10']:8.3f} {auroc:>10}")
