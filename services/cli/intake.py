"""Commands for runs from other systems: import and assess them, the HTTP API and its keys."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer
from tqdm import tqdm

from services.cli._app import app, emit, fail
from services.errors import WorkbenchError
from services.settings import get_settings


@app.command("import")
def import_runs(
    file: Optional[Path] = typer.Argument(None, help="A .jsonl, .csv or .parquet file of records."),
    fmt: Optional[str] = typer.Option(None, "--format", help="jsonl, csv or parquet (default: from the suffix)."),
    schema: bool = typer.Option(False, "--schema", help="Print the JSON Schema of one record and exit."),
    assess: bool = typer.Option(True, "--assess/--no-assess", help="Assess what was accepted now (or only queue it)."),
    judges: bool = typer.Option(True, "--judges/--no-judges", help="Run CRAG, reflection and grading on the answers."),
    collection: str = typer.Option("default", help="Whose documents and BM25 statistics the assessment uses."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    column_map: Optional[str] = typer.Option(
        None, "--map", help="Columns of a dataset in another shape: question=COL,answer=COL,contexts=COL,reference=COL,"
                            "trace_id=COL (RAGAS, Phoenix and Langfuse names are read without it)."),
) -> None:
    """Import runs another RAG system produced and assess them into the review queue: bad
    records are listed by line, the good ones land; a trace_id imported before is skipped,
    so re-importing a file is safe. Exits 1 when any record was bad."""
    from services.errors import InputError
    from services.intake.importing import import_file
    from services.intake.schema import record_json_schema

    if schema:
        emit(record_json_schema())
        return
    if file is None:
        fail(InputError("give a FILE to import (workbench import --schema shows what one record looks like)"))
    from services.intake.datasets import parse_map

    try:
        summary = import_file(file, fmt=fmt, judges=judges, mapping=parse_map(column_map))  # type: ignore[arg-type]
        assessed = _assess_queue(collection=collection, quiet=as_json) if assess and summary.accepted else None
    except WorkbenchError as exc:
        fail(exc)
    if as_json:
        emit({**summary.to_dict(), "assessment": assessed.to_dict() if assessed else None})
    else:
        queued = f"; {summary.accepted} queued for assessment" if assessed is None else ""
        typer.echo(f"accepted {summary.accepted} new, {summary.duplicates} already imported, "
                   f"{summary.error_count} bad{queued}")
        if assessed is not None:
            typer.echo(_assessed_line(assessed) + " (the Review page lists them)")
        for error in summary.errors:
            typer.echo(f"  {error}", err=True)
        if summary.error_count > len(summary.errors):
            typer.echo(f"  ... and {summary.error_count - len(summary.errors)} more", err=True)
    if summary.error_count:
        raise typer.Exit(1)  # the good records have landed; the exit code says not all did


def _assess_queue(*, collection: str, quiet: bool, limit: int | None = None):  # type: ignore[no-untyped-def]
    """Drain the intake queue with a progress bar on stderr (each record keeps its judges choice)."""
    from services.intake.assess import process_queue

    def progress(done: int, total: int) -> None:
        bar.total = total
        bar.update(done - bar.n)

    # The bar closes (ending its line) before an error is printed on a line of its own.
    with tqdm(desc="assessing", unit="run", file=sys.stderr, disable=quiet) as bar:
        return process_queue(limit=limit, collection=collection, on_progress=progress)


intake_app = typer.Typer(no_args_is_help=True, help="The queue of runs from other systems, waiting for assessment.")
app.add_typer(intake_app, name="intake")


@intake_app.command("process")
def intake_process(
    limit: Optional[int] = typer.Option(None, min=1, help="Assess at most this many (default: until the queue is empty)."),
    collection: str = typer.Option("default", help="Whose documents and BM25 statistics the assessment uses."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Assess queued runs (imported with --no-assess, or pushed while no API worker ran), after
    assembling the traces whose spans are in (POST /v1/traces) into queued runs."""
    from services.intake.traces import assemble_traces
    from services.settings import get_settings

    try:
        traces = assemble_traces(settings=get_settings())
        if traces.assembled or traces.dropped:
            typer.echo(f"traces: {traces.assembled} became queued runs, {traces.dropped} dropped (not RAG; the Import "
                       "page says why)", err=True)
        summary = _assess_queue(collection=collection, quiet=as_json, limit=limit)
    except WorkbenchError as exc:
        fail(exc)
    if as_json:
        emit(summary.to_dict())
    else:
        typer.echo(_assessed_line(summary))


