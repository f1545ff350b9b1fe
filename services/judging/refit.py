"""The judge refitted from reviewers' verdicts, stored as a new version, and the model to judge with.

Reviewers' verdicts are the labels the shipped coefficients never saw: approved (right),
flagged or corrected (wrong), on the runs the judge scored, with the signals it stored. Once
there are enough of both, a refit on them is measured against the model in use by 5-fold
cross-validation on the same verdicts and stored; it becomes the active model only when it
ranks them better. `active_model` is what the pipeline and intake judge with.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from db.models import JudgeModelRow
from services.domain import RunStatus
from services.errors import InputError
from services.judging.features import FEATURES
from services.judging.model import MIN_VERDICTS_TO_REFIT, JudgeModel, fit, shipped_model
from services.store import read_transaction, transaction

MIN_PER_CLASS = 10
_FOLDS = 5

# The judged best iteration of each reviewed run, with the reviewer's verdict.
_VERDICTS_SQL = """
SELECT it.verdict -> 'features' AS features, r.status
FROM runs r
JOIN run_iterations it ON it.run_id = r.id AND it.ordinal = r.best_iteration
WHERE r.status = ANY(:statuses) AND it.verdict -> 'features' IS NOT NULL
  AND it.verdict ->> 'label' NOT IN ('abstained', 'unchecked')
"""
_RIGHT, _WRONG = (RunStatus.APPROVED,), (RunStatus.FLAGGED, RunStatus.CORRECTED)


@dataclass(frozen=True)
class Refit:
    """What a refit found: the verdicts it read and how each model ranks them (held out)."""

    verdicts: int
    right: int
    current_version: str
    current_auroc: float
    refit_auroc: float
    model: JudgeModel
    activated: bool
    left_out: int = 0  # verdicts on runs an earlier judge read, without every signal read today

    @property
    def left_out_note(self) -> str:
        return _left_out_note(self.left_out)

    def to_dict(self) -> dict[str, object]:
        return {"verdicts": self.verdicts, "right": self.right, "current_version": self.current_version,
                "current_auroc": round(self.current_auroc, 4), "refit_auroc": round(self.refit_auroc, 4),
                "version": self.model.version, "activated": self.activated, "left_out": self.left_out}


def active_model(*, session: Session) -> JudgeModel:
    """The active refitted model, else the shipped one."""
    row = session.scalars(select(JudgeModelRow).where(JudgeModelRow.active)).first()
    return JudgeModel.from_dict(row.model) if row is not None else shipped_model()


def refit_from_verdicts(*, session: Session, created_by: str, activate_if_better: bool = True) -> Refit:
    """Refit the judge on the reviewed runs' stored signals (caller owns the transaction)."""
    rows = session.execute(text(_VERDICTS_SQL), {"statuses": [s.value for s in _RIGHT + _WRONG]}).all()
    # A run judged before the judge read one of today's signals stored none for it: fitted as a 0
    # it would read as the signal's worst, so such runs are left out, and counted.
    current_rows = [r for r in rows if set(FEATURES) <= set(r.features)]
    older = len(rows) - len(current_rows)
    features = [dict(r.features) for r in current_rows]
    labels = [1 if r.status in _RIGHT else 0 for r in current_rows]
    right = sum(labels)
    if len(labels) < MIN_VERDICTS_TO_REFIT or min(right, len(labels) - right) < MIN_PER_CLASS:
        raise InputError(f"refitting the judge needs {MIN_VERDICTS_TO_REFIT} reviewed, judged runs with at least "
                         f"{MIN_PER_CLASS} approved and {MIN_PER_CLASS} flagged or corrected; there are {len(labels)} "
                         f"({right} approved){_left_out_note(older)}")
    current = active_model(session=session)
    number = (session.scalar(text("SELECT count(*) FROM judge_models")) or 0) + 1
    trained_on = {"verdicts": len(labels), "refit_of": current.version, "by": created_by, "left_out": older}
    model = fit(features, labels, version=f"{current.version.split('+')[0]}+verdicts{number}",
                accept_at=current.accept_at, trained_on=trained_on)
    current_auroc, refit_auroc = _held_out_aurocs(features, labels, current)
    better = refit_auroc > current_auroc
    if activate_if_better and better:
        session.execute(update(JudgeModelRow).where(JudgeModelRow.active).values(active=False))
    session.add(JudgeModelRow(version=model.version, model=model.to_dict(), active=activate_if_better and better,
                              created_by=created_by, notes=f"held-out AUROC {refit_auroc:.3f} vs {current_auroc:.3f} "
                                                           f"({current.version}) on {len(labels)} verdicts"))
    session.flush()
    return Refit(len(labels), right, current.version, current_auroc, refit_auroc, model, activate_if_better and better,
                 older)


def _left_out_note(verdicts: int) -> str:
    return f"; {verdicts} verdicts on runs an earlier judge read were left out" if verdicts else ""


def _held_out_aurocs(features: list[dict[str, float]], labels: list[int], current: JudgeModel) -> tuple[float, float]:
    """AUROC of the current model and of refits on the other folds, over the same held-out verdicts."""
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold

    refit_scores = [0.0] * len(labels)
    for train, test in StratifiedKFold(_FOLDS, shuffle=True, random_state=0).split(features, labels):
        fold = fit([features[i] for i in train], [labels[i] for i in train], version="fold",
                   accept_at=current.accept_at, trained_on={}, without_reader=False)  # a fold is only ranked
        for i in test:
            refit_scores[i] = fold.probability(features[i])
    current_scores = [current.probability(f) for f in features]
    return float(roc_auc_score(labels, current_scores)), float(roc_auc_score(labels, refit_scores))


def refit_judge(*, created_by: str, activate_if_better: bool = True) -> Refit:
    """refit_from_verdicts in a transaction of its own."""
    with transaction() as session:
        return refit_from_verdicts(session=session, created_by=created_by, activate_if_better=activate_if_better)


def model_in_use() -> JudgeModel:
    with read_transaction() as session:
        return active_model(session=session)
