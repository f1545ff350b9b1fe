"""Self-calibration commands: `workbench calibrate`, and the re-fit `workbench ingest` runs after
an ingest that changed a big enough collection."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer
from tqdm import tqdm

from services.cli._app import app, emit, fail
from services.errors import InputError, WorkbenchError
from services.scoring.mapping import METHODS
from services.scoring.pseudo_queries import DEFAULT_PSEUDO_QUERIES

if TYPE_CHECKING:  # the ingest machinery loads when a command runs, not when the CLI starts
    from services.corpus.ingest import IngestSummary


@app.command()
def calibrate(
    collection: str = typer.Option(..., help="The collection to calibrate."),
    pseudo_questions: int = typer.Option(DEFAULT_PSEUDO_QUERIES, "--pseudo-questions", min=1,
                                         help="Questions the collection asks itself (at least 100 usable are needed)."),
    seed: int = typer.Option(0, help="Which chunks are sampled; the same seed reproduces the fit."),
    method: str = typer.Option("logistic", help=f"{' or '.join(METHODS)}."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Fit the collection's confidence mapping (P(the document is found) per retrieval mode) on
    pseudo-questions cut from its own chunks, and store it as the next version of the active
    weights profile, made active. AUROC and ECE are measured on held-out pseudo-questions,
    before (the weighted sum) and after (the mapping)."""
    from services.scoring.self_calibration import self_calibrate

    if method not in METHODS:  # checked before minutes of searching, not after
        fail(InputError(f"unknown method '{method}' (use {' or '.join(METHODS)})"))
    try:
        with _progress_bar(disable=as_json) as progress:
            result = self_calibrate(collection, n=pseudo_questions, seed=seed, method=method,
                                    created_by="workbench calibrate", on_progress=progress)
    except WorkbenchError as exc:
        fail(exc)
    if as_json:
        emit(result.to_dict())
        return
    typer.echo(f"self-calibrated '{result.collection}' on {result.pseudo_queries} pseudo-questions "
               f"(seed {result.seed}, {method}); held-out figures, before -> after:")
    typer.echo(f"{'mode':8} {'AUROC':>6} {'AUROC*':>6} {'ECE':>6} {'ECE*':>6} {'found':>9}")
    for m in result.modes:
        typer.echo(f"{m.mode:8} {_figure(m.before.auroc)} {_figure(m.after.auroc)} {_figure(m.before.ece)} "
                   f"{_figure(m.after.ece)} {f'{m.mapping.positives}/{m.mapping.n_fitted}':>9}")
    for mode, reason in result.skipped.items():
        typer.echo(f"{mode:8} not calibrated: {reason}")
    typer.echo(f"stored profile {result.profile.label} (id {result.profile_id}), now active")


def recalibrate_after_ingest(summary: IngestSummary, *, collection: str, as_json: bool) -> dict[str, Any] | None:
    """Re-fit `collection` when this ingest calls for it (services.scoring.recalibration).
    Prints what was stored, or the warning; never fails the ingest. Returns what --json adds
    to the ingest summary (None when nothing was attempted)."""
    from services.scoring.recalibration import decide_recalibration, describe_calibration, recalibrate

    try:
        decision = decide_recalibration(summary, collection=collection)
        if not decision.recalibrate:
            return None
        if not as_json:
            typer.echo(f"self-calibrating: {decision.reason}")
        with _progress_bar(disable=as_json) as progress:
            outcome = recalibrate(decision, on_progress=progress)
    except WorkbenchError as exc:  # the ingest is committed: whatever went wrong here is a warning
        typer.echo(f"warning: self-calibration of '{collection}' was not done: {exc}", err=True)
        return {"stored": None, "warning": str(exc)}
    if outcome.warning is not None:
        typer.echo(f"warning: {outcome.warning}", err=True)
        return {"stored": None, "warning": outcome.warning}
    assert outcome.result is not None
    if not as_json:
        for line in describe_calibration(outcome.result):
            typer.echo(f"  {line}")
    return {"stored": outcome.result.to_dict(), "warning": None}


@contextmanager
def _progress_bar(*, disable: bool) -> Iterator[Any]:
    """An on_progress(done, total) feeding a tqdm bar on stderr; the bar closes (ending its
    line) before anything else is printed."""
    with tqdm(desc="self-calibrating", unit="search", disable=disable, file=sys.stderr) as bar:
        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        yield progress


def _figure(value: float | None) -> str:
    return f"{value:6.3f}" if value is not None else f"{'n/a':>6}"
