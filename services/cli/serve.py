"""`workbench serve`: the Streamlit UI, with the HTTP API beside it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Optional

import typer

from services.cli._app import app, fail
from services.errors import WorkbenchError
from services.settings import get_settings

ROOT = Path(__file__).resolve().parents[2]


@app.command()
def serve(
    port: int = typer.Option(8501, help="Port on 127.0.0.1."),
    api: bool = typer.Option(True, "--api/--no-api", help="Also run the HTTP API (workbench api) beside the UI."),
    api_port: Optional[int] = typer.Option(None, "--api-port", help="The API's port on 127.0.0.1 (API_PORT; default 8000)."),
) -> None:
    """Start the database, load the demo corpus when empty, and run the workbench UI (and the HTTP API)."""
    from services.corpus.stats import load_demo_corpus_if_empty
    from services.store import get_engine

    try:
        get_engine()
        summary = load_demo_corpus_if_empty(on_progress=lambda p: typer.echo(
            f"loading demo corpus: {p.documents_done} documents, {p.chunks_done} chunks", err=True))
    except WorkbenchError as exc:
        fail(exc)
    if summary is not None:
        typer.echo(f"demo corpus loaded: {summary.ingested} documents, {summary.chunks_added} chunks", err=True)
    if api:
        _start_api_beside_ui(api_port or get_settings().api_port)
    typer.echo(f"workbench on http://127.0.0.1:{port}", err=True)
    # The UI process joins the same embedded server; this process keeps its handle while
    # the UI runs, so the server stops only after both have gone.
    raise typer.Exit(subprocess.call([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
                                      "--server.port", str(port)], cwd=ROOT))


def _start_api_beside_ui(port: int) -> None:
    """The API in a daemon thread of this process: it shares the store handle this process
    holds for the UI, and ends with it. A taken port costs the API, not the UI."""
    import threading
    import time

    import uvicorn

    server = uvicorn.Server(uvicorn.Config("api.app:create_app_from_env", factory=True, host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, name="workbench-api", daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    if server.started:
        typer.echo(f"API on http://127.0.0.1:{port} (docs at /docs)", err=True)
    else:
        typer.echo(f"the API did not start on port {port} (taken?); the UI runs without it (--api-port to move it)", err=True)
