"""The blended confidence (seed 000): retrieval, reflection, grade and heuristic signals in one
number, and the reflection score that approves an answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Seed 004: a reflection score at or above this approves an answer (the router, auto-accept,
# the offline judge's needs_regeneration, the tuning page and the run charts all read it here).
REFLECTION_MIN_SCORE = 0.8


# Retrieval confidence says whether the corpus holds on-topic text; reflection and grading
# say whether the answer answers the question. Text written about the very subject of the
# question (same paragraph, same entities) that does not hold what it asks for scores high on
# retrieval, so once a judge has read the answer, its verdict leads the blend. The heuristic
# keeps retrieval's weight: where it stands in (no judge ran) the two count alike.
BLEND_WEIGHTS = {"retrieval": 0.15, "reflection": 0.50, "grade": 0.35, "heuristic": 0.15}


@dataclass(frozen=True)
class BlendTerm:
    """One signal of the blend: its value, its weight, and that weight's share of the signals that ran."""

    signal: str
    value: float
    weight: float  # BLEND_WEIGHTS[signal]
    share: float  # weight renormalized over the signals present: the shares sum to 1


def blend_terms(signals: Mapping[str, float]) -> tuple[BlendTerm, ...]:
    """The blended signals present in `signals`, in blend order; entries that are not blend
    inputs (the `heuristic_value` reference) are left out."""
    present = [name for name in BLEND_WEIGHTS if name in signals]
    total = sum(BLEND_WEIGHTS[name] for name in present)
    return tuple(BlendTerm(name, float(signals[name]), BLEND_WEIGHTS[name], BLEND_WEIGHTS[name] / total)
                 for name in present)


def blended_confidence(*, retrieval: float, reflection: float | None, grade: int | None,
                       heuristic: float | None = None) -> tuple[float, dict[str, float]]:
    """Weighted mean of the signals that exist (a disabled or failed one is left out and the
    rest renormalized, never replaced by a default). The heuristic stands in only when
    neither reflection nor grading ran (the minimal preset)."""
    signals: dict[str, float] = {"retrieval": retrieval}
    if reflection is not None:
        signals["reflection"] = reflection
    if grade is not None:
        signals["grade"] = (grade - 1) / 4
    if reflection is None and grade is None and heuristic is not None:
        signals["heuristic"] = heuristic
    terms = blend_terms(signals)
    # Weighted sum over the total weight, in blend order: services.scoring.tuning.rescore
    # vectorizes exactly this arithmetic, so its floats match the stored ones.
    value = sum(t.weight * t.value for t in terms) / sum(t.weight for t in terms)
    return float(value), signals
