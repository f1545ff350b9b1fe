"""Corpus commands: ingest files, search them, evaluate retrieval on a BEIR set."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Optional

import typer
from tqdm import tqdm

from services.cli._app import app, emit, fail, shown
from services.cli.calibration import recalibrate_after_ingest
from services.errors import WorkbenchError
from services.scoring.pseudo_queries import DEFAULT_PSEUDO_QUERIES


@app.command()
def ingest(
    paths: list[Path] = typer.Argument(..., help="Files or directories (searched recursively)."),
    collection: str = typer.Option("default", help="Collection to ingest into."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    follow_links: bool = typer.Option(False, "--follow-links", help="Follow symbolic links to files inside the folders "
                                      "(skipped by default: they may point anywhere)."),
) -> None:
    """Ingest .txt, .md, .html, .pdf files and BEIR .jsonl corpora. A collection that now holds at
    least SELF_CALIBRATION_MIN_CHUNKS chunks (default 1000; 0 = never) and whose documents changed
    is self-calibrated afterwards (see `workbench calibrate`); if that fails, the ingest still stands."""
    from services.corpus.ingest import ingest_paths
    from services.corpus.progress import ProgressMeter

    meter = ProgressMeter()

    def progress(p) -> None:  # type: ignore[no-untyped-def]
        reading = meter.read(p)
        bar.total = reading.documents_total
        bar.n = reading.documents_done
        bar.set_postfix_str(reading.describe(), refresh=False)
        bar.refresh()

    try:
        # The bar closes (ending its line) before an error is printed on a line of its own. Its
        # text is the meter's (chunks/s and ETA over the last half minute), not tqdm's own
        # average: a resumed ingest skips its first documents far faster than it embeds the rest.
        with tqdm(desc="ingesting", disable=as_json, file=sys.stderr,
                  bar_format="{desc}: {percentage:3.0f}%|{bar:20}| {elapsed}{postfix}") as bar:
            summary = ingest_paths(paths, collection=collection, on_progress=progress, follow_links=follow_links)
    except WorkbenchError as exc:
        fail(exc)
    if as_json:
        calibrated = recalibrate_after_ingest(summary, collection=collection, as_json=True)
        emit(summary.to_dict() | ({"self_calibration": calibrated} if calibrated is not None else {}))
        return
    typer.echo(f"ingested {summary.ingested}, replaced {summary.replaced}, unchanged {summary.unchanged}, "
               f"chunks added {summary.chunks_added}, skipped {len(summary.skipped)}")
    for outcome in summary.outcomes:
        if isinstance(previous := outcome.get("replaced"), dict):
            typer.echo(f"  replaced {shown(outcome['external_id'])}: the version ingested from {shown(previous['source'])} "
                       f"on {previous['updated_at']}")
    for skipped in summary.skipped:
        typer.echo(f"  skipped {shown(skipped.source)}: {shown(skipped.reason)}")
    if summary.unchanged:
        typer.echo(f"  skipped {summary.unchanged} already ingested with the same content (not embedded again)")
    recalibrate_after_ingest(summary, collection=collection, as_json=False)


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
    from services.corpus.stats import require_collection
    from services.retrieval.search import default_params
    from services.retrieval.search import search as run_search
    from services.scoring.confidence import score_retrieval
    from services.scoring.profiles import active_profile

    try:
        require_collection(collection)
        result = run_search(query, default_params(mode=mode, k=k, collection=collection))
        confidence = score_retrieval(result, active_profile().weights)
    except WorkbenchError as exc:
        fail(exc)
    if as_json:
        emit({**result.to_dict(), "confidence": confidence.to_dict()})
        return
    typer.echo(f"{confidence.interpretation} ({confidence.overall:.2f}); reranker: {result.reranker}")
    for hit in result.hits:
        typer.echo(f"{hit.rank:>3}. [{shown(hit.external_id)}] fused={hit.fused_score:.4f} "
                   f"bm25={_fmt(hit.bm25_score)}#{hit.bm25_rank or '-'} dense={_fmt(hit.dense_similarity)}#{hit.dense_rank or '-'}")
        typer.echo(f"     {shown(hit.text[:160])}")
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
    collection: Optional[str] = typer.Option(None, help="Collection (default: eval-<corpus dir name>-<hash of its path>)."),
    limit: Optional[int] = typer.Option(None, help="Evaluate only the first N judged queries."),
    self_calibration: int = typer.Option(
        DEFAULT_PSEUDO_QUERIES, min=0,
        help="Pseudo-questions the corpus asks itself to fit each mode's confidence mapping (never the qrels); "
             "0 skips self-calibration. Nothing is stored."),
    as_json: bool = typer.Option(False, "--json", help="Print metrics as JSON."),
) -> None:
    """nDCG@10, Recall@100, MRR@10 per mode, and how well confidence (active weights profile) predicts
    hit@10 (AUROC, ECE), before and after self-calibration."""
    from services.evaluation.beir import BeirFiles, evaluate_beir
    from services.scoring.profiles import active_profile

    name = collection or (default_eval_collection(corpus) if corpus else "default")

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    try:
        # The bar closes (ending its line) before an error is printed on a line of its own.
        with tqdm(desc="evaluating", unit="query", file=sys.stderr, disable=as_json) as bar:
            outcome = evaluate_beir(BeirFiles(queries, qrels, corpus), collection=name, profile=active_profile().weights,
                                    modes=[m.strip() for m in modes.split(",") if m.strip()], limit=limit,
                                    on_progress=progress, self_calibration=self_calibration,
                                    on_calibration_progress=progress)
    except WorkbenchError as exc:
        fail(exc)
    reports, n_queries = outcome.reports, len(outcome.queries)
    for warning in outcome.warnings:
        typer.echo(f"warning: {shown(warning)}", err=True)
    if as_json:
        emit({"collection": outcome.collection, "queries": n_queries, "profile": outcome.profile.label,
               "modes": {r.mode: r.to_dict() for r in reports}, "warnings": outcome.warnings})
        return
    typer.echo(f"{'mode':8} {'nDCG@10':>8} {'R@100':>8} {'MRR@10':>8} {'AUROC':>6} {'ECE':>6} {'AUROC*':>6} {'ECE*':>6}"
               f"   ({n_queries} queries, profile {outcome.profile.label}; * after self-calibration)")
    skipped = ""
    for r in reports:
        after = r.self_calibrated or {}
        skipped = str(after.get("skipped", skipped))
        typer.echo(f"{r.mode:8} {r.metrics['ndcg@10']:8.3f} {r.metrics['recall@100']:8.3f} {r.metrics['mrr@10']:8.3f} "
                   f"{_figure(r.confidence_auroc)} {_figure(r.confidence_ece)} "
                   f"{_figure(after.get('confidence_auroc'))} {_figure(after.get('confidence_ece'))}")
    if skipped:
        typer.echo(f"self-calibration skipped: {skipped}")


def default_eval_collection(corpus: Path) -> str:
    """eval-<folder>-<hash of the corpus path>: two corpora in folders of the same name never share one."""
    resolved = corpus.resolve()
    return f"eval-{resolved.parent.name}-{hashlib.sha256(str(resolved).encode()).hexdigest()[:8]}"


def _figure(value: object) -> str:
    return f"{value:6.3f}" if isinstance(value, float) else f"{'-':>6}"
