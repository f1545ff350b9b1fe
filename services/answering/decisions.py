"""Adaptive refinement (seed 000): heuristic and blended confidence, and the decision router."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from services.domain import Hit
from services.retrieval.text import tokenize

# Seed 004: a reflection score at or above this approves an answer (the router, auto-accept,
# the offline judge's needs_regeneration, the tuning page and the run charts all read it here).
REFLECTION_MIN_SCORE = 0.8


class RouterAction(StrEnum):
    """What the router decides at the end of an iteration; the values are what runs store."""

    COMPLETE = "COMPLETE"
    REFINE_QUERY = "REFINE_QUERY"
    # Seed 000 calls it WEB_FALLBACK; here it searches another collection (a FallbackSource).
    FALLBACK_SEARCH = "FALLBACK_SEARCH"
    DECOMPOSE = "DECOMPOSE"
    ACCEPT_BEST = "ACCEPT_BEST"


DECISIONS = tuple(action.value for action in RouterAction)
FINAL_ACTIONS = (RouterAction.COMPLETE, RouterAction.ACCEPT_BEST)  # the loop stops after these


@dataclass(frozen=True)
class RouterThresholds:
    complete: float = 0.7  # seed: confidence >= 0.7 -> COMPLETE
    refine: float = 0.4  # 0.4-0.7 -> REFINE_QUERY; below -> fallback / decompose
    min_sources: int = 3  # fewer hits than this with low confidence -> look elsewhere


@dataclass(frozen=True)
class RouterState:
    """What the router sees at the end of an iteration."""

    confidence: float
    source_count: int
    query_complexity: str  # "simple" | "complex"
    iteration: int  # 1-based
    max_iterations: int
    reflection_approved: bool | None  # None when reflection is off or failed
    has_gaps: bool
    fallback_available: bool
    fallback_used: bool = False
    decomposed: bool = False


@dataclass(frozen=True)
class Decision:
    action: RouterAction
    reason: str


def decide(state: RouterState, thresholds: RouterThresholds = RouterThresholds()) -> Decision:
    """Route one iteration. The hard cap ends in ACCEPT_BEST, never in an exception."""
    approved = state.reflection_approved is not False
    if state.confidence >= thresholds.complete and approved:
        return Decision(RouterAction.COMPLETE, f"confidence {state.confidence:.2f} >= {thresholds.complete}"
                                               + (" and reflection approved" if state.reflection_approved else ""))
    if state.iteration >= state.max_iterations:
        return Decision(RouterAction.ACCEPT_BEST, f"iteration cap {state.max_iterations} reached; keeping the best iteration")
    if state.source_count == 0 and not state.fallback_available:
        return Decision(RouterAction.ACCEPT_BEST, "insufficient data: nothing retrieved and no fallback source")
    if state.confidence >= thresholds.refine:
        if not state.has_gaps and state.reflection_approved is not False:
            return Decision(RouterAction.ACCEPT_BEST, "no gaps identified; accepting the current answer")
        return Decision(RouterAction.REFINE_QUERY, f"confidence {state.confidence:.2f} in [{thresholds.refine}, "
                                                   f"{thresholds.complete}); refining the query for the gaps")
    if state.source_count < thresholds.min_sources and state.fallback_available and not state.fallback_used:
        return Decision(RouterAction.FALLBACK_SEARCH, f"confidence {state.confidence:.2f} with only {state.source_count} sources")
    if state.query_complexity == "complex" and state.iteration < 2 and not state.decomposed:
        return Decision(RouterAction.DECOMPOSE, "complex question with low confidence; answering its parts")
    note = "" if state.fallback_available else " (fallback unavailable)"
    return Decision(RouterAction.REFINE_QUERY, f"confidence {state.confidence:.2f} < {thresholds.refine}{note}")


def query_complexity(query: str, sub_queries: Sequence[str]) -> str:
    """Complex when it decomposes into parts or is long."""
    return "complex" if len(sub_queries) > 1 or len(tokenize(query)) > 12 else "simple"


def heuristic_confidence(hits: Sequence[Hit], answer: str, query: str, *, max_sources: int = 10,
                         expected_length: int = 600) -> float:
    """Seed 000's baseline, for a local corpus: source coverage (0.30), document diversity
    (0.25, replacing web-domain trust), answer depth (0.25), query-term coverage (0.20)."""
    source_score = min(len(hits) / max_sources, 1.0) * 0.30
    documents = len({h.document_id for h in hits})
    diversity_score = (min(documents, 3) / 3) * 0.25 if hits else 0.0
    depth_score = min(len(answer) / expected_length, 1.5) / 1.5 * 0.25
    terms = set(tokenize(query))
    answered = set(tokenize(answer))
    coverage_score = (len(terms & answered) / len(terms) if terms else 0.0) * 0.20
    return source_score + diversity_score + depth_score + coverage_score


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