def _assessed_line(summary) -> str:  # type: ignore[no-untyped-def]
    left = f"; {summary.remaining} still queued (workbench intake process)" if summary.remaining else ""
    failed = f", {summary.failed} failed (the Import page lists why)" if summary.failed else ""
    return f"assessed {summary.assessed}{failed}{left}"


@app.command("assess")
def assess_chunk_ids(
    query: str = typer.Option(..., "--query", help="The question."),
    chunk_ids: str = typer.Option(..., "--chunk-ids", help="Comma-separated chunk ids (workbench search --json shows them)."),
    answer: str = typer.Option("", "--answer", help="An answer to judge on these chunks (optional)."),
    collection: str = typer.Option("default"),
    mode: str = typer.Option("hybrid", help="bm25, dense or hybrid: which legs score the chunks."),
    judges: bool = typer.Option(True, "--judges/--no-judges", help="Run CRAG, reflection and grading."),
    as_json: bool = typer.Option(False, "--json", help="Print the whole assessment as JSON."),
) -> None:
    """The confidence breakdown of chunks already in the corpus, scored against the question
    as the search scores them (and, with --answer, the judges' verdicts). Nothing is stored."""
    from services.errors import InputError
    from services.intake.assess import assess_chunks

    try:
        try:
            ids = [int(part) for part in chunk_ids.split(",") if part.strip()]
        except ValueError:
            raise InputError(f"--chunk-ids takes whole numbers separated by commas, got {chunk_ids!r}") from None
        assessment = assess_chunks(query, ids, collection=collection, answer=answer, judges=judges, mode=mode)
    except WorkbenchError as exc:
        fail(exc)
    if as_json:
        emit(assessment.to_dict())
        return
    breakdown, it = assessment.breakdown, assessment.iteration
    typer.echo(f"{breakdown.interpretation} (retrieval {breakdown.overall:.2f}; profile {breakdown.profile})")
    for name, value in breakdown.components.items():
        typer.echo(f"  {name:22} {value:.3f}  (contributes {breakdown.contributions[name]:.3f})")
    if it.crag is not None:
        typer.echo(f"CRAG: {it.crag.verdict} ({it.crag.score:.2f})")
    if answer:
        typer.echo(f"reflection: {f'{it.reflection.reflection_score:.2f}' if it.reflection else 'not run'}; "
                   f"grade: {f'{it.grade.score}/5' if it.grade else 'not run'}; "
                   f"final {it.confidence:.2f} ({assessment.final_level}): {assessment.status}")
    for line in breakdown.recommendations:
        typer.echo(f"  - {line}")


@app.command("api")
def api_server(
    host: Optional[str] = typer.Option(None, help="Interface to listen on (API_HOST; default 127.0.0.1, 0.0.0.0 for all)."),
    port: Optional[int] = typer.Option(None, help="Port (API_PORT; default 8000)."),
    access_log: bool = typer.Option(True, "--access-log/--no-access-log", help="Log every request."),
    assess: bool = typer.Option(True, "--assess/--no-assess",
                                help="Assess pushed runs in the background (or leave them to workbench intake process)."),
) -> None:
    """Run the HTTP API other RAG systems push runs to (OpenAPI docs at /docs)."""
    import uvicorn

    settings = get_settings()
    host, port = host or settings.api_host, port or settings.api_port
    typer.echo(f"API on http://{host}:{port} (docs at http://{host}:{port}/docs)", err=True)
    # By import string: the app is built from the same settings (--data-dir, .env) in uvicorn.
    factory = "api.app:create_app_from_env" if assess else "api.app:create_app_without_worker"
    _exit_cleanly_on_sigterm()
    uvicorn.run(factory, factory=True, host=host, port=port, access_log=access_log)


