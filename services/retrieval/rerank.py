"""Optional cross-encoder reranking; off, and saying so, when no model can be loaded."""

from __future__ import annotations

import dataclasses
import os
import threading
from functools import lru_cache
from typing import Any

from services.settings import Settings

NO_RERANKER = "none"
_LOCK = threading.Lock()


@dataclasses.dataclass(frozen=True)
class RerankerStatus:
    name: str  # model name, or "none"
    note: str  # what a person should know (why it is off)


@lru_cache(maxsize=4)
def _load(model_name: str) -> tuple[Any, str]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with _LOCK:
        try:
            from sentence_transformers import CrossEncoder

            return CrossEncoder(model_name, device="cpu"), ""
        except Exception as exc:  # any load failure means: run without a reranker
            return None, f"reranker '{model_name}' could not be loaded ({type(exc).__name__}); reranking is off"


def reranker_status(settings: Settings) -> RerankerStatus:
    if not settings.reranker_model:
        return RerankerStatus(NO_RERANKER, "no reranker configured (set RERANKER_MODEL to a local cross-encoder)")
    model, note = _load(settings.reranker_model)
    return RerankerStatus(settings.reranker_model if model is not None else NO_RERANKER, note or "cross-encoder reranking on")


def rerank_hits(query: str, hits: tuple, *, settings: Settings) -> tuple[tuple, str]:  # type: ignore[type-arg]
    """Re-order hits by cross-encoder score when a reranker is loaded; else unchanged."""
    if not settings.reranker_model or not hits:
        return hits, NO_RERANKER
    model, _ = _load(settings.reranker_model)
    if model is None:
        return hits, NO_RERANKER
    scores = model.predict([(query, h.text) for h in hits])
    scored = sorted(zip(hits, scores), key=lambda pair: (-float(pair[1]), pair[0].rank))
    return tuple(
        dataclasses.replace(h, rerank_score=float(s), rank=i + 1) for i, (h, s) in enumerate(scored)
    ), settings.reranker_model
