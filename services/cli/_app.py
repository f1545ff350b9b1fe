"""The `workbench` Typer app, its global options and the two ways a command ends: JSON out or `error:`."""

from __future__ import annotations

import json
import os
import re
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
    typer.echo(f"error: {shown(exc, lines=True)}", err=True)
    raise typer.Exit(1)


# C0 and C1 controls (escape sequences, bell, carriage return) and bidi overrides.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def shown(text: object, *, lines: bool = False) -> str:
    """`text` with control characters written as escapes (\\x1b), so a file name, id or document
    cannot drive the terminal; with `lines`, line breaks and tabs are kept."""
    def escape(match: re.Match[str]) -> str:
        char = match.group()
        return char if lines and char in "\n\t" else char.encode("unicode_escape").decode("ascii")

    return _UNPRINTABLE.sub(escape, str(text))

