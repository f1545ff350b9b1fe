"""The fitted judge: a logistic combination of the signals (services.judging.features) giving
P(answer supported), its coefficients stored and versioned.

The shipped coefficients (judge_model.json beside this module), pooled and per form of answer,
are fitted by bench/fit_judge.py on the train half of the development set that
bench/judge_set.py builds from four corpora; reviewers' verdicts refit them (refit) once there
are enough.
Nothing here reads a corpus: the product uses the stored numbers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from services.errors import InputError
from services.judging.features import FEATURES
from services.judging.forms import FORMS, answer_form

MODEL_FILE = "judge_model.json"
MIN_VERDICTS_TO_REFIT = 40  # and at least 10 of each kind: fewer fit noise
# A model's verdict, as log-odds, added at weight 1 is Bayes' rule for evidence independent of
# the rest. No model backend or NLI model is reachable where the shipped coefficients are
# fitted, so these signals never vary there and keep this prior; a refit on reviewers' verdicts
# of runs a model did judge fits them.
PRIOR_WEIGHTS = {"model_log_odds": 1.0, "nli_log_odds": 1.0}
# Which way each signal may move P(supported): what it measures says so, and the fit keeps to
# it, so that a quirk of one development set cannot teach the judge that a context sentence
# naming the question's words counts against an answer (a restated question's fabricated
# name carries that correlation in the set; the unsupported name already says it). 0: free.
SIGNS = {
    "abstains": -1, "unsupported_atom": -1, "atom_support": 1, "word_support": 1, "evidence_support": 1,
    "question_coverage": 1, "entity_coverage": 1, "coverage_margin": 1, "locality": 1, "locality_margin": 1, "type_fit": 1,
    "option_margin": 1, "option_relevance": 1, "reversal": -1, "contradiction": -1, "similarity": 1,
    "relevance": 1, "evidence_margin": 1, "evidence_relevance": 1, "sentence_relevance": 1, "evidence_nearness": 1, "concise": 0,
    "quote_changed": -1, "reader": 1, "option_reader": 1, "model_log_odds": 1, "nli_log_odds": 1,
}
READER_SIGNALS = ("reader", "option_reader")  # what the reader of the question reads: out of the fit without it


# The signals are weighed per form of answer. In a passage's sentence, relevance to the question
# is what tells the sentence that answers from one about something else (retrieval missed the
# answer and the system quoted what it found); in a restated question every answer echoes the
# question, and what it puts in the question's gap decides. One set of weights for both taught
# neither (2026-12-01: the development set's test half, nothing-retrieved 0.71-0.82 -> 0.84-0.91
# on three corpora with a set per form; docs/judge-history.md, "One set of weights per form").
MIN_FORM_ANSWERS = 60  # and MIN_FORM_PER_CLASS of each label: fewer keep the pooled weights
MIN_FORM_PER_CLASS = 15


@dataclass(frozen=True)
class Weights:
    coefficients: Mapping[str, float]
    intercept: float


@dataclass(frozen=True)
class JudgeModel:
    version: str
    coefficients: Mapping[str, float]  # pooled over forms: for a form without its own
    intercept: float
    accept_at: float  # P(supported) at or above which an answer may skip review
    trained_on: Mapping[str, Any] = field(default_factory=dict)
    by_form: Mapping[str, Weights] = field(default_factory=dict)
    # The same fit without the reader of the question's signal: what skipping review also reads
    # (services.judging.judge.acceptance_score). None for a model fitted on rows no reader read.
    without_reader: JudgeModel | None = None

    def weights(self, features: Mapping[str, float]) -> Weights:
        """The weights that read `features`: their form's, else the pooled ones."""
        form = answer_form(features)
        own = self.by_form.get(form) if form is not None else None
        return own if own is not None else Weights(self.coefficients, self.intercept)

    def probability(self, features: Mapping[str, float]) -> float:
        weights = self.weights(features)
        z = weights.intercept + sum(w * float(features.get(name, 0.0)) for name, w in weights.coefficients.items())
        return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))

    def to_dict(self) -> dict[str, Any]:
        unread = {"without_reader": self.without_reader.to_dict()} if self.without_reader is not None else {}
        return {"version": self.version, "coefficients": dict(self.coefficients), "intercept": self.intercept,
                "accept_at": self.accept_at, "trained_on": dict(self.trained_on),
                "by_form": {form: {"coefficients": dict(w.coefficients), "intercept": w.intercept}
                            for form, w in self.by_form.items()}, **unread}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JudgeModel:
        try:
            coefficients = {str(k): float(v) for k, v in data["coefficients"].items()}
            by_form = {str(form): Weights({str(k): float(v) for k, v in w["coefficients"].items()}, float(w["intercept"]))
                       for form, w in data.get("by_form", {}).items()}
            unread = cls.from_dict(data["without_reader"]) if data.get("without_reader") is not None else None
            model = cls(str(data["version"]), coefficients, float(data["intercept"]), float(data["accept_at"]),
                        dict(data.get("trained_on", {})), by_form, unread)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(f"a judge model needs version, coefficients, intercept and accept_at: {exc}") from exc
        if set(by_form) - set(FORMS):
            raise InputError(f"a judge model's forms are {', '.join(FORMS)}; it names {', '.join(sorted(set(by_form) - set(FORMS)))}")
        unknown = (set(coefficients) | {k for w in by_form.values() for k in w.coefficients}) - set(FEATURES)
        if unknown:
            raise InputError(f"the judge model names signals the judge does not compute: {', '.join(sorted(unknown))}")
        return model


