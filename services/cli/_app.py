"""The `workbench` Typer app, its global options and the two ways a command ends: JSON out or `error:`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

import typer

from services.errors import WorkbenchError
from services.settings import get_settings

app = typer.Typer(add_completion=False, no_args_is_help=True, help="RAG Confidence Workbench")


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


def emit(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, default=str))


def fail(exc: WorkbenchError) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(1)

