"""`workbench prune`: whole months of old runs out of the store, reviewed runs kept unless asked."""

from __future__ import annotations

from typing import Optional

import typer

from services.cli._app import app, emit, fail
from services.errors import WorkbenchError
from services.settings import get_settings


@app.command()
def prune(
    older_than: Optional[str] = typer.Option(
        None, "--older-than", help="Remove months wholly older than this age: 90d, 12w (RETENTION_OLDER_THAN, 90d)."),
    keep_reviewed: Optional[bool] = typer.Option(
        None, "--keep-reviewed/--drop-reviewed",
        help="Keep reviewed runs and their history (the default, RETENTION_KEEP_REVIEWED), or remove them too."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would go, per month, and change nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Remove runs older than an age, a month at a time: a month whose runs are all older goes by
    dropping its table, with every row recorded about its runs; reviewed runs (a verdict or any
    review history) stay with all of theirs unless --drop-reviewed. A month straddling the cutoff
    stays whole. Creates the months ahead too (what the daily job does: README, Retention)."""
    from services.review.retention import parse_age
    from services.review.retention import prune as prune_runs

    settings = get_settings()
    try:
        age = parse_age(older_than if older_than is not None else settings.retention_older_than)
        report = prune_runs(older_than=age, dry_run=dry_run, settings=settings,
                            keep_reviewed=settings.retention_keep_reviewed if keep_reviewed is None else keep_reviewed)
    except WorkbenchError as exc:
        fail(exc)
    if as_json:
        emit(report.to_dict())
        return
    verb = "would remove" if report.dry_run else "removed"
    typer.echo(f"runs created before {report.cutoff:%Y-%m-%d %H:%M} UTC; whole months before "
               f"{report.cutoff:%Y-%m} go ({'reviewed runs kept' if report.keep_reviewed else 'reviewed runs too'})")
    for month in report.months:
        typer.echo(f"  {month.month:%Y-%m} ({month.partition}): {verb} {month.remove} of {month.runs} runs, "
                   f"keeping {month.keep} reviewed; table {month.bytes / 1e6:.1f} MB")
    if not report.months:
        typer.echo("  no month is old enough: nothing to do")
    children = ", ".join(f"{n} {table}" for table, n in report.children_removed.items() if n)
    typer.echo(f"{verb} {report.runs_removed} runs, kept {report.runs_kept}"
               + (f"; with them {children}" if children else "")
               + ("" if report.dry_run else f"; {report.bytes_freed / 1e6:.1f} MB of run tables freed"))
