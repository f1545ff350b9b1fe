"""Frozen domain objects and the shared vocabulary (router actions, run statuses) that retrieval,
scoring, review, the pipeline, intake, pages and exports all speak."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from enum import StrEnum
from typing import Any

RETRIEVAL_MODES = ("bm25", "dense", "hybrid")


def plain(value: Any) -> Any:
    """`dataclasses.asdict` without its deep copy of every leaf: the same dicts, lists and tuples
    over the same (immutable) values. A run's iterations are converted for every run stored:
    for 256 short records at intake (bench/intake.py, cProfile) asdict took 0.51 s of the
    store's 1.39 s, this 0.20 s."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple, built from its fields
        return type(value)(*(plain(v) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(plain(v) for v in value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value

# The name of a context that names no document (+ its rank): intake gives it to such contexts,
# document trends leave these out.
ANONYMOUS_CONTEXT = "context "


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


class RunStatus(StrEnum):
    """Where a run stands: the pipeline sets the first two, reviews the other three."""

    AUTO_ACCEPTED = "auto_accepted"
    PENDING = "pending"
    APPROVED = "approved"
    FLAGGED = "flagged"
    CORRECTED = "corrected"


STATUSES = tuple(status.value for status in RunStatus)


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk with every score that produced its rank.

    A leg's score and rank are None only when the chunk did not appear in that leg.
    """

    chunk_id: int
    document_id: int
    external_id: str
    title: str
    text: str
    rank: int
    fused_score: float
    bm25_score: float | None = None
    bm25_rank: int | None = None
    dense_similarity: float | None = None
    dense_rank: int | None = None
    rerank_score: float | None = None
    # Fraction of the query's idf mass this chunk contains (BM25 leg only): an absolute,
    # bounded relevance signal that RRF, being rank-based, cannot give.
    matched_idf_share: float | None = None
    # Where the pipeline found it: "collection:<name>" for the asked collection or a fallback
    # collection (CRAG's corrective actions); None for hits stored before it was recorded.
    origin: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return plain(self)  # type: ignore[no-any-return]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Hit:
        values: dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__}
        return cls(**values)


@dataclass(frozen=True)
class RetrievalResult:
    """The ranked hits for one query, with how they were produced."""

    query: str
    mode: str
    hits: tuple[Hit, ...]
    reranker: str = "none"
    query_entities: tuple[str, ...] = ()
    depth: int = 0  # how many candidates each leg fetched before fusion
    latency_ms: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)
    # Each leg's best raw scores before fusion (search.LEG_SCORES of them, descending), for
    # query-performance prediction; empty for retrievals that did not come from our search.
    leg_scores: dict[str, tuple[float, ...]] = field(default_factory=dict)
    # The query's summed BM25 idf (unseen terms at the largest idf), a pre-retrieval
    # signal; None when no BM25 leg ran.
    query_idf: float | None = None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = plain(self)
        data["hits"] = list(data["hits"])
        return data


HIT_COLUMNS = ("rank", "document", "chunk", "fused", "bm25", "bm25 rank", "dense sim", "dense rank", "rerank", "text")


def hit_rows(hits: Sequence[Hit], *, text_chars: int = 300) -> list[dict[str, Any]]:
    """One table row per hit with every score behind its rank, keyed by HIT_COLUMNS."""
    return [
        {"rank": h.rank, "document": h.external_id, "chunk": h.chunk_id, "fused": h.fused_score,
         "bm25": h.bm25_score, "bm25 rank": h.bm25_rank, "dense sim": h.dense_similarity, "dense rank": h.dense_rank,
         "rerank": h.rerank_score, "text": h.text[:text_chars]}
        for h in hits
    ]
