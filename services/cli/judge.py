"""`workbench judge`: the model the judge scores answers with, and its refit from reviewers' verdicts."""

from __future__ import annotations

import typer

from services.cli._app import app, emit, fail
from services.errors import WorkbenchError

judge_app = typer.Typer(help="The answer judge: P(supported) for every answer, ours and imported.", no_args_is_help=True)
app.add_typer(judge_app, name="judge")


@judge_app.command("refit")
def refit(
    keep_current: bool = typer.Option(False, "--keep-current", help="Store the refit without making it active."),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Refit the judge on reviewers' verdicts (approved = right; flagged or corrected = wrong) and
    store it as a new version; it becomes active only if it ranks the verdicts better than the
    model in use, both measured by 5-fold cross-validation on the same verdicts."""
    from services.judging.refit import refit_judge

    try:
        result = refit_judge(created_by="workbench judge refit", activate_if_better=not keep_current)
    except WorkbenchError as exc:
        fail(exc)
    if as_json:
        emit(result.to_dict())
        return
    typer.echo(f"refit on {result.verdicts} verdicts ({result.right} approved){result.left_out_note}: held-out AUROC "
               f"{result.refit_auroc:.3f} against {result.current_auroc:.3f} for {result.current_version}")
    typer.echo(f"stored {result.model.version}" + (", now active" if result.activated else ", not active"))


@judge_app.command("show")
def show(as_json: bool = typer.Option(False, "--json", help="Print the model as JSON.")) -> None:
    """The model the judge scores with now: version, coefficients, accept threshold, what it was fitted on."""
    from services.judging.reader import reader_state
    from services.judging.refit import model_in_use
    from services.settings import get_settings

    try:
        model = model_in_use()
    except WorkbenchError as exc:
        fail(exc)
    if as_json:
        emit(model.to_dict())
        return
    typer.echo(f"{model.version}: auto-accept at P(supported) >= {model.accept_at}; fitted on {dict(model.trained_on)}")
    forms = list(model.by_form)
    typer.echo(f"  {'signal':20} {'pooled':>8}" + "".join(f" {form:>9}" for form in forms))
    for name, weight in sorted(model.coefficients.items(), key=lambda kv: -abs(kv[1])):
        typer.echo(f"  {name:20} {weight:+8.3f}" + "".join(f" {model.by_form[f].coefficients[name]:+9.3f}" for f in forms))
    typer.echo(f"  {'(intercept)':20} {model.intercept:+8.3f}" + "".join(f" {model.by_form[f].intercept:+9.3f}" for f in forms))
    typer.echo(reader_state(get_settings().embedding_model))
