"""Confidence against reviewer verdicts: reliability, ECE / Brier / AUROC, calibrators,
weights fitted to verdicts, and the auto-accept threshold for a target precision.

Labels are verdicts: 1 = approved, 0 = flagged or corrected. Unreviewed runs are left out
by the caller (services.scoring.tuning.RunMatrix.reviewed).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from services.errors import InputError
from services.scoring.isotonic import isotonic_knots
from services.scoring.run_matrix import run_store_epoch
from services.scoring.weights import COMPONENTS
from services.store import transaction

MIN_VERDICTS = 10  # fewer than this and a fitted curve is mostly noise
QUEUE_MIN_VERDICTS = 20  # the review queue re-orders by a calibrator only from here on
METHODS = ("isotonic", "logistic")
VERDICT_STATUSES = ("approved", "flagged", "corrected")
# Weak L2 on Platt scaling: finite when a handful of verdicts happen to separate perfectly,
# negligible once there are hundreds.
LOGISTIC_C = 100.0
# An isotonic step counts one approved and one flagged verdict more than it holds (Laplace's
# rule). The plain fit says 0 or 1 wherever its few verdicts agreed: fitted on 30-100 verdicts
# of the judge development set, 50-76% of held-out answers got exactly 0 or 1, and held-out log
# loss was 0.74-1.73 against 0.26-0.40 with the two pseudo-verdicts; Brier moved by at most
# 0.003 either way (README, "The queue's calibrated probability"). 0 gives scikit-learn's fit.
ISOTONIC_PSEUDO_VERDICTS = 2.0


def _as_labels(labels: Any) -> np.ndarray:
    labels = np.asarray(labels).ravel()
    if not np.isin(labels, (0, 1)).all():
        raise InputError("verdict labels must be 1 (approved) or 0 (flagged or corrected); leave unreviewed runs out")
    return labels.astype(np.int64)


def _as_verdicts(scores: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, dtype=np.float64).ravel()
    labels = _as_labels(labels)
    if scores.shape != labels.shape:
        raise InputError(f"{len(scores)} scores but {len(labels)} verdicts: they must pair up one to one")
    if not np.isfinite(scores).all():
        raise InputError("scores must be finite numbers")
    return scores, labels


def _require_verdicts(labels: np.ndarray, minimum: int, what: str, *, both_classes: bool = True) -> None:
    n, positives = len(labels), int(labels.sum())
    if n >= minimum and (not both_classes or 0 < positives < n):
        return
    need = f"at least {minimum} reviewed runs" + (", some approved and some flagged or corrected" if both_classes else "")
    raise InputError(f"{what} needs {need}; there are {n} ({positives} approved, {n - positives} flagged or corrected). "
                     "Review more runs in the queue and try again.")


# --- metrics ------------------------------------------------------------------------------

@dataclass(frozen=True)
class CalibrationReport:
    """How well scores match verdicts; bins are equal-width over [0, 1] (empty bins: None)."""

    n: int
    positives: int
    ece: float
    brier: float
    auroc: float | None  # None when all verdicts agree (no ranking to measure)
    bin_edges: tuple[float, ...]
    bin_centers: tuple[float, ...]
    mean_predicted: tuple[float | None, ...]
    observed: tuple[float | None, ...]  # share approved in the bin
    counts: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def calibration_metrics(scores: Any, labels: Any, n_bins: int = 10) -> CalibrationReport:
    """ECE (bin-weighted |observed - mean predicted|), Brier score, AUROC, reliability bins."""
    from sklearn.metrics import brier_score_loss, roc_auc_score

    scores, labels = _as_verdicts(scores, labels)
    if len(scores) == 0:
        raise InputError("no reviewed runs to measure calibration against: review some runs first")
    if n_bins < 1:
        raise InputError("n_bins must be at least 1")
    # A weighted mean of [0, 1] values can land a rounding error outside [0, 1].
    scores = np.clip(scores, 0.0, 1.0)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    # The same binning as sklearn.calibration.calibration_curve(strategy="uniform").
    bins = np.searchsorted(edges[1:-1], scores, side="right")
    counts = np.bincount(bins, minlength=n_bins)
    predicted_sums = np.bincount(bins, weights=scores, minlength=n_bins)
    positive_sums = np.bincount(bins, weights=labels, minlength=n_bins)
    filled = counts > 0
    mean_predicted = np.divide(predicted_sums, counts, out=np.zeros(n_bins), where=filled)
    observed = np.divide(positive_sums, counts, out=np.zeros(n_bins), where=filled)
    ece = float(np.sum(counts[filled] / len(scores) * np.abs(observed[filled] - mean_predicted[filled])))
    positives = int(labels.sum())
    both = 0 < positives < len(labels)
    return CalibrationReport(
        n=len(scores), positives=positives, ece=ece, brier=float(brier_score_loss(labels, scores)),
        auroc=float(roc_auc_score(labels, scores)) if both else None,
        bin_edges=tuple(float(e) for e in edges), bin_centers=tuple(float(c) for c in (edges[:-1] + edges[1:]) / 2),
        mean_predicted=tuple(float(m) if f else None for m, f in zip(mean_predicted, filled)),
        observed=tuple(float(o) if f else None for o, f in zip(observed, filled)),
        counts=tuple(int(c) for c in counts),
    )


# --- calibrators --------------------------------------------------------------------------

@dataclass(frozen=True)
class Calibrator:
    """Score -> probability of approval. Isotonic: piecewise-linear through (x, y), flat
    outside; logistic (Platt): sigmoid(coef * score + intercept). Stored as JSON."""

    method: str
    x: tuple[float, ...] = ()
    y: tuple[float, ...] = ()
    coef: float = 0.0
    intercept: float = 0.0
    n_fitted: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InputError(f"unknown calibration method '{self.method}' (use {' or '.join(METHODS)})")
        if self.method == "isotonic":
            if not self.x or len(self.x) != len(self.y) or any(b < a for a, b in zip(self.x, self.x[1:])):
                raise InputError("an isotonic calibrator needs equally long x and y with x ascending")

    def __call__(self, scores: Any) -> np.ndarray:
        scores = np.asarray(scores, dtype=np.float64)
        if self.method == "isotonic":
            return np.interp(scores, self.x, self.y)
        from scipy.special import expit

        return expit(self.coef * scores + self.intercept)

    def to_dict(self) -> dict[str, Any]:
        if self.method == "isotonic":
            return {"method": self.method, "x": list(self.x), "y": list(self.y), "n_fitted": self.n_fitted}
        return {"method": self.method, "coef": self.coef, "intercept": self.intercept, "n_fitted": self.n_fitted}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Calibrator:
        try:
            method = data["method"]
            if method == "isotonic":
                return cls(method, x=tuple(map(float, data["x"])), y=tuple(map(float, data["y"])),
                           n_fitted=int(data.get("n_fitted", 0)))
            return cls(method, coef=float(data["coef"]), intercept=float(data["intercept"]),
                       n_fitted=int(data.get("n_fitted", 0)))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"not a stored calibrator: {exc}") from exc


def fit_calibrator(scores: Any, labels: Any, method: str = "isotonic") -> Calibrator:
    """Fit score -> P(approved) on verdicts (at least MIN_VERDICTS, both kinds)."""
    if method not in METHODS:
        raise InputError(f"unknown calibration method '{method}' (use {' or '.join(METHODS)})")
    scores, labels = _as_verdicts(scores, labels)
    _require_verdicts(labels, MIN_VERDICTS, "Calibration")
    if method == "isotonic":
        x, y = isotonic_knots(scores, labels, pseudo_verdicts=ISOTONIC_PSEUDO_VERDICTS)
        return Calibrator("isotonic", x=tuple(x.tolist()), y=tuple(y.tolist()), n_fitted=len(scores))
    from sklearn.linear_model import LogisticRegression

    logistic = LogisticRegression(C=LOGISTIC_C).fit(scores.reshape(-1, 1), labels)
    return Calibrator("logistic", coef=float(logistic.coef_[0, 0]), intercept=float(logistic.intercept_[0]),
                      n_fitted=len(scores))


# --- weights and thresholds ----------------------------------------------------------------

def fit_weights(components: Any, labels: Any) -> dict[str, float]:
    """Non-negative component weights that best predict verdicts, summing to 1.

    Least squares of the verdicts on the components with weights >= 0 (scipy nnls) and a
    free intercept (both sides centered), so a component earns weight for separating
    approved from rejected runs, not for being high on average. The installed
    scikit-learn's LogisticRegression has no `positive` option, hence nnls.
    """
    from scipy.optimize import nnls

    matrix = np.asarray(components, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[1] != len(COMPONENTS):
        raise InputError(f"components must be an (n, {len(COMPONENTS)}) array in COMPONENTS order")
    labels = _as_labels(labels)
    if len(labels) != len(matrix):
        raise InputError(f"{len(matrix)} runs' components but {len(labels)} verdicts: they must pair up one to one")
    _require_verdicts(labels, MIN_VERDICTS, "Fitting weights")
    centered = matrix - matrix.mean(axis=0)
    weights, _residual = nnls(centered, labels - labels.mean())
    if weights.sum() <= 1e-12:
        raise InputError("the verdicts carry no signal for the weights: no component is higher on approved runs "
                         "than on flagged or corrected ones, so every non-negative weight fits worse than none. "
                         "Keep the current weights, or review more runs.")
    weights = weights / weights.sum()
    return {name: float(w) for name, w in zip(COMPONENTS, weights)}


@dataclass(frozen=True)
class ThresholdRecommendation:
    """Lowest auto-accept threshold (score >= threshold) meeting the target precision."""

    target_precision: float
    threshold: float | None  # None: no threshold reaches the target on these verdicts
    precision: float | None
    recall: float | None
    n_auto_accepted: int
    n: int
    reason: str

    @property
    def reachable(self) -> bool:
        return self.threshold is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def recommend_threshold(scores: Any, labels: Any, target_precision: float = 0.9) -> ThresholdRecommendation:
    """The lowest threshold whose auto-accepted set (score >= t) is at least
    `target_precision` approved: the most auto-accepts the verdicts allow at that precision."""
    if not 0 < target_precision <= 1:
        raise InputError("target precision must be in (0, 1]")
    scores, labels = _as_verdicts(scores, labels)
    _require_verdicts(labels, MIN_VERDICTS, "Recommending a threshold", both_classes=False)
    n, positives = len(scores), int(labels.sum())
    order = np.argsort(-scores, kind="stable")
    ranked, hits = scores[order], np.cumsum(labels[order])
    # Candidate cut after position i accepts everything scoring >= ranked[i]: only the
    # last of a run of tied scores is a real cut.
    cuts = np.flatnonzero(np.append(ranked[1:] != ranked[:-1], True))
    precision = hits[cuts] / (cuts + 1)
    meets = np.flatnonzero(precision >= target_precision)
    if positives == 0 or len(meets) == 0:
        best = int(np.argmax(precision))
        reason = (f"no threshold reaches precision {target_precision:.0%} on these {n} verdicts: the best is "
                  f"{precision[best]:.0%} (score >= {ranked[cuts[best]]:.3f}, {cuts[best] + 1} runs). "
                  "Lower the target or improve the weights.")
        return ThresholdRecommendation(target_precision, None, None, None, 0, n, reason)
    i = cuts[meets[-1]]
    accepted, approved = int(i + 1), int(hits[i])
    reason = (f"auto-accepting score >= {ranked[i]:.3f} accepts {accepted} of {n} reviewed runs, "
              f"{approved / accepted:.0%} of them approved ({approved} of {positives} approved runs)")
    return ThresholdRecommendation(target_precision, float(ranked[i]), approved / accepted, approved / positives,
                                   accepted, n, reason)


# --- the review queue's calibrator ---------------------------------------------------------

# What tells a refit is due, read from indexes alone (a million runs: no pass over the verdicts'
# rows): their count (runs_status_created, index-only), the latest review action (every verdict
# appends to review_history), and the runs' tables' files, which TRUNCATE replaces (run_store_epoch).
_VERDICT_STATE_SQL = """
SELECT (SELECT count(*) FROM runs WHERE status = ANY(:statuses)), (SELECT max(id) FROM review_history)
"""
_VERDICTS_SQL = "SELECT final_confidence, status = :approved FROM runs WHERE status = ANY(:statuses)"
_QUEUE_CACHE: dict[str, tuple[tuple[int, Any, Any], Calibrator | None]] = {}
_QUEUE_CACHE_LOCK = threading.Lock()


def calibrator_for_queue(*, session: Session | None = None) -> Calibrator | None:
    """Isotonic calibrator of stored final confidence on all verdicts, or None below
    QUEUE_MIN_VERDICTS (or with one kind only): the queue then orders by raw confidence.

    Cached per process and database; refitted only when the verdicts change (their count
    or the latest review time moves).
    """
    if session is None:
        with transaction() as own:
            return calibrator_for_queue(session=own)
    params = {"statuses": list(VERDICT_STATUSES), "approved": "approved"}
    count, latest = session.execute(text(_VERDICT_STATE_SQL), params).one()
    key, store = (int(count), latest, run_store_epoch(session=session)), str(session.get_bind().engine.url)
    with _QUEUE_CACHE_LOCK:
        cached = _QUEUE_CACHE.get(store)
        if cached is not None and cached[0] == key:
            return cached[1]
    rows = session.execute(text(_VERDICTS_SQL), params).all()
    scores = np.array([r[0] for r in rows], dtype=np.float64)
    labels = np.array([r[1] for r in rows], dtype=np.int64)
    positives = int(labels.sum())
    calibrator = None
    if len(labels) >= QUEUE_MIN_VERDICTS and 0 < positives < len(labels):
        calibrator = fit_calibrator(scores, labels, "isotonic")
    with _QUEUE_CACHE_LOCK:
        _QUEUE_CACHE[store] = (key, calibrator)
    return calibrator
