"""Stop-RAG style adaptive retrieval (seed 001): keep only as many chunks as confidence needs.

The seed's rule: drop the candidates whose similarity is under a floor, then keep the shortest
best-first prefix whose accumulated confidence (0.6 x mean similarity + 0.4 x the share of the
question's entities the prefix mentions; the mean similarity alone when it names none)
reaches a threshold once `min_k` are kept, and never more than `max_k`. `adaptive_cut` applies
it to a hit list already retrieved, so the pipeline cuts its own hits instead of searching
twice; `retrieve_adaptive` is the seed's entry point, one dense search then the cut.

The seed tuned min_k, max_k and the threshold per task of a coding assistant. Here questions
are asked of a document corpus, and what they need depends on how they ask (STRATEGIES).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from services.domain import Hit
from services.errors import InputError
from services.retrieval.entities import extract_entities, mentions
from services.retrieval.search import default_params, search
from services.settings import Settings, get_settings

MIN_SIMILARITY_FLOOR = 0.2
DEFAULT_CONFIDENCE_THRESHOLD = 0.7
DEFAULT_MIN_K = 1
DEFAULT_MAX_K = 8
SIMILARITY_WEIGHT = 0.6
COVERAGE_WEIGHT = 0.4
STOP_REASONS = ("threshold", "max_k", "no_results")


@dataclass(frozen=True)
class AdaptiveStrategy:
    confidence_threshold: float = DEFAULT_CONFIDENCE_THRESHOLD
    min_k: int = DEFAULT_MIN_K
    max_k: int = DEFAULT_MAX_K
    similarity_floor: float = MIN_SIMILARITY_FLOOR

    def __post_init__(self) -> None:
        if not 1 <= self.min_k <= self.max_k:
            raise InputError(f"need 1 <= min_k <= max_k (got min_k={self.min_k}, max_k={self.max_k})")
        if not 0.0 <= self.confidence_threshold <= 1.0:
            raise InputError(f"confidence_threshold must be between 0 and 1, got {self.confidence_threshold}")


# By question kind, as the seed's table was by task. A lookup (one value, code or name) is
# answered by one chunk that names it: it may stop at the first and needs the most
# confidence to. A procedure or an explanation ("How do I...", "Why...") reads steps and
# causes across neighbouring chunks: at least two. A multi-part question ("What does X mean
# and how do I clear it?") needs a chunk per part, often from different documents: at least
# two, up to the full list, and it accepts less confidence, as no one chunk covers it all.
STRATEGIES: dict[str, AdaptiveStrategy] = {
    "lookup": AdaptiveStrategy(confidence_threshold=0.7, min_k=1, max_k=5),
    "procedure": AdaptiveStrategy(confidence_threshold=0.6, min_k=2, max_k=6),
    "multi_part": AdaptiveStrategy(confidence_threshold=0.5, min_k=2, max_k=8),
}

_ASKS = r"(?:how|what|when|where|which|who|why|can|could|does|do|did|is|are|was|were|has|have|should|must)"
# A second question joined to the first: "..., and what is the part number", "...? How do I...".
# A comma alone is not enough: "After 1945, what challenged the empire?" asks one thing.
_SECOND_QUESTION = re.compile(rf"(?:\band\s+(?:also\s+)?|;\s*|\?\s*){_ASKS}\b", re.IGNORECASE)
# Asking how something is done or why ("how many", "how long" ask for a value: lookups).
_PROCEDURE = re.compile(r"^\s*(?:how\s+(?:do|does|did|can|could|should|would|must|to|is|are)\b|why\b|"
                        r"what\s+causes\b|what\s+(?:should|must|do|can|could)\s+(?:i|we|you)\b|"
                        r"what\s+(?:has|have)\s+to\s+be\b)", re.IGNORECASE)


def question_kind(query: str) -> str:
    """"multi_part", "procedure" or "lookup": which of STRATEGIES fits the question."""
    if _SECOND_QUESTION.search(query.strip().rstrip("?")):
        return "multi_part"
    return "procedure" if _PROCEDURE.match(query) else "lookup"


@dataclass(frozen=True)
class AdaptiveCut:
    """The hits kept, why the cut stopped there, and the confidence it had reached."""

    hits: tuple[Hit, ...]
    stop_reason: str  # one of STOP_REASONS
    confidence: float
    kind: str = ""  # the question kind whose strategy cut, when one was chosen by kind
    below_floor: int = 0  # candidates dropped for similarity under the floor

    def to_dict(self) -> dict[str, Any]:
        return {"kept": len(self.hits), "stop_reason": self.stop_reason, "confidence": round(self.confidence, 4),
                "kind": self.kind, "below_floor": self.below_floor}


def accumulated_confidence(similarities: Sequence[float], texts: Sequence[str], query_entities: Sequence[str] | None) -> float:
    """0.6 x mean similarity + 0.4 x entity coverage; mean similarity alone without entities."""
    similarity_confidence = float(np.mean(similarities)) if len(similarities) else 0.0
    if not query_entities:
        return similarity_confidence
    found = sum(1 for e in query_entities if any(mentions(t, e) for t in texts))
    return SIMILARITY_WEIGHT * similarity_confidence + COVERAGE_WEIGHT * found / len(query_entities)


def adaptive_cut(hits: Sequence[Hit], strategy: AdaptiveStrategy, query_entities: Sequence[str] = (),
                 *, kind: str = "") -> AdaptiveCut:
    """The seed's stopping rule over `hits` in their ranked order.

    A hit the dense leg did not score (found by keywords alone) is kept past the floor, which
    is a cosine floor, and left out of the mean similarity, which it has no part in."""
    candidates = [h for h in hits if h.dense_similarity is None or h.dense_similarity >= strategy.similarity_floor]
    similarities: list[float] = []
    count, confidence, reason = 0, 0.0, "no_results"
    for count in range(1, len(candidates) + 1):
        similarity = candidates[count - 1].dense_similarity
        if similarity is not None:
            similarities.append(similarity)
        confidence = accumulated_confidence(similarities, [h.text for h in candidates[:count]], query_entities)
        if confidence >= strategy.confidence_threshold and count >= strategy.min_k:
            reason = "threshold"
            break
        if count >= strategy.max_k:
            reason = "max_k"
            break
    else:
        reason = "max_k" if candidates else "no_results"  # candidates ran out below the threshold
    return AdaptiveCut(tuple(candidates[:count]), reason, confidence, kind, len(hits) - len(candidates))


def cut_for_question(query: str, hits: Sequence[Hit], query_entities: Sequence[str] | None = None) -> AdaptiveCut:
    """`adaptive_cut` with the strategy of the question's kind; entities read from the query
    unless given (a RetrievalResult carries them as `query_entities`)."""
    kind = question_kind(query)
    entities = extract_entities(query) if query_entities is None else query_entities
    return adaptive_cut(hits, STRATEGIES[kind], entities, kind=kind)


@dataclass(frozen=True)
class AdaptiveResult:
    results: tuple[Hit, ...]
    chunks_retrieved: int
    confidence: float
    stop_reason: str  # "threshold", "max_k" or "no_results"


def retrieve_adaptive(
    query: str,
    min_k: int = DEFAULT_MIN_K,
    max_k: int = DEFAULT_MAX_K,
    confidence_threshold: float = DEFAULT_CONFIDENCE_THRESHOLD,
    query_entities: Sequence[str] | None = None,
    *,
    collection: str = "default",
    settings: Settings | None = None,
) -> AdaptiveResult:
    """Fetch max_k dense hits in one query and cut them as `adaptive_cut` does: best-first by
    similarity, those under the similarity floor dropped."""
    strategy = AdaptiveStrategy(confidence_threshold, min_k, max_k)  # checks min_k and max_k
    settings = settings or get_settings()
    result = search(query, default_params(settings, mode="dense", k=max_k, collection=collection), settings=settings)
    ranked = sorted(result.hits, key=lambda h: -(h.dense_similarity or 0.0))
    cut = adaptive_cut(ranked, strategy, query_entities or ())
    return AdaptiveResult(cut.hits, len(cut.hits), cut.confidence, cut.stop_reason)