@cache
def shipped_model() -> JudgeModel:
    text = resources.files(__name__.rpartition(".")[0]).joinpath(MODEL_FILE).read_text(encoding="utf-8")
    return JudgeModel.from_dict(json.loads(text))


def fit(rows: Sequence[Mapping[str, float]], labels: Sequence[int], *, version: str, accept_at: float,
        trained_on: Mapping[str, Any], regularization: float = 1.0, without_reader: bool = True,
        accept_without_reader_at: float | None = None) -> JudgeModel:
    """Logistic regressions over FEATURES (L2, `regularization` as sklearn's C) whose weights keep
    the signs SIGNS gives: one pooled over every answer, and one per form (answer_form) that has
    at least MIN_FORM_ANSWERS answers, MIN_FORM_PER_CLASS of each label; a signal that never
    varies in the rows fitted keeps its prior weight (PRIOR_WEIGHTS, else 0). Where rows carry the
    reader's signal and `without_reader`, the same fit without it beside them, judging alone (with
    JUDGE_READER off) at `accept_without_reader_at` (default `accept_at`)."""
    if len(set(labels)) < 2:
        raise InputError("fitting the judge needs both right and wrong answers")
    pooled = _fit_weights(rows, labels, regularization)
    forms = [answer_form(row) for row in rows]
    by_form, counts = {}, {}
    for form in FORMS:
        picked = [i for i, f in enumerate(forms) if f == form]
        right = sum(labels[i] for i in picked)
        counts[form] = len(picked)
        if len(picked) >= MIN_FORM_ANSWERS and min(right, len(picked) - right) >= MIN_FORM_PER_CLASS:
            by_form[form] = _fit_weights([rows[i] for i in picked], [labels[i] for i in picked], regularization)
    # Fitted again without the reader where rows carry it: P as the judge read answers before it came,
    # which an answer the reader speaks for must reach too to skip review.
    unread = None
    if without_reader and any(row.get(name) for row in rows for name in READER_SIGNALS):
        unread = fit([{k: v for k, v in row.items() if k not in READER_SIGNALS} for row in rows], labels,
                     version=f"{version}/without-reader", trained_on={}, regularization=regularization,
                     accept_at=accept_at if accept_without_reader_at is None else accept_without_reader_at)
    return JudgeModel(version, pooled.coefficients, pooled.intercept, accept_at,
                      {**trained_on, "answers": len(labels), "right": int(sum(labels)), "answers_by_form": counts},
                      by_form, unread)


def _fit_weights(rows: Sequence[Mapping[str, float]], labels: Sequence[int], regularization: float) -> Weights:
    import numpy as np
    from scipy.optimize import minimize

    varying = [name for name in FEATURES if len({float(row.get(name, 0.0)) for row in rows}) > 1]
    x = np.array([[float(row.get(name, 0.0)) for name in varying] for row in rows]).reshape(len(rows), len(varying))
    y = np.asarray(labels, dtype=float)
    n = len(y)

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:-1], theta[-1]
        z = x @ w + b
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -60, 60)))
        value = float(np.mean(np.logaddexp(0.0, z) - y * z) + (w @ w) / (2 * regularization * n))
        grad = np.append(x.T @ (p - y) / n + w / (regularization * n), np.mean(p - y))
        return value, grad

    bounds = [(0.0, None) if SIGNS.get(name, 0) > 0 else (None, 0.0) if SIGNS.get(name, 0) < 0 else (None, None)
              for name in varying] + [(None, None)]
    theta = minimize(loss, np.zeros(len(varying) + 1), jac=True, method="L-BFGS-B", bounds=bounds,
                     options={"maxiter": 5000}).x
    coefficients = {name: PRIOR_WEIGHTS.get(name, 0.0) for name in FEATURES}
    coefficients.update({name: round(float(w), 6) for name, w in zip(varying, theta[:-1], strict=True)})
    return Weights(coefficients, round(float(theta[-1]), 6))