def _exit_cleanly_on_sigterm() -> None:
    """SIGTERM (docker stop, systemd) ends `workbench api` the way Ctrl+C does.

    uvicorn shuts down gracefully on either signal, then restores the handler it found and
    raises the signal again. For SIGINT that is a KeyboardInterrupt; for SIGTERM's default
    handler it is death by signal, so the atexit hooks that release this process's handle
    on the embedded server never ran and the server kept running with our pid recorded. A
    handler of our own turns the re-raised SIGTERM into a normal exit (status 143)."""
    import signal
    import sys

    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


api_key_app = typer.Typer(no_args_is_help=True, help="Keys for the HTTP API, each for one app: create, list, move, revoke.")
app.add_typer(api_key_app, name="api-key")


@api_key_app.command("create")
def api_key_create(
    name: str = typer.Argument(..., help="What will use the key, e.g. support-bot-prod."),
    app_name: str = typer.Option(..., "--app", help="The app (system) the key speaks for, e.g. support-bot: it pushes "
                                                   "runs under it and reads only its runs. Keys from before apps are in "
                                                   "'default'."),
    scope: str = typer.Option("push", "--scope", help="push (push and read its app's runs), read (read them only) or "
                                                     "admin (push, and read every app's runs)."),
    created_by: str = typer.Option(os.environ.get("USER", ""), help="Who is creating it (recorded)."),
) -> None:
    """Create a key for an app and print it (stdout, once: only its hash is stored)."""
    from services.intake.api_keys import create_api_key
    from services.store import transaction

    try:
        with transaction() as session:
            new = create_api_key(name=name, app=app_name, scope=scope, created_by=created_by, session=session)
    except WorkbenchError as exc:
        fail(exc)
    typer.echo(new.key)
    typer.echo(f"key {new.info.key_id} ({new.info.name}, app {new.info.app}, scope {new.info.scope}) created; keep it now, "
               "it cannot be shown again", err=True)


@api_key_app.command("list")
def api_key_list(as_json: bool = typer.Option(False, "--json", help="Print the keys as JSON.")) -> None:
    """Every key: id, name, app, scope, visible prefix, when created and last used, whether revoked."""
    from dataclasses import asdict

    from services.intake.api_keys import list_api_keys
    from services.store import transaction

    try:
        with transaction() as session:
            keys = list_api_keys(session=session)
    except WorkbenchError as exc:
        fail(exc)
    if as_json:
        emit([asdict(k) for k in keys])
        return
    for k in keys:
        state = f"revoked {k.revoked_at:%Y-%m-%d}" if k.revoked_at else "active"
        used = f"{k.last_used_at:%Y-%m-%d %H:%M}" if k.last_used_at else "never"
        typer.echo(f"{k.key_id:>4}  {k.prefix}...  {k.name:30}  app {k.app:20}  {k.scope:5}  "
                   f"created {k.created_at:%Y-%m-%d}  used {used}  {state}")


@api_key_app.command("move")
def api_key_move(
    key_id: int = typer.Argument(..., help="The key's id (workbench api-key list)."),
    app_name: str = typer.Option(..., "--app", help="The app it belongs to from now on."),
) -> None:
    """Move a key to another app with everything it sent (records, their runs, traces): how the
    keys of before apps, all in 'default', are split one app per system. API servers that
    remembered the key take the move within 30 s."""
    from services.intake.api_keys import move_api_key
    from services.store import transaction

    try:
        with transaction() as session:
            moved = move_api_key(key_id, app=app_name, session=session)
    except WorkbenchError as exc:
        fail(exc)
    typer.echo(f"key {moved.key.key_id} ({moved.key.name}) is in app {moved.key.app}: moved {moved.records} records, "
               f"{moved.runs} runs and {moved.traces} traces with it")


@api_key_app.command("revoke")
def api_key_revoke(key_id: int = typer.Argument(..., help="The key's id (workbench api-key list).")) -> None:
    """Revoke a key: its next request gets 401."""
    from services.intake.api_keys import revoke_api_key
    from services.store import transaction

    try:
        with transaction() as session:
            revoked = revoke_api_key(key_id, session=session)
    except WorkbenchError as exc:
        fail(exc)
    typer.echo(f"key {revoked.key_id} ({revoked.name}, {revoked.prefix}...) revoked")
