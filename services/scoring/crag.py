"""CRAG retrieval evaluator (seed 002): three-class verdict, knowledge strips, fallback sources."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import numpy as np

from services.corpus.chunking import split_sentences
from services.domain import Hit, RetrievalResult
from services.retrieval.entities import extract_entities, mentions
from services.retrieval.text import tokenize
from services.scoring.confidence import hit_relevance


class RetrievalVerdict(StrEnum):
    """CRAG's three classes; the values are what runs store."""

    CORRECT = "CORRECT"
    AMBIGUOUS = "AMBIGUOUS"
    INCORRECT = "INCORRECT"


SIGNAL_WEIGHTS = {"top_score": 0.4, "keyword_coverage": 0.3, "document_agreement": 0.3}
AGREEMENT_FLOOR, AGREEMENT_CEIL = 0.2, 0.8  # MiniLM cosine between chunks on one topic
ACTIONS = {RetrievalVerdict.CORRECT: "refine_and_use", RetrievalVerdict.AMBIGUOUS: "combine_with_fallback",
           RetrievalVerdict.INCORRECT: "use_fallback"}
REASONS = {
    RetrievalVerdict.CORRECT: "High-quality retrieval: the documents are relevant",
    RetrievalVerdict.AMBIGUOUS: "Uncertain retrieval quality: refine the documents and look for more",
    RetrievalVerdict.INCORRECT: "Low-quality retrieval: the documents do not answer the question",
}


@dataclass(frozen=True)
class CragConfig:
    correct_threshold: float = 0.7
    incorrect_threshold: float = 0.3
    strip_threshold: float = 0.5
    token_budget: int = 4096


@dataclass(frozen=True)
class KnowledgeStrip:
    chunk_id: int
    text: str
    relevance: float


@dataclass(frozen=True)
class CragVerdict:
    verdict: RetrievalVerdict
    score: float
    confidence: float
    signals: dict[str, float]
    reasoning: str
    action: str
    strips: tuple[KnowledgeStrip, ...] = ()
    action_outcome: str = ""  # what the corrective action did (e.g. "fallback unavailable")
    kept_chunk_ids: tuple[int, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class FallbackSource(Protocol):
    """Where CRAG looks when the corpus does not answer (a web search, another collection)."""

    @property
    def name(self) -> str: ...

    def search(self, query: str, k: int) -> RetrievalResult: ...


def evaluate_retrieval(
    query: str,
    hits: Sequence[Hit],
    *,
    chunk_vectors: np.ndarray | None = None,
    config: CragConfig = CragConfig(),
) -> CragVerdict:
    """Classify the retrieval from three signals weighted 0.4 / 0.3 / 0.3.

    top_score: mean absolute relevance of the top three hits (sigmoid of the rerank score
    when a reranker ran, else dense similarity and keyword evidence; RRF values are ranks,
    not relevance). keyword_coverage: share of the query's terms and entities found in the
    retrieved text. document_agreement: mean pairwise cosine of the top three chunks'
    embeddings, mapped from [0.2, 0.8]; documents on one topic agree, scattered ones do not.
    """
    if not hits:
        signals = {name: 0.0 for name in SIGNAL_WEIGHTS}
    else:
        signals = {
            "top_score": float(np.mean([hit_relevance(h) for h in hits[:3]])),
            "keyword_coverage": keyword_coverage(query, " ".join(h.title + "\n" + h.text for h in hits)),
            "document_agreement": _agreement(chunk_vectors),
        }
    score = sum(SIGNAL_WEIGHTS[name] * value for name, value in signals.items())
    if score >= config.correct_threshold:
        verdict, confidence = RetrievalVerdict.CORRECT, score
    elif score <= config.incorrect_threshold:
        verdict, confidence = RetrievalVerdict.INCORRECT, 1.0 - score
    else:
        verdict, confidence = RetrievalVerdict.AMBIGUOUS, score
    weakest = min(signals, key=lambda name: signals[name])
    reasoning = f"{REASONS[verdict]} (score {score:.2f}; weakest signal: {weakest.replace('_', ' ')} {signals[weakest]:.2f})"
    strips = decompose_then_recompose(query, hits, config=config) if hits else ()
    kept = tuple(dict.fromkeys(s.chunk_id for s in strips))
    return CragVerdict(verdict, float(score), float(confidence), signals, reasoning, ACTIONS[verdict], strips,
                       kept_chunk_ids=kept)


def keyword_coverage(query: str, text: str) -> float:
    """Share of the query's terms (stemmed, stop words dropped) and entities present in text."""
    terms = set(tokenize(query))
    entities = extract_entities(query)
    if not terms and not entities:
        return 0.0
    present = set(tokenize(text))
    found = len(terms & present) + sum(1 for e in entities if mentions(text, e))
    return found / (len(terms) + len(entities))


def decompose_then_recompose(query: str, hits: Sequence[Hit], *, config: CragConfig = CragConfig()) -> tuple[KnowledgeStrip, ...]:
    """Split hits into sentence strips, keep those relevant to the query, best first, under
    the token budget (tokens estimated as words x 1.3, as in the design note)."""
    strips = [
        KnowledgeStrip(hit.chunk_id, sentence, keyword_coverage(query, sentence))
        for hit in hits
        for sentence in split_sentences(hit.text)
    ]
    relevant = sorted((s for s in strips if s.relevance > config.strip_threshold), key=lambda s: -s.relevance)
    kept, used = [], 0.0
    for strip in relevant:
        cost = len(strip.text.split()) * 1.3
        if used + cost <= config.token_budget:
            kept.append(strip)
            used += cost
    return tuple(kept)


def _agreement(vectors: np.ndarray | None) -> float:
    if vectors is None or len(vectors) < 2:
        return 0.5  # a single document cannot disagree with itself; no evidence either way
    top = np.asarray(vectors[:3], dtype=np.float64)
    top /= np.linalg.norm(top, axis=1, keepdims=True)
    sims = top @ top.T
    pairwise = sims[np.triu_indices(len(top), k=1)]
    return float(np.clip((pairwise.mean() - AGREEMENT_FLOOR) / (AGREEMENT_CEIL - AGREEMENT_FLOOR), 0.0, 1.0))
