"""Commands for runs from other systems: import files, the HTTP API and its keys."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer

from services.cli._app import app, emit, fail
from services.errors import WorkbenchError
from services.settings import get_settings


@app.command("import")
def import_runs(
    file: Optional[Path] = typer.Argument(None, help="A .jsonl, .csv or .parquet file of records."),
    fmt: Optional[str] = typer.Option(None, "--format", help="jsonl, csv or parquet (default: from the suffix)."),
    schema: bool = typer.Option(False, "--schema", help="Print the JSON Schema of one record and exit."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Import runs another RAG system produced: bad records are listed by line, the good ones
    land; a trace_id imported before is skipped, so re-importing a file is safe."""
    from services.errors import InputError
    from services.intake.importing import import_file
    from services.intake.schema import record_json_schema

    if schema:
        emit(record_json_schema())
        return
    if file is None:
        fail(InputError("give a FILE to import (workbench import --schema shows what one record looks like)"))
    try:
        summary = import_file(file, fmt=fmt)  # type: ignore[arg-type]
    except WorkbenchError as exc:
        fail(exc)
    if as_json:
        emit(summary.to_dict())
    else:
        typer.echo(f"accepted {summary.accepted} new, {summary.duplicates} already imported, {summary.error_count} bad; "
                   f"{summary.accepted} queued for assessment")
        for error in summary.errors:
            typer.echo(f"  {error}", err=True)
        if summary.error_count > len(summary.errors):
            typer.echo(f"  ... and {summary.error_count - len(summary.errors)} more", err=True)
    if summary.error_count:
        raise typer.Exit(1)  # the good records have landed; the exit code says not all did


@app.command("api")
def api_server(
    host: Optional[str] = typer.Option(None, help="Interface to listen on (API_HOST; default 127.0.0.1, 0.0.0.0 for all)."),
    port: Optional[int] = typer.Option(None, help="Port (API_PORT; default 8000)."),
    access_log: bool = typer.Option(True, "--access-log/--no-access-log", help="Log every request."),
) -> None:
    """Run the HTTP API other RAG systems push runs to (OpenAPI docs at /docs)."""
    import uvicorn

    settings = get_settings()
    host, port = host or settings.api_host, port or settings.api_port
    typer.echo(f"API on http://{host}:{port} (docs at http://{host}:{port}/docs)", err=True)
    # By import string: the app is built from the same settings (--data-dir, .env) in uvicorn.
    uvicorn.run("api.app:create_app_from_env", factory=True, host=host, port=port, access_log=access_log)


api_key_app = typer.Typer(no_args_is_help=True, help="Keys for the HTTP API: create, list, revoke.")
app.add_typer(api_key_app, name="api-key")


@api_key_app.command("create")
def api_key_create(
    name: str = typer.Argument(..., help="What will use the key, e.g. support-bot-prod."),
    created_by: str = typer.Option(os.environ.get("USER", ""), help="Who is creating it (recorded)."),
) -> None:
    """Create a key and print it (stdout, once: only its hash is stored)."""
    from services.intake.api_keys import create_api_key
    from services.store import transaction

    try:
        with transaction() as session:
            new = create_api_key(name=name, created_by=created_by, session=session)
    except WorkbenchError as exc:
        fail(exc)
    typer.echo(new.key)
    typer.echo(f"key {new.info.key_id} ({new.info.name}) created; keep it now, it cannot be shown again", err=True)


@api_key_app.command("list")
def api_key_list(as_json: bool = typer.Option(False, "--json", help="Print the keys as JSON.")) -> None:
    """Every key: id, name, visible prefix, when created and last used, whether revoked."""
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
        typer.echo(f"{k.key_id:>4}  {k.prefix}...  {k.name:30}  created {k.created_at:%Y-%m-%d}  used {used}  {state}")


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
