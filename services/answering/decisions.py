"""Adaptive refinement (seed 000): the decision router and the heuristic confidence (the blend is services.scoring.blend)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.domain import Hit, RouterAction
from services.retrieval.text import tokenize


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
    # Seed 004: the reflection asks for another try with better retrieval. It withholds
    # COMPLETE and acceptance as a failed reflection does; the cap still ends the loop.
    needs_regeneration: bool = False


@dataclass(frozen=True)
class Decision:
    action: RouterAction
    reason: str


def decide(state: RouterState, thresholds: RouterThresholds = RouterThresholds()) -> Decision:
    """Route one iteration. The hard cap ends in ACCEPT_BEST, never in an exception."""
    approved = state.reflection_approved is not False and not state.needs_regeneration
    if state.confidence >= thresholds.complete and approved:
        return Decision(RouterAction.COMPLETE, f"confidence {state.confidence:.2f} >= {thresholds.complete}"
                                               + (" and reflection approved" if state.reflection_approved else ""))
    if state.iteration >= state.max_iterations:
        return Decision(RouterAction.ACCEPT_BEST, f"iteration cap {state.max_iterations} reached; keeping the best iteration")
    if state.source_count == 0 and not state.fallback_available:
        return Decision(RouterAction.ACCEPT_BEST, "insufficient data: nothing retrieved and no fallback source")
    if state.confidence >= thresholds.refine:
        if not state.has_gaps and approved:
            return Decision(RouterAction.ACCEPT_BEST, "no gaps identified; accepting the current answer")
        if state.needs_regeneration:
            return Decision(RouterAction.REFINE_QUERY, f"confidence {state.confidence:.2f}; the reflection asks "
                                                       "for regeneration from better retrieval")
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
