"""Chunks already in the corpus, scored against a query exactly as the search scores them.

Seed 003's "assess confidence for given chunks": the chunk ids usually come from a search,
so each chunk gets what the search would have given it: each leg's score and rank over the
collection (a leg gives neither to a chunk beyond its depth: it would not have retrieved
it), the fused score, the reranker's score when one is configured, and the search's order.
The confidence breakdown of those hits is then the search's breakdown, to the last bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from services.corpus.indexing import find_collection
from services.domain import RetrievalResult
from services.errors import InputError
from services.retrieval import embedding
from services.retrieval.entities import extract_entities
from services.retrieval.rerank import rerank_hits

# The search's own statements, up to and including its `fused` CTE, and its row-to-Hit
# mapping: writing the legs a second time is how two numbers for one chunk would start to differ.
from services.retrieval.search import SearchParams, clean_query, hit_from_row, widen_hnsw
from services.retrieval.search_sql import HIT_COLUMNS, SQL_BY_MODE
from services.retrieval.text import tokenize
from services.settings import Settings

MAX_CHUNKS = 1000

# Every given chunk of the collection, in the search's order (fused score, then id); a
# chunk neither leg reached sorts last with a fused score of 0.
_GIVEN_CHUNKS = """
SELECT c.id AS chunk_id, c.document_id, c.text, d.external_id, d.title, CAST(c.embedding AS real[]) AS embedding,
       f.bm25_score, f.bm25_rank, f.idf_share, f.dense_similarity, f.dense_rank, coalesce(f.fused, 0.0::float8) AS fused
FROM chunks c JOIN documents d ON d.id = c.document_id LEFT JOIN fused f ON f.chunk_id = c.id
WHERE c.id = ANY(:chunk_ids) AND c.collection_id = CAST(:cid AS integer)
ORDER BY f.fused DESC NULLS LAST, c.id
"""
if not all(sql.endswith(HIT_COLUMNS) for sql in SQL_BY_MODE.values()):
    raise RuntimeError("services.retrieval.search's statements no longer end in HIT_COLUMNS; update _SQL here")
_SQL = {mode: text(sql.removesuffix(HIT_COLUMNS) + _GIVEN_CHUNKS) for mode, sql in SQL_BY_MODE.items()}


@dataclass(frozen=True)
class ScoredChunks:
    result: RetrievalResult
    vectors: np.ndarray  # the hits' stored embeddings, in hit order (CRAG's agreement signal)


def score_chunks(query: str, chunk_ids: Sequence[int], params: SearchParams, *, session: Session,
                 settings: Settings) -> ScoredChunks:
    """The chunks `chunk_ids` of `params.collection` as the search would return them for
    `query` (mode, depth, k1, b, RRF k and leg weights from `params`; its k is ignored)."""
    ids = list(dict.fromkeys(chunk_ids))
    if not ids:
        raise InputError("give at least one chunk id")
    if len(ids) > MAX_CHUNKS:
        raise InputError(f"assess at most {MAX_CHUNKS} chunks at a time (got {len(ids)})")
    if params.mode not in _SQL:
        raise InputError(f"unknown retrieval mode '{params.mode}' (choose one of {', '.join(_SQL)})")
    query = clean_query(query, max_chars=settings.max_query_chars)
    values: dict[str, object] = {
        "cid": find_collection(session, params.collection), "chunk_ids": [i for i in ids if 0 < i < 2**63], "depth": params.leg_depth,
        "k1": float(params.k1), "b": float(params.b), "rrf_k": float(params.rrf_k),
        "w_bm25": float(params.bm25_weight), "w_dense": float(params.dense_weight), "terms": tokenize(query),
    }
    if params.mode != "bm25":
        values["embedding"] = embedding.encode(settings.embedding_model, [query])[0]
    widen_hnsw(session.connection(), params.mode, values)  # as the search widens HNSW's candidate list
    rows = session.execute(_SQL[params.mode], values).mappings().all()
    missing = sorted(set(ids) - {row["chunk_id"] for row in rows})
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        raise InputError(f"no chunk {shown} in collection {params.collection!r}")
    hits, reranker = rerank_hits(query, tuple(hit_from_row(i + 1, row) for i, row in enumerate(rows)), settings=settings)
    by_id = {row["chunk_id"]: np.asarray(row["embedding"], dtype=np.float32) for row in rows}
    result = RetrievalResult(
        query=query, mode=params.mode, hits=hits, reranker=reranker, query_entities=extract_entities(query),
        depth=params.leg_depth,
        params={"k1": params.k1, "b": params.b, "rrf_k": params.rrf_k, "bm25_weight": params.bm25_weight,
                "dense_weight": params.dense_weight, "collection": params.collection, "chunk_ids": ids})
    return ScoredChunks(result, np.array([by_id[h.chunk_id] for h in hits]))
