"""BM25, dense and hybrid (weighted RRF) retrieval, each one SQL statement (services/retrieval/search_sql.py)."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, RowMapping, TextClause, text
from sqlalchemy.orm import Session

from db.engine import DEFAULT_EF_SEARCH
from services.domain import RETRIEVAL_MODES, Hit, RetrievalResult
from services.errors import InputError
from services.retrieval import embedding
from services.retrieval.entities import extract_entities
from services.retrieval.rerank import rerank_hits
from services.retrieval.search_sql import DENSE_LEG_STATEMENT, GIVEN_LEG_STATEMENTS, SLICE_STATEMENT, STATEMENTS
from services.retrieval.text import tokenize
from services.settings import Settings, get_settings
from services.store import export_snapshot, fetch_rows, in_snapshot, read_transaction

# Control characters, and unpaired surrogates (undecodable bytes in a command-line argument),
# which the embedding tokenizer and the store both refuse.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


@dataclass(frozen=True)
class SearchParams:
    """Knobs of one search; defaults come from settings."""

    mode: str = "hybrid"
    k: int = 10
    depth: int | None = None  # candidates per leg before fusion; default max(k, 50)
    k1: float = 1.2
    b: float = 0.75
    rrf_k: int = 60
    bm25_weight: float = 1.0
    dense_weight: float = 1.0
    collection: str = "default"

    @property
    def leg_depth(self) -> int:
        return self.depth or max(self.k, 50)


def clean_query(query: str, *, max_chars: int) -> str:
    """The query as searched, or an InputError saying what is wrong with it."""
    if not isinstance(query, str):
        raise InputError("the query must be text")
    cleaned = _CONTROL.sub(" ", query).strip()
    if not cleaned:
        raise InputError("the query is empty; type a question")
    if len(cleaned) > max_chars:
        raise InputError(
            f"the query is {len(cleaned):,} characters long; the limit is {max_chars:,}. "
            "Shorten it to the question itself"
        )
    return cleaned


def default_params(settings: Settings | None = None, **overrides: object) -> SearchParams:
    settings = settings or get_settings()
    base: dict[str, Any] = {"k1": settings.bm25_k1, "b": settings.bm25_b, "rrf_k": settings.rrf_k}
    base.update(overrides)
    return SearchParams(**base)  # type: ignore[arg-type]


def search(query: str, params: SearchParams | None = None, *, settings: Settings | None = None) -> RetrievalResult:
    """Run one search in its own read-only transaction (on the read replica when there is one)."""
    settings = settings or get_settings()
    params = params or default_params(settings)
    with read_transaction(settings) as session:
        return search_in_session(query, params, session=session, settings=settings)


def search_in_session(
    query: str, params: SearchParams, *, session: Session, settings: Settings, query_vector=None  # type: ignore[no-untyped-def]
) -> RetrievalResult:
    if params.mode not in RETRIEVAL_MODES:
        raise InputError(f"unknown retrieval mode '{params.mode}' (choose one of {', '.join(RETRIEVAL_MODES)})")
    if not 1 <= params.k <= 1000 or not params.k <= params.leg_depth <= 1000:
        raise InputError("k must be between 1 and 1000 and no larger than the search depth")
    if params.k1 < 0 or not 0 <= params.b <= 1:
        raise InputError(f"BM25 needs k1 >= 0 and b between 0 and 1 (got k1={params.k1}, b={params.b})")
    query = clean_query(query, max_chars=settings.max_query_chars)
    started = time.perf_counter()
    values = statement_values(query, params, session=session, settings=settings, query_vector=query_vector)
    # No such collection: nothing to find (the CLI and pages name the collections there are).
    rows = [] if values["cid"] is None else _rows(params.mode, values, session, settings)
    hits = tuple(hit_from_row(i + 1, row) for i, row in enumerate(rows))
    hits, reranker = rerank_hits(query, hits, settings=settings)
    return RetrievalResult(
        query=query,
        mode=params.mode,
        hits=hits,
        reranker=reranker,
        query_entities=extract_entities(query),
        depth=params.leg_depth,
        latency_ms=(time.perf_counter() - started) * 1000,
        leg_scores=leg_scores(rows[0]) if rows else {},
        query_idf=_opt_float(rows[0]["query_idf"]) if rows else None,
        params={"k": params.k, "k1": params.k1, "b": params.b, "rrf_k": params.rrf_k,
                "bm25_weight": params.bm25_weight, "dense_weight": params.dense_weight,
                "collection": params.collection},
    )


def statement_values(
    query: str, params: SearchParams, *, session: Session, settings: Settings, query_vector=None  # type: ignore[no-untyped-def]
) -> dict[str, object]:
    """The values SQL_BY_MODE[params.mode] is run with for a cleaned query (EXPLAIN uses them too)."""
    found = fetch_rows(session, _COLLECTION, {"name": params.collection})
    collection = found[0] if found else None
    values: dict[str, object] = {
        "cid": collection["id"] if collection else None,
        "n_chunks": collection["n_chunks"] if collection else 0,  # for choosing a plan, not bound in it
        "plan_mode": collection["plan_mode"] if collection else None,  # the caller's, set back by the statement
        "k": params.k,
        "depth": params.leg_depth,
        "k1": float(params.k1),
        "b": float(params.b),
        "rrf_k": float(params.rrf_k),
        "w_bm25": float(params.bm25_weight),
        "w_dense": float(params.dense_weight),
        "terms": tokenize(query),
    }
    if params.mode != "bm25":
        values["embedding"] = embedding.encode(settings.embedding_model, [query])[0] if query_vector is None else query_vector
    return values


def _rows(mode: str, values: dict[str, object], session: Session, settings: Settings) -> Sequence[Mapping[Any, Any]]:
    ranges = _slice_ranges(values, session, settings) if mode != "dense" else []
    snapshot = export_snapshot(session) if ranges else None
    if snapshot is None:
        widen_hnsw(session.connection(), mode, values)
        if int(values["n_chunks"]) <= GENERIC_PLAN_MAX_CHUNKS:  # type: ignore[call-overload]
            fetch_rows(session, _GENERIC_PLAN, {})
        return fetch_rows(session, STATEMENTS[mode], values)  # which sets the caller's plan mode back
    return _sliced_rows(mode, values, session.get_bind(), snapshot, ranges)  # type: ignore[arg-type]


# The statement is planned once per connection, not per search. psycopg prepares a statement
# run five times on a connection; PostgreSQL still planned it anew for each search's values
# (custom plans, 1.5 ms of the BM25 leg's ~10 ms of CPU at 100k chunks). The plan's shape does
# not depend on them (CTE fences, OFFSET 0, the collection's partition pruned at run time).
# Measured at 100k chunks (bench store, 220 SQuAD questions, alternating, load 5.7):
# search_in_session in BM25 mode 9.9-10.1 -> 8.4-8.5 ms of CPU (client + server) a query,
# every hit and score the same. Larger collections keep custom plans until measured there.
GENERIC_PLAN_MAX_CHUNKS = 100_000
_GENERIC_PLAN = text("SELECT set_config('plan_cache_mode', 'force_generic_plan', true)")


def widen_hnsw(conn: Connection, mode: str, values: dict[str, object]) -> None:
    """HNSW returns at most ef_search rows: widen it for a dense leg deeper than that."""
    if mode != "bm25" and int(values["depth"]) > DEFAULT_EF_SEARCH:  # type: ignore[call-overload]
        conn.execute(text("SELECT set_config('hnsw.ef_search', :ef, true)"), {"ef": str(values["depth"])})


def _slice_ranges(values: dict[str, object], session: Session, settings: Settings) -> list[tuple[int, int]]:
    """The chunk id ranges a search is split into: none below the collection size that pays
    for the extra connections (settings.search_slice_min_chunks)."""
    n_chunks = int(values["n_chunks"])  # type: ignore[call-overload]
    if settings.search_slices < 2 or n_chunks < max(settings.search_slice_min_chunks, settings.search_slices):
        return []
    lo, hi = session.execute(_COLLECTION_EXTENT, {"cid": values["cid"]}).one()
    bounds = [lo + (hi - lo + 1) * i // settings.search_slices for i in range(settings.search_slices + 1)]
    return [(lo, hi - 1) for lo, hi in zip(bounds, bounds[1:])]


def _sliced_rows(mode: str, values: dict[str, object], engine: Engine, snapshot: str,
                 ranges: list[tuple[int, int]]) -> list[RowMapping]:
    """A search's rows from its BM25 leg run per chunk id range and its dense leg, all at
    once, each on a connection of its own in the caller's snapshot. Every range's top `depth`
    is exact, so the best `depth` of their union is the collection's exact top `depth`."""
    def read(statement: TextClause, extra: dict[str, object]) -> list[RowMapping]:
        def work(conn: Connection) -> list[RowMapping]:
            if statement is DENSE_LEG_STATEMENT:
                widen_hnsw(conn, mode, values)
            return list(conn.execute(statement, {**values, **extra}).mappings())
        return in_snapshot(engine, snapshot, work)

    slices = [_SLICE_WORKERS.submit(read, SLICE_STATEMENT, {"lo": lo, "hi": hi}) for lo, hi in ranges]
    dense = [_SLICE_WORKERS.submit(read, DENSE_LEG_STATEMENT, {})] if mode == "hybrid" else []
    wait(slices + dense)  # every connection is back before an error is raised
    found = sorted((row for job in slices for row in job.result()), key=lambda row: (-row["score"], row["chunk_id"]))
    bm25 = found[:int(values["depth"])]  # type: ignore[call-overload]
    given: dict[str, object] = {"bm25_ids": [row["chunk_id"] for row in bm25], "bm25_scores": [row["score"] for row in bm25]}
    for job in dense:
        nearest = job.result()
        given |= {"dense_ids": [row["chunk_id"] for row in nearest], "dense_sims": [row["sim"] for row in nearest]}
    return read(GIVEN_LEG_STATEMENTS[mode], given)


