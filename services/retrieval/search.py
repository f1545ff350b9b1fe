"""BM25, dense and hybrid (weighted RRF) retrieval, each one SQL statement."""

from __future__ import annotations

import re
import time
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
from services.retrieval.text import tokenize
from services.settings import Settings, get_settings
from services.store import export_snapshot, in_snapshot, read_transaction

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
    collection = session.execute(_COLLECTION, {"name": params.collection}).one_or_none()
    values: dict[str, object] = {
        "cid": collection.id if collection else None,
        "n_chunks": collection.n_chunks if collection else 0,  # for choosing a plan, not bound in it
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


def _rows(mode: str, values: dict[str, object], session: Session, settings: Settings) -> list[RowMapping]:
    ranges = _slice_ranges(values, session, settings) if mode != "dense" else []
    snapshot = export_snapshot(session) if ranges else None
    if snapshot is None:
        widen_hnsw(session.connection(), mode, values)
        if int(values["n_chunks"]) > GENERIC_PLAN_MAX_CHUNKS:  # type: ignore[call-overload]
            return list(session.execute(_STATEMENTS[mode], values).mappings())
        previous = session.execute(_GENERIC_PLAN).scalar_one()
        rows = list(session.execute(_STATEMENTS[mode], values).mappings())
        session.execute(_PLAN_AS_BEFORE, {"previous": previous})  # the caller's later statements as they were
        return rows
    return _sliced_rows(mode, values, session.get_bind(), snapshot, ranges)  # type: ignore[arg-type]


# The statement is planned once per connection, not per search. psycopg prepares a statement
# run five times on a connection; PostgreSQL still planned it anew for each search's values
# (custom plans, 1.5 ms of the BM25 leg's ~10 ms of CPU at 100k chunks). The plan's shape does
# not depend on them (CTE fences, OFFSET 0, the collection's partition pruned at run time).
# Measured at 100k chunks (bench store, 220 SQuAD questions, alternating, load 5.7):
# search_in_session in BM25 mode 9.9-10.1 -> 8.4-8.5 ms of CPU (client + server) a query,
# every hit and score the same. Larger collections keep custom plans until measured there.
GENERIC_PLAN_MAX_CHUNKS = 100_000
_GENERIC_PLAN = text("SELECT current_setting('plan_cache_mode'), set_config('plan_cache_mode', 'force_generic_plan', true)")
_PLAN_AS_BEFORE = text("SELECT set_config('plan_cache_mode', :previous, true)")


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
            if statement is _DENSE_STATEMENT:
                widen_hnsw(conn, mode, values)
            return list(conn.execute(statement, {**values, **extra}).mappings())
        return in_snapshot(engine, snapshot, work)

    slices = [_SLICE_WORKERS.submit(read, _SLICE_STATEMENT, {"lo": lo, "hi": hi}) for lo, hi in ranges]
    dense = [_SLICE_WORKERS.submit(read, _DENSE_STATEMENT, {})] if mode == "hybrid" else []
    wait(slices + dense)  # every connection is back before an error is raised
    found = sorted((row for job in slices for row in job.result()), key=lambda row: (-row["score"], row["chunk_id"]))
    bm25 = found[:int(values["depth"])]  # type: ignore[call-overload]
    given: dict[str, object] = {"bm25_ids": [row["chunk_id"] for row in bm25], "bm25_scores": [row["score"] for row in bm25]}
    for job in dense:
        nearest = job.result()
        given |= {"dense_ids": [row["chunk_id"] for row in nearest], "dense_sims": [row["sim"] for row in nearest]}
    return read(_GIVEN_LEGS[mode], given)


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


# --- SQL -------------------------------------------------------------------------------
# Lucene BM25: idf = ln(1 + (N - df + 0.5) / (df + 0.5)); a query term repeated counts
# repeatedly (as rank-bm25 does). Query terms unseen in the corpus keep a maximal idf in
# the denominator of idf_share, so a query about something the corpus lacks scores low.
# Float constants are float8: numeric arithmetic measured 6x slower.
#
# The exact top `depth` by MaxScore (Turtle & Flood, 1995), as Lucene does it. Summing every
# posting of every query term is what costs; instead:
# 1. each term's upper bound `ub` comes from its largest tf and shortest chunk (bm25_terms);
# 2. theta, a lower bound of the depth-th best score: the depth-th best full score among
#    the 2 * depth chunks the strongest term scores highest (any depth chunks do);
# 3. the weakest terms whose bounds sum below theta are optional: a chunk holding only them
#    cannot reach the top, so only the other terms' postings are summed (`candidates`),
#    keeping the chunks whose partial score plus every optional bound reaches theta;
# 4. `survivors` raise that bar to the depth-th best partial score where it is higher;
# 5. the survivors get the strongest optional term added by index lookups; the bar is raised
#    again and the chunks that can no longer reach it are dropped before the lookups of the
#    other optional terms.
# Scores are the same sums as the plain formula (tests hold them to rank-bm25 within 1e-9);
# the 1e-9 slack keeps a chunk tied with the depth-th score from being pruned by rounding.
#
# What a million chunks taught (bench/retrieval.py):
# - Each term to sum is its own index scan in chunk id order, merged (Merge Append) and added
#   up by a streaming group: a hash aggregate over the same postings measured twice as slow.
#   SCANNED_TERMS scans cover most queries' terms; a query with more sums the rest in one
#   extra sorted scan (8 scans and three lookup stages were as fast at a million chunks and
#   1-2 ms slower on small queries: each scan costs planning).
# - Parts are added up by grouping, not by joining: the planner cannot estimate the CTEs and
#   joined survivors to completions in a nested loop over every pair (13 s of a 13.5 s query).
# - OFFSET 0 keeps the planner from trading the (term_id, chunk_id) key lookups for a scan of
#   the chunk_id index: it underestimates the CTEs' row counts.
# The statement fragments below are public: scoring given chunks or texts (services/intake)
# reuses them so that a chunk gets the same numbers however it is reached.
BM25_IMPACT = "qt.weight * p.tf / (p.tf + stats.len_base + stats.len_slope * p.dl)"

# The collection is bound by id (`collection_id`, resolved first), not looked up by name
# inside the statement: chunks and postings are partitioned by collection, and only a value
# the planner sees lets it prune to the collection's partitions when it plans (a subquery's
# value prunes at run time, after every partition was planned).
CID = "CAST(:cid AS integer)"
COLLECTION_CTE = f"coll AS (SELECT {CID} AS id)"

SCANNED_TERMS = 4
_NO_SCORE = "0.0::float8"
_SLACK = "1e-9::float8"


def _scanned_terms(in_slice: str) -> str:
    """The postings of the terms to sum, in chunk id order: one index scan per term for the
    SCANNED_TERMS strongest, merged, then the rest sorted. A term's id is a scalar subquery so
    that the planner knows its scan comes in chunk id order (the merge needs that)."""
    scans = []
    for rank in range(1, SCANNED_TERMS + 1):
        weight, term = (f"(SELECT {column} FROM split WHERE scan_rank = {rank})" for column in ("weight", "term_id"))
        scans.append(f"""SELECT * FROM (
            SELECT p.chunk_id,
                   {weight} * p.tf / (p.tf + (SELECT len_base FROM stats) + (SELECT len_slope FROM stats) * p.dl) AS score
            FROM bm25_postings p WHERE p.term_id = {term} AND p.collection_id = {CID} {in_slice}
            ORDER BY p.chunk_id) scan_{rank}""")
    scans.append(f"""SELECT * FROM (
            SELECT p.chunk_id, {BM25_IMPACT} AS score
            FROM split qt JOIN bm25_postings p ON p.term_id = qt.term_id AND p.collection_id = {CID} CROSS JOIN stats
            WHERE qt.scan_rank > {SCANNED_TERMS} {in_slice} ORDER BY p.chunk_id) scan_rest""")
    return "\n        UNION ALL\n        ".join(scans)


def _completion(name: str, previous: str, terms: str, bounds_left: str) -> str:
    """`previous` chunks with the optional `terms` added by key lookups, then those that can
    still reach the bar once the optional bounds not yet added (`bounds_left`) are counted."""
    return f"""), {name}_sums AS MATERIALIZED (
    SELECT chunk_id, sum(score) AS score FROM (
        SELECT chunk_id, score FROM {previous}
        UNION ALL
        SELECT p.chunk_id, {BM25_IMPACT}
        FROM split qt CROSS JOIN stats CROSS JOIN LATERAL (
            SELECT p.chunk_id, p.tf, p.dl FROM bm25_postings p
            WHERE p.term_id = qt.term_id AND p.collection_id = {CID}
              AND p.chunk_id = ANY (ARRAY(SELECT chunk_id FROM {previous}))
            OFFSET 0) p
        WHERE {terms}) parts
    GROUP BY chunk_id
), {name} AS MATERIALIZED (
    {_within_reach(f"{name}_sums", bounds_left)}"""


def _within_reach(rows: str, bounds_left: str) -> str:
    """The chunks of `rows` whose score plus the optional bounds not yet added (`bounds_left`)
    reaches the bar: theta, or the depth-th best score among them where that is higher."""
    return f"""SELECT chunk_id, score FROM {rows}
    WHERE score >= greatest(
              (SELECT t FROM theta),
              coalesce((SELECT score FROM {rows} ORDER BY score DESC OFFSET :depth - 1 LIMIT 1), {_NO_SCORE}) - {_SLACK})
          - {bounds_left}"""


def _bounds_after(rank: int) -> str:
    return f"(SELECT coalesce(sum(ub), {_NO_SCORE}) FROM split WHERE lookup_rank > {rank})"


_BM25_TERMS = f"""
stats AS (
    SELECT n_chunks::float8 AS n,
           :k1 * (1.0::float8 - :b) AS len_base,
           :k1 * :b * n_chunks / greatest(total_dl, 1)::float8 AS len_slope
    FROM bm25_stats WHERE collection_id = {CID}
), q AS (
    SELECT t.id AS term_id, t.max_tf, t.min_dl,
           u.qtf * ln(1.0::float8 + (stats.n - coalesce(t.df, 0) + 0.5::float8) / (coalesce(t.df, 0) + 0.5::float8))
             AS idf_weight
    FROM (SELECT term, count(*)::float8 AS qtf FROM unnest(CAST(:terms AS text[])) AS term GROUP BY term) u
    CROSS JOIN stats
    LEFT JOIN bm25_terms t ON t.collection_id = {CID} AND t.term = u.term
)"""


def _bm25_top(in_slice: str) -> str:
    """The exact top `depth` BM25 scores (`bm25`) of the collection's chunks that `in_slice`,
    a condition on the postings `p`, admits: all of them when it is empty. Theta comes from the
    whole collection's pilot either way: a slice then drops what cannot reach the collection's
    top, not only its own (its own pilot made a million-chunk search slower, not faster)."""
    return f"""qt AS MATERIALIZED (
    SELECT q.term_id, q.idf_weight * (:k1 + 1.0::float8) AS weight,
           q.idf_weight * (:k1 + 1.0::float8) * q.max_tf / (q.max_tf + stats.len_base + stats.len_slope * q.min_dl) AS ub
    FROM q CROSS JOIN stats WHERE q.max_tf > 0
), pilot AS (
    SELECT p.chunk_id FROM qt JOIN bm25_postings p ON p.term_id = qt.term_id AND p.collection_id = {CID} CROSS JOIN stats
    WHERE qt.term_id = (SELECT term_id FROM qt ORDER BY ub DESC, term_id LIMIT 1)
    ORDER BY {BM25_IMPACT} DESC, p.chunk_id
    LIMIT 2 * :depth
), theta AS MATERIALIZED (
    SELECT coalesce((
        SELECT sum({BM25_IMPACT}) AS score
        FROM qt CROSS JOIN stats CROSS JOIN LATERAL (
            SELECT p.chunk_id, p.tf, p.dl FROM bm25_postings p
            WHERE p.term_id = qt.term_id AND p.collection_id = {CID} AND p.chunk_id = ANY (ARRAY(SELECT chunk_id FROM pilot))
            OFFSET 0) p
        GROUP BY p.chunk_id ORDER BY score DESC OFFSET :depth - 1 LIMIT 1
    ), {_NO_SCORE}) - {_SLACK} AS t
), split AS MATERIALIZED (
    -- scan_rank numbers the terms to sum, lookup_rank the optional ones, strongest first
    SELECT s.*,
           CASE WHEN NOT s.optional THEN row_number() OVER (PARTITION BY s.optional ORDER BY s.ub DESC, s.term_id) END AS scan_rank,
           CASE WHEN s.optional THEN row_number() OVER (PARTITION BY s.optional ORDER BY s.ub DESC, s.term_id) END AS lookup_rank
    FROM (SELECT qt.*, sum(qt.ub) OVER (ORDER BY qt.ub, qt.term_id) < theta.t AS optional FROM qt CROSS JOIN theta) s
), candidates AS MATERIALIZED (
    SELECT chunk_id, sum(score) AS score FROM (
        {_scanned_terms(in_slice)}
        ORDER BY chunk_id) scans
    GROUP BY chunk_id
    HAVING sum(score) >= (SELECT t FROM theta) - {_bounds_after(0)}
), survivors AS MATERIALIZED (
    {_within_reach("candidates", _bounds_after(0))}
{_completion("completed_1", "survivors", "qt.lookup_rank = 1", _bounds_after(1))}
{_completion("completed", "completed_1", "qt.lookup_rank > 1", _NO_SCORE)}
), bm25 AS (
    SELECT chunk_id, score FROM completed ORDER BY score DESC, chunk_id LIMIT :depth
)"""

_BM25_RANKED = f"""bm25_ranked AS (
    SELECT b.chunk_id, b.score, row_number() OVER (ORDER BY b.score DESC, b.chunk_id) AS rnk,
           (SELECT sum(q.idf_weight) FROM q CROSS JOIN LATERAL (
                SELECT FROM bm25_postings p
                WHERE p.term_id = q.term_id AND p.collection_id = {CID} AND p.chunk_id = b.chunk_id OFFSET 0) hit)
             / (SELECT sum(idf_weight) FROM q) AS idf_share
    FROM bm25 b
)
"""

BM25_CTES = f"{_BM25_TERMS.strip()}, {_bm25_top('')}, {_BM25_RANKED}"

# The dense leg reads HNSW, which returns at most :depth rows by design. An HNSW graph that
# has seen deletes can also come back short of live rows: deleted chunks stay in it until a
# vacuum and take candidates' places, and pgvector 0.8.2 has races between inserts and the
# vacuum's repair. In a small collection the lost row can be the answer itself: in a CI run a
# three-chunk collection, rebuilt many times, came back without the one chunk the question
# was about. When the index gives fewer rows than the collection holds up to :depth, the leg
# scans the collection exactly instead (`+ 0` keeps the index out of that ORDER BY); that
# happens only where HNSW came up short, so a sound index costs one count of <= :depth rows.
_DENSE_DISTANCE = "c.embedding <=> CAST(:embedding AS vector)"
_DENSE_TOP = f"""dense_indexed AS MATERIALIZED (
    SELECT c.id AS chunk_id, 1.0::float8 - ({_DENSE_DISTANCE}) AS sim
    FROM chunks c WHERE c.collection_id = {CID}
    ORDER BY {_DENSE_DISTANCE}
    LIMIT :depth
), dense_short AS MATERIALIZED (
    SELECT (SELECT count(*) FROM dense_indexed)
             < least(:depth, (SELECT n_chunks FROM bm25_stats WHERE collection_id = {CID})) AS short
), dense AS (
    SELECT * FROM dense_indexed WHERE NOT (SELECT short FROM dense_short)
    UNION ALL
    SELECT * FROM (SELECT c.id AS chunk_id, 1.0::float8 - ({_DENSE_DISTANCE}) AS sim
                   FROM chunks c WHERE c.collection_id = {CID}
                   ORDER BY ({_DENSE_DISTANCE}) + 0
                   LIMIT :depth) exact
    WHERE (SELECT short FROM dense_short)
)"""
_DENSE_RANKED = """dense_ranked AS (
    SELECT dense.*, row_number() OVER (ORDER BY sim DESC, chunk_id) AS rnk FROM dense
)"""
_DENSE_CTES = f"{_DENSE_TOP}, {_DENSE_RANKED}"

# Each leg's best LEG_SCORES raw scores, before fusion: query-performance prediction
# (services/scoring/qpp.py) reads the shape of a leg's score list, which the fused top k
# only samples. A leg a mode does not run is NULL.
LEG_SCORES = 50
_BM25_LEG = f"(SELECT (array_agg(score ORDER BY score DESC))[1:{LEG_SCORES}] FROM bm25)"
_DENSE_LEG = f"(SELECT (array_agg(sim ORDER BY sim DESC))[1:{LEG_SCORES}] FROM dense)"
_NO_LEG = "NULL::float8[]"
# The query's summed idf, a pre-retrieval signal (qpp.query_idf); NULL without a BM25 leg.
_QUERY_IDF = "(SELECT sum(idf_weight) FROM q)"
_NO_QUERY_IDF = "NULL::float8"

# The k best fused rows first, then their text: joining every candidate would fetch text
# for rows the LIMIT drops. Each row's chunk and document are key lookups (LATERAL, OFFSET 0
# keeps them so): misjudging the CTEs' sizes, the planner hashed all 125k documents of a
# million-chunk collection to join 50 rows (30 ms).
HIT_COLUMNS = f"""
SELECT f.*, c.document_id, c.text, d.external_id, d.title, legs.bm25_leg, legs.dense_leg, legs.query_idf
FROM (SELECT * FROM fused ORDER BY fused DESC, chunk_id LIMIT :k) f CROSS JOIN legs
CROSS JOIN LATERAL (SELECT c.document_id, c.text FROM chunks c
                    WHERE c.id = f.chunk_id AND c.collection_id = {CID} OFFSET 0) c
CROSS JOIN LATERAL (SELECT d.external_id, d.title FROM documents d
                    WHERE d.id = c.document_id AND d.collection_id = {CID} OFFSET 0) d
ORDER BY f.fused DESC, f.chunk_id
"""

_FUSED = {
    "hybrid": """SELECT coalesce(b.chunk_id, d.chunk_id) AS chunk_id,
           b.score AS bm25_score, b.rnk AS bm25_rank, b.idf_share,
           d.sim AS dense_similarity, d.rnk AS dense_rank,
           coalesce(:w_bm25 / (:rrf_k + b.rnk), 0.0::float8)
             + coalesce(:w_dense / (:rrf_k + d.rnk), 0.0::float8) AS fused
    FROM bm25_ranked b FULL OUTER JOIN dense_ranked d ON b.chunk_id = d.chunk_id""",
    "bm25": """SELECT chunk_id, score AS bm25_score, rnk AS bm25_rank, idf_share,
           NULL::float8 AS dense_similarity, NULL::bigint AS dense_rank, score AS fused
    FROM bm25_ranked""",
    "dense": """SELECT chunk_id, NULL::float8 AS bm25_score, NULL::bigint AS bm25_rank, NULL::float8 AS idf_share,
           sim AS dense_similarity, rnk AS dense_rank, sim AS fused
    FROM dense_ranked""",
}
_LEGS = {
    "hybrid": f"{_BM25_LEG} AS bm25_leg, {_DENSE_LEG} AS dense_leg, {_QUERY_IDF} AS query_idf",
    "bm25": f"{_BM25_LEG} AS bm25_leg, {_NO_LEG} AS dense_leg, {_QUERY_IDF} AS query_idf",
    "dense": f"{_NO_LEG} AS bm25_leg, {_DENSE_LEG} AS dense_leg, {_NO_QUERY_IDF} AS query_idf",
}


def _search_sql(mode: str, bm25: str, dense: str) -> str:
    """A mode's statement, its legs given by `bm25` (defining `q` and `bm25_ranked`) and
    `dense` (defining `dense_ranked`): searched, or read from arrays a sliced search passes."""
    legs = [leg for leg, used in ((bm25, mode != "dense"), (dense, mode != "bm25")) if used]
    return f"""
WITH {", ".join([COLLECTION_CTE, *(leg.strip() for leg in legs)])}, fused AS (
    {_FUSED[mode]}
), legs AS (SELECT {_LEGS[mode]}
){HIT_COLUMNS}"""


HYBRID_SQL = _search_sql("hybrid", BM25_CTES, _DENSE_CTES)
BM25_SQL = _search_sql("bm25", BM25_CTES, _DENSE_CTES)
DENSE_SQL = _search_sql("dense", BM25_CTES, _DENSE_CTES)
SQL_BY_MODE = {"hybrid": HYBRID_SQL, "bm25": BM25_SQL, "dense": DENSE_SQL}
# Parsed once: text() scans the whole statement for its bind parameters (0.3 ms a search).
_STATEMENTS = {"hybrid": text(HYBRID_SQL), "bm25": text(BM25_SQL), "dense": text(DENSE_SQL)}

# --- A large collection, searched in slices ---------------------------------------------
# One statement runs on one core, and the BM25 leg's time grows with the postings of the
# query's terms. Past settings.search_slice_min_chunks the leg runs as one statement per
# range of chunk ids, at once, and the dense leg beside them; a last statement fuses the
# legs and fetches the hits. It costs CPU (each slice plans, and finds the pilot's theta) and
# a connection per slice, for latency: at a million chunks on 2 cores, hybrid p50 62 -> 51 ms,
# p95 238 -> 166 ms, CPU 79 -> 94 ms a query; at 100k it doubled the latency (README).
_IN_SLICE = "AND p.chunk_id BETWEEN :lo AND :hi"
BM25_SLICE_SQL = f"WITH {COLLECTION_CTE}, {_BM25_TERMS.strip()}, {_bm25_top(_IN_SLICE)}\nSELECT chunk_id, score FROM bm25"
DENSE_LEG_SQL = f"WITH {COLLECTION_CTE}, {_DENSE_TOP}\nSELECT chunk_id, sim FROM dense"
_GIVEN_BM25 = f"""{_BM25_TERMS.strip()}, bm25 AS (
    SELECT * FROM unnest(CAST(:bm25_ids AS bigint[]), CAST(:bm25_scores AS float8[])) AS given(chunk_id, score)
), {_BM25_RANKED}"""
_GIVEN_DENSE = f"""dense AS (
    SELECT * FROM unnest(CAST(:dense_ids AS bigint[]), CAST(:dense_sims AS float8[])) AS given(chunk_id, sim)
), {_DENSE_RANKED}"""
GIVEN_HYBRID_SQL = _search_sql("hybrid", _GIVEN_BM25, _GIVEN_DENSE)
GIVEN_BM25_SQL = _search_sql("bm25", _GIVEN_BM25, _GIVEN_DENSE)
_SLICE_STATEMENT, _DENSE_STATEMENT = text(BM25_SLICE_SQL), text(DENSE_LEG_SQL)
_GIVEN_LEGS = {"hybrid": text(GIVEN_HYBRID_SQL), "bm25": text(GIVEN_BM25_SQL)}
_COLLECTION = text("""
SELECT c.id, coalesce(s.n_chunks, 0) AS n_chunks
FROM collections c LEFT JOIN bm25_stats s ON s.collection_id = c.id WHERE c.name = :name""")
_COLLECTION_EXTENT = text("""
SELECT (SELECT min(id) FROM chunks WHERE collection_id = :cid) AS lo,
       (SELECT max(id) FROM chunks WHERE collection_id = :cid) AS hi""")
# Threads only wait on the server; 16 covers the largest search_slices plus the dense leg.
_SLICE_WORKERS = ThreadPoolExecutor(max_workers=16, thread_name_prefix="search-slice")
