"""A collection's own confidence mapping: weighted confidence and QPP signals -> probability.

The weighted sum of the seven components ranks retrievals but is no probability: on SQuAD
half-dev a hybrid score of 0.55 already means a relevant document in the top ten 98% of the
time. Self-calibration (services.scoring.self_calibration) fits, per collection and
retrieval mode, P(the sought document is in the top 10 | features) on pseudo-questions the
corpus asks of itself, and the profile keeps it:

* logistic (the default): a logistic regression on the standardized features, the
  weighted confidence plus the QPP signals of the legs that ran (services.scoring.qpp).
  It can rank better than the weighted sum, because it learns what the signals mean on
  this corpus; a retrieval missing a signal (a run stored before signals were kept) gets
  the fitted mean for it, which leaves that feature out of its score.
* isotonic: a monotone step function of the weighted confidence alone; it only relabels
  the scale, so the ranking (AUROC) stays the weighted sum's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from services.errors import InputError
from services.scoring.isotonic import isotonic_knots

METHODS = ("logistic", "isotonic")
WEIGHTED = "weighted"  # the feature name of the weighted sum of the components
MIN_PSEUDO_QUERIES = 50  # both outcomes must be there too
# Moderate L2: a few hundred pseudo-questions, a handful of correlated features.
LOGISTIC_C = 1.0


@dataclass(frozen=True)
class ConfidenceMapping:
    method: str
    features: tuple[str, ...] = (WEIGHTED,)
    center: tuple[float, ...] = ()
    scale: tuple[float, ...] = ()
    coef: tuple[float, ...] = ()
    intercept: float = 0.0
    x: tuple[float, ...] = ()  # isotonic knots over the weighted confidence
    y: tuple[float, ...] = ()
    n_fitted: int = 0
    positives: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InputError(f"unknown mapping method '{self.method}' (use {' or '.join(METHODS)})")
        if self.method == "logistic" and not len(self.features) == len(self.center) == len(self.scale) == len(self.coef):
            raise InputError("a logistic mapping needs a center, scale and coefficient for each feature")
        if self.method == "isotonic" and (not self.x or len(self.x) != len(self.y)):
            raise InputError("an isotonic mapping needs equally long, non-empty knots x and y")

    def __call__(self, weighted: float, signals: Mapping[str, float]) -> float:
        if self.method == "isotonic":
            return float(np.interp(weighted, self.x, self.y))
        values = {WEIGHTED: weighted, **signals}
        z = self.intercept + sum(c * (values.get(f, m) - m) / s
                                 for f, m, s, c in zip(self.features, self.center, self.scale, self.coef))
        return float(1.0 / (1.0 + np.exp(-z)))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConfidenceMapping:
        if not isinstance(data, Mapping):
            raise InputError(f"not a stored confidence mapping: a {type(data).__name__}, not an object")
        try:
            floats = {k: tuple(float(v) for v in data.get(k, ())) for k in ("center", "scale", "coef", "x", "y")}
            return cls(method=str(data["method"]), features=tuple(map(str, data.get("features", (WEIGHTED,)))),
                       intercept=float(data.get("intercept", 0.0)), n_fitted=int(data.get("n_fitted", 0)),
                       positives=int(data.get("positives", 0)), **floats)
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"not a stored confidence mapping: {exc}") from exc


def fit_mapping(weighted: Sequence[float], signals: Sequence[Mapping[str, float]], labels: Sequence[int], *,
                features: Sequence[str], method: str = "logistic") -> ConfidenceMapping:
    """Fit P(label) from the weighted confidence (and, logistic, the named signals)."""
    if method not in METHODS:
        raise InputError(f"unknown mapping method '{method}' (use {' or '.join(METHODS)})")
    y = np.asarray(labels, dtype=np.int64)
    n, positives = len(y), int(y.sum())
    if n < MIN_PSEUDO_QUERIES or not 0 < positives < n:
        raise InputError(f"self-calibration needs at least {MIN_PSEUDO_QUERIES} pseudo-questions, some found and "
                         f"some missed; there were {n} ({positives} found). Ingest more documents or sample more.")
    w = np.asarray(weighted, dtype=np.float64)
    if method == "isotonic":
        knots_x, knots_y = isotonic_knots(w, y)
        return ConfidenceMapping("isotonic", x=tuple(knots_x.tolist()), y=tuple(knots_y.tolist()), n_fitted=n,
                                 positives=positives)
    from sklearn.linear_model import LogisticRegression

    # a signal no retrieval has (the dense leg's, in bm25 mode) is left out, not imputed
    names = (WEIGHTED, *(f for f in features if f != WEIGHTED and any(f in row for row in signals)))
    matrix = np.column_stack([w] + [[row.get(f, np.nan) for row in signals] for f in names[1:]])
    center = np.nanmean(matrix, axis=0)
    matrix = np.where(np.isnan(matrix), center, matrix)
    scale = matrix.std(axis=0)
    scale[scale < 1e-12] = 1.0  # a constant feature: nothing to learn from it, keep it finite
    model = LogisticRegression(C=LOGISTIC_C, max_iter=1000).fit((matrix - center) / scale, y)
    return ConfidenceMapping("logistic", features=names, center=tuple(map(float, center)),
                             scale=tuple(map(float, scale)), coef=tuple(map(float, model.coef_[0])),
                             intercept=float(model.intercept_[0]), n_fitted=n, positives=positives)