def hit_from_row(rank: int, row) -> Hit:  # type: ignore[no-untyped-def]
    return Hit(
        chunk_id=row["chunk_id"],
        document_id=row["document_id"],
        external_id=row["external_id"],
        title=row["title"],
        text=row["text"],
        rank=rank,
        fused_score=float(row["fused"]),
        bm25_score=_opt_float(row["bm25_score"]),
        bm25_rank=row["bm25_rank"],
        dense_similarity=_opt_float(row["dense_similarity"]),
        dense_rank=row["dense_rank"],
        matched_idf_share=_opt_float(row["idf_share"]),
    )


def leg_scores(row) -> dict[str, tuple[float, ...]]:  # type: ignore[no-untyped-def]
    """Each leg's best raw scores, descending, from any row of a search (every row has them)."""
    return {leg: tuple(float(s) for s in row[f"{leg}_leg"]) for leg in ("bm25", "dense") if row[f"{leg}_leg"]}


def _opt_float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


_COLLECTION = text("""
SELECT c.id, coalesce(s.n_chunks, 0) AS n_chunks, current_setting('plan_cache_mode') AS plan_mode
FROM collections c LEFT JOIN bm25_stats s ON s.collection_id = c.id WHERE c.name = :name""")
_COLLECTION_EXTENT = text("""
SELECT (SELECT min(id) FROM chunks WHERE collection_id = :cid) AS lo,
       (SELECT max(id) FROM chunks WHERE collection_id = :cid) AS hi""")
# Threads only wait on the server; 16 covers the largest search_slices plus the dense leg.
_SLICE_WORKERS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="search-slice")
