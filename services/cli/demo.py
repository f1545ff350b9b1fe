"""`workbench demo`: fill the store with demo runs and answer-key verdicts, or remove them."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import typer
from tqdm import tqdm

from services.cli._app import app, emit, fail
from services.errors import WorkbenchError

if TYPE_CHECKING:
    from services.demo import DemoProgress

_PHASE_BARS = {"start": ("starting the store and the embedding model", "step"),
               "handbook": ("loading the demo handbook", "doc"), "runs": ("answering demo questions", "run")}


class _ProgressBars:
    """A tqdm bar per phase of the load on stderr: the store's start, the handbook's documents, the runs."""

    def __init__(self, *, disable: bool) -> None:
        self.disable = disable
        self.phase = ""
        self.bar: tqdm | None = None

    def __call__(self, progress: DemoProgress) -> None:
        if progress.phase != self.phase:
            self.close()
            desc, unit = _PHASE_BARS.get(progress.phase, (progress.phase, "step"))
            self.bar = tqdm(desc=desc, unit=unit, total=progress.total, disable=self.disable, file=sys.stderr)
            self.phase = progress.phase
        if self.bar is None:  # this phase's bar is finished already
            return
        self.bar.total = progress.total
        self.bar.set_postfix_str(progress.label, refresh=False)
        self.bar.update(progress.done - self.bar.n)
        if progress.done >= progress.total:
            self.close()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


@app.command()
def demo(
    remove: bool = typer.Option(False, "--remove", help="Remove every demo run and verdict (the handbook stays)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Answer the demo handbook's 25 questions with all three presets through the real pipeline
    (loading the handbook first when the store has none), and give the minimal and research
    presets' runs the answer key's verdicts, stored as the reviewer "demo answer key". The
    balanced runs stay as the pipeline routed them, for a person to review. Running it again
    replaces the earlier demo runs; --remove deletes them all."""
    from services.demo import load_demo, remove_demo

    if remove:
        try:
            removed = remove_demo()
        except WorkbenchError as exc:
            fail(exc)
        if as_json:
            emit({"removed_runs": removed.runs, "removed_reviews": removed.reviews})
        else:
            typer.echo(f"removed {removed.runs} demo runs and {removed.reviews} review actions on them; "
                       "the demo handbook's documents stay in the corpus")
        return
    try:
        summary = load_demo(on_progress=_ProgressBars(disable=as_json))
    except WorkbenchError as exc:
        fail(exc)
    if as_json:
        emit(summary.to_dict())
        return
    if summary.corpus is not None:
        typer.echo(f"demo handbook loaded: {summary.corpus.ingested} documents, {summary.corpus.chunks_added} chunks")
    if summary.replaced_runs:
        typer.echo(f"replaced {summary.replaced_runs} demo runs of an earlier load")
    statuses = ", ".join(f"{n} {status}" for status, n in sorted(summary.by_status.items()))
    verdicts = ", ".join(f"{n} {action}" for action, n in sorted(summary.answer_key_verdicts.items()))
    phases = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in summary.phase_seconds.items())
    typer.echo(f"{summary.runs} demo runs in {summary.seconds:.0f} s ({phases}): {statuses}")
    typer.echo(f"answer-key verdicts (not a person's): {verdicts}")
    typer.echo("open the workbench (workbench serve) and start with the Review queue; "
               "`workbench demo --remove` takes it all out again")
