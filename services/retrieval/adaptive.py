"""Stop-RAG style adaptive retrieval: return only as many chunks as confidence needs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from services.domain import Hit
from services.errors import InputError
from services.retrieval.entities import mentions
from services.retrieval.search import default_params, search
from services.settings import Settings, get_settings

MIN_SIMILARITY_FLOOR = 0.2
DEFAULT_CONFIDENCE_THRESHOLD = 0.7
DEFAULT_MIN_K = 1
DEFAULT_MAX_K = 8
SIMILARITY_WEIGHT = 0.6
COVERAGE_WEIGHT = 0.4


@dataclass(frozen=True)
class RetrievalStrategy:
    confidence_threshold: float = DEFAULT_CONFIDENCE_THRESHOLD
    min_k: int = DEFAULT_MIN_K
    max_k: int = DEFAULT_MAX_K


# Per-task defaults (seed 001): complex tasks accept less confidence and need more context.
TASK_STRATEGIES = {
    "debugging": RetrievalStrategy(0.6, 2, 8),
    "code_review": RetrievalStrategy(0.7, 1, 5),
    "architecture": RetrievalStrategy(0.5, 2, 8),
    "explanation": RetrievalStrategy(0.8, 1, 4),
    "testing": RetrievalStrategy(0.7, 1, 5),
    "devops": RetrievalStrategy(0.6, 1, 6),
    "ml_engineering": RetrievalStrategy(0.6, 2, 8),
    "general": RetrievalStrategy(0.7, 1, 5),
}


@dataclass(frozen=True)
class AdaptiveResult:
    results: tuple[Hit, ...]
    chunks_retrieved: int
    confidence: float
    stop_reason: str  # "threshold", "max_k" or "no_results"


def accumulated_confidence(similarities: Sequence[float], texts: Sequence[str], query_entities: Sequence[str] | None) -> float:
    """0.6 x mean similarity + 0.4 x entity coverage; mean similarity alone without entities."""
    similarity_confidence = float(np.mean(similarities)) if len(similarities) else 0.0
    if not query_entities:
        return similarity_confidence
    found = sum(1 for e in query_entities if any(mentions(t, e) for t in texts))
    return SIMILARITY_WEIGHT * similarity_confidence + COVERAGE_WEIGHT * found / len(query_entities)


def adaptive_cutoff(
    similarities: Sequence[float],
    texts: Sequence[str],
    *,
    min_k: int,
    max_k: int,
    confidence_threshold: float,
    query_entities: Sequence[str] | None,
) -> tuple[int, float, str]:
    """How many of the (best-first) candidates to keep, the confidence there, and why it stopped."""
    if not similarities:
        return 0, 0.0, "no_results"
    confidence = 0.0
    for count in range(1, len(similarities) + 1):
        confidence = accumulated_confidence(similarities[:count], texts[:count], query_entities)
        if confidence >= confidence_threshold and count >= min_k:
            return count, confidence, "threshold"
        if count >= max_k:
            return count, confidence, "max_k"
    return len(similarities), confidence, "max_k"  # candidates ran out below the threshold


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
    """Fetch max_k dense hits in one query, drop those under the similarity floor, and keep
    the shortest best-first prefix whose accumulated confidence reaches the threshold."""
    if not 1 <= min_k <= max_k:
        raise InputError(f"need 1 <= min_k <= max_k (got min_k={min_k}, max_k={max_k})")
    settings = settings or get_settings()
    result = search(query, default_params(settings, mode="dense", k=max_k, collection=collection), settings=settings)
    candidates = sorted(
        (h for h in result.hits if (h.dense_similarity or 0.0) >= MIN_SIMILARITY_FLOOR),
        key=lambda h: -(h.dense_similarity or 0.0),
    )
    count, confidence, reason = adaptive_cutoff(
        [h.dense_similarity or 0.0 for h in candidates],
        [h.text for h in candidates],
        min_k=min_k, max_k=max_k, confidence_threshold=confidence_threshold, query_entities=query_entities,
    )
    return AdaptiveResult(tuple(candidates[:count]), count, confidence, reason)
