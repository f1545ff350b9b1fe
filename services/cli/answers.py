"""Answer commands: ask questions through the pipeline, export reviewed runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from tqdm import tqdm

from services.cli._app import app, emit, fail, shown
from services.errors import InputError, WorkbenchError

if TYPE_CHECKING:
    from services.answering.presets import FeatureConfig


@app.command()
def ask(
    query: Optional[str] = typer.Argument(None, help="The question (or use --queries)."),
    queries: Optional[Path] = typer.Option(None, help="BEIR queries.jsonl to answer in one process."),
    preset: str = typer.Option("balanced", help="minimal, balanced, research, as-written (the design notes' "
                               "loop) or full (everything on)."),
    collection: str = typer.Option("default"),
    out: Optional[Path] = typer.Option(None, help="With --queries: write one stored run per line here "
                                       "(replaced once all are answered, never left half-written)."),
    as_json: bool = typer.Option(False, "--json", help="Print the stored run as JSON."),
    reflection_min_score: Optional[float] = typer.Option(None, help="Reflection score that approves an answer "
                                                         "(REFLECTION_MIN_SCORE; default: the preset's)."),
    max_refinements: Optional[int] = typer.Option(None, help="Retry cap: refinements after the first iteration "
                                                  "(MAX_REFINEMENT_ATTEMPTS)."),
    crag_upper: Optional[float] = typer.Option(None, help="CRAG score at or above which retrieval is CORRECT "
                                               "(CRAG_CORRECT_THRESHOLD)."),
    crag_lower: Optional[float] = typer.Option(None, help="CRAG score at or below which retrieval is INCORRECT "
                                               "(CRAG_INCORRECT_THRESHOLD)."),
    consensus_threshold: Optional[float] = typer.Option(None, help="Hit relevance counted as consensus "
                                                        "(CONSENSUS_THRESHOLD)."),
    fallback_collection: Optional[str] = typer.Option(None, help="Collection CRAG's corrective actions search "
                                                      "(FALLBACK_COLLECTION)."),
    adaptive_k: Optional[bool] = typer.Option(None, "--adaptive-k/--no-adaptive-k", help="Read only as many chunks "
                                              "as the question's kind needs (seed 001; ADAPTIVE_K)."),
    gaps_as_context: Optional[bool] = typer.Option(None, "--gaps-as-context/--gaps-fused", help="Give the passages "
                                                   "the gap queries find to the generator as additional context "
                                                   "(seed 000; as-written and full do) instead of fusing the gap "
                                                   "queries into the retrieval (default: the preset's)."),
    use_cache: bool = typer.Option(True, "--cache/--no-cache", help="A question asked before of the unchanged "
                                   "collection, with the same preset and thresholds, gets its stored run back when "
                                   "that was HIGH and approved, or auto-accepted (not with --queries)."),
) -> None:
    """Answer a question (or a file of them); every run is stored for review, with the thresholds it
    ran with: the preset's, then the environment's, then the active weights profile's (Tuning page),
    then these options. With --queries, a line that cannot be answered is reported and the rest are
    answered (exit 1 if any was left out)."""
    from services.answering import pipeline
    from services.answering.llm.backends import backend_for
    from services.answering.presets import configured, with_thresholds
    from services.answering.runs import Event
    from services.corpus.stats import require_collection
    from services.scoring.profiles import active_profile
    from services.settings import get_settings

    if (query is None) == (queries is None):
        fail(WorkbenchError("give either a QUERY or --queries FILE"))
    try:
        config = with_thresholds(
            configured(preset, get_settings(), active_profile().weights.loop), reflection_min_score=reflection_min_score,
            max_refinement_attempts=max_refinements, crag_correct_threshold=crag_upper,
            crag_incorrect_threshold=crag_lower, consensus_threshold=consensus_threshold,
            fallback_collection=fallback_collection, adaptive_k=adaptive_k, gaps_as_context=gaps_as_context)
        require_collection(collection)
        if config.fallback_collection:
            require_collection(config.fallback_collection)
        backend = backend_for()
        if query is None:
            _answer_file(queries, out, as_json=as_json, preset=preset, collection=collection, backend=backend,  # type: ignore[arg-type]
                         config=config)
            return
        seen: list[Event] = []
        run = pipeline.run(query, preset, backend=backend, collection=collection, config=config,
                           on_event=seen.append, use_cache=use_cache)
    except WorkbenchError as exc:
        fail(exc)
    cached = next((e for e in seen if e.event_type == "cache_hit"), None)
    cuts = [e for e in seen if e.event_type == "adaptive_cut"]
    if as_json:
        emit(run.to_dict() | {"cache_hit": cached.data if cached else None})
        return
    if cached is not None:
        typer.echo(shown(cached.message), err=True)
    for cut in cuts:  # seed 001's cut-off: how many chunks the answer read, and why it stopped there
        typer.echo(f"adaptive k, iteration {cut.data.get('iteration')}: {shown(cut.message)}", err=True)
    typer.echo(f"[{run.final_level} {run.final_confidence:.2f} | {' -> '.join(run.route)} | {run.status} | run {run.run_id}]")
    typer.echo(shown(run.final_answer or f"(no answer: {run.outcome_note})", lines=True))


def _answer_file(queries: Path, out: Path | None, *, as_json: bool, preset: str, collection: str, backend: object,
                 config: FeatureConfig) -> None:
    from services.answering import pipeline
    from services.retrieval.beir_files import read_queries
    from services.review.export_formats import check_target, write_file

    query_file = read_queries(queries, strict=False)
    if out is not None:
        check_target(out)  # before the first question, not after the last
    problems = list(query_file.warnings)
    lines: list[str] = []
    for item in tqdm(query_file.queries, desc="answering", unit="question", file=sys.stderr):
        try:
            run = pipeline.run(item.text, preset, backend=backend, collection=collection, source="batch",  # type: ignore[arg-type]
                               config=config)
        except WorkbenchError as exc:
            problems.append(f"{queries}: query {item.query_id!r} was not answered: {exc}")
            continue
        line = json.dumps({"query_id": item.query_id, **run.to_dict()}, default=str)
        if out is not None:
            lines.append(line)
        elif as_json:
            typer.echo(line)
    if out is not None:
        write_file(out, "".join(line + "\n" for line in lines).encode("utf-8"))
    for problem in problems:
        typer.echo(f"warning: {shown(problem)}", err=True)
    if problems:
        total = len(query_file.queries) + len(query_file.warnings)
        raise InputError(f"{len(problems)} of {total} lines of {queries} were not answered (see the warnings above); "
                         f"the other {total - len(problems)} were")


@app.command("export")
def export_runs(
    output: Path = typer.Option(..., "-o", "--output", help="File to write (replaced atomically, never left half-written, "
                                "its mode kept; a symlink, FIFO or device is written through), or - for standard output."),
    fmt: str = typer.Option("jsonl", "--format", help="csv, jsonl or parquet."),
    status: Optional[list[str]] = typer.Option(None, "--status", help="Status to include; repeat or comma-separate (default: all)."),
    verdict: Optional[str] = typer.Option(None, help="Current review verdict: approved, flagged or corrected."),
    reviewer: Optional[str] = typer.Option(None, help="Exact reviewer name."),
    since: Optional[str] = typer.Option(None, help="ISO date or datetime, inclusive (UTC when no offset is given)."),
    until: Optional[str] = typer.Option(None, help="ISO datetime, exclusive; a bare date includes that whole day."),
    date_field: str = typer.Option("created", "--date-field", help="What --since/--until bound: created or reviewed."),
    profile: Optional[str] = typer.Option(None, help='Weights profile label, e.g. "default v1".'),
    collection: Optional[str] = typer.Option(None, help="Only runs against this collection."),
    app_name: Optional[str] = typer.Option(None, "--app", help="Only runs another system sent under this app "
                                           "(its API key's app; see workbench api-key list)."),
) -> None:
    """Export runs with their reviews (one record per run) for audits or fine-tuning sets."""
    from services.review.export import ExportFilters, iter_export_records, parse_when
    from services.review.export_formats import check_format, write_export

    try:
        filters = ExportFilters(
            statuses=tuple(s.strip() for item in status or () for s in item.split(",") if s.strip()),
            verdict=verdict, reviewer=reviewer, date_field=date_field, profile=profile, collection=collection,
            app=app_name, since=parse_when(since) if since else None, until=parse_when(until, end=True) if until else None,
        )
        check_format(fmt)
        to_stdout = str(output) == "-"
        # Streamed: records are read a batch at a time and written as they come, so memory
        # stays flat whatever the number of runs (a million: bench/volume.py).
        count = write_export(iter_export_records(filters), fmt, sys.stdout.buffer if to_stdout else output)
    except WorkbenchError as exc:
        fail(exc)
    typer.echo(f"exported {count} records to {'standard output' if to_stdout else output}", err=True)
