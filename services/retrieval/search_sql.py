"""The search statements: BM25 (MaxScore over the postings), dense (HNSW with an exact fallback)
and hybrid (weighted RRF), each one SQL statement assembled once, at import, from constant
fragments; every value is bound. services/retrieval/search.py runs them; scoring given chunks
or texts (services/intake) reuses the fragments, so a chunk gets the same numbers however it is
reached."""

from __future__ import annotations

from sqlalchemy import text

# Lucene BM25: idf = ln(1 + (N - df + 0.5) / (df + 0.5)); a query term repeated counts
# repeatedly (as rank-bm25 does). Query terms unseen in the corpus keep a maximal idf in
# the denominator of idf_share, so a query about something the corpus lacks scores low.
# Float constants are float8: numeric arithmetic measured 6x slower.
#
# The exact top `depth` by MaxScore (Turtle & Flood, 1995), as Lucene does it. Summing every
# posting of every query term is what costs; instead:
# 1. each term's upper bound `ub` is its largest impact over its (tf, shortest chunk) pairs
#    (bm25_terms, migration 0019): exact for any k1, b and average length;
# 2. theta, a lower bound of the depth-th best score: the depth-th best full score among
#    the pilot's 2 * depth chunks, those the strongest term scores highest (any depth chunks
#    do), filled from the next terms where it holds fewer: a strongest term holding fewer
#    than depth postings left theta at 0 (4 and 8 of 200 bench questions), pruning nothing;
# 3. the weakest terms whose bounds sum below theta are optional: a chunk holding only them
#    cannot reach the top, so only the other terms' postings are summed (`candidates`),
#    keeping the chunks whose partial score plus every optional bound reaches theta;
# 4. the bar is raised to the depth-th best full score of the 2 * depth best candidates
#    (their optional terms looked up): 0.99 of the final depth-th score at the median of
#    the reference corpora's bench questions, where theta is 0.72; the `survivors` are the
#    candidates that can still reach it;
# 5. the survivors get every optional term added by index lookups, all at once, and the top
#    `depth` of those full scores is the answer. Adding the strongest optional term first and
#    dropping the survivors that could then no longer reach the bar cost more than it saved:
#    each pass over a few thousand survivors costs more than their lookups (one index scan a
#    term, which PostgreSQL 18 walks leaf by leaf for sorted keys). Alternated question by
#    question on the 100k python-reference store (bench/bm25_variants.py): 16.09 -> 15.69 ms
#    of CPU a search.
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
#   joined the survivors to their looked-up terms in a nested loop over every pair (13 s of a
#   13.5 s query).
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
PILOT_TERMS = 3
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


def _lookups(rows: str, terms: str, term_rows: str = "split") -> str:
    """The impacts (`score`) of the `terms` (a condition on `qt`, the rows of `term_rows`) in the
    chunks of `rows`, by key lookups of (term, chunk): a few chunks' postings, not every posting
    of those terms."""
    return f"""SELECT p.chunk_id, {BM25_IMPACT} AS score
        FROM {term_rows} qt CROSS JOIN stats CROSS JOIN LATERAL (
            SELECT p.chunk_id, p.tf, p.dl FROM bm25_postings p
            WHERE p.term_id = qt.term_id AND p.collection_id = {CID}
              AND p.chunk_id = ANY (ARRAY(SELECT chunk_id FROM {rows}))
            OFFSET 0) p
        WHERE {terms}"""


def _full_scores(rows: str) -> str:
    """The full scores of the candidates in `rows`: their partial scores plus their optional
    terms, looked up."""
    return f"""SELECT chunk_id, sum(score) AS score FROM (
        SELECT chunk_id, score FROM {rows}
        UNION ALL
        {_lookups(rows, "qt.optional")}) parts
    GROUP BY chunk_id"""


# The optional terms' bounds summed: what a candidate's partial score may still gain.
_OPTIONAL_BOUNDS = f"(SELECT coalesce(sum(ub), {_NO_SCORE}) FROM split WHERE optional)"


# The pilot's chunks: the 2 * depth the strongest term scores highest, and where that term
# holds fewer postings, the next terms' best, in ub order (PILOT_TERMS in all). A term's
# postings sort on its impact without its weight, one constant per term. The Limit above the
# Append stops reading terms once it has its rows: the next terms cost nothing when the
# strongest holds enough.
_PILOT_SCANS = "\n        UNION ALL\n        ".join(
    f"""(SELECT p.chunk_id FROM bm25_postings p CROSS JOIN stats
         WHERE p.term_id = (SELECT term_id FROM qt ORDER BY ub DESC, term_id OFFSET {rank} LIMIT 1)
           AND p.collection_id = {CID}
         ORDER BY p.tf / (p.tf + stats.len_base + stats.len_slope * p.dl) DESC, p.chunk_id
         LIMIT 2 * :depth)""" for rank in range(PILOT_TERMS))

_BM25_TERMS = f"""
stats AS (
    SELECT n_chunks::float8 AS n,
           :k1 * (1.0::float8 - :b) AS len_base,
           :k1 * :b * n_chunks / greatest(total_dl, 1)::float8 AS len_slope
    FROM bm25_stats WHERE collection_id = {CID}
), q AS (
    SELECT t.id AS term_id, t.impact_tf, t.impact_dl,
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
           q.idf_weight * (:k1 + 1.0::float8) * (
               SELECT max(pair.tf / (pair.tf + stats.len_base + stats.len_slope * pair.dl))
               FROM unnest(CAST(q.impact_tf AS float8[]), CAST(q.impact_dl AS float8[])) AS pair(tf, dl)) AS ub
    FROM q CROSS JOIN stats WHERE cardinality(q.impact_tf) > 0
), pilot AS (
    SELECT chunk_id FROM (
        {_PILOT_SCANS}) pilot_scans
    LIMIT 2 * :depth
), theta AS MATERIALIZED (
    SELECT coalesce((
        SELECT sum(score) AS score FROM ({_lookups("pilot", "true", "qt")}) parts
        GROUP BY chunk_id ORDER BY score DESC OFFSET :depth - 1 LIMIT 1
    ), {_NO_SCORE}) - {_SLACK} AS t
), split AS MATERIALIZED (
    -- scan_rank numbers the terms to sum, strongest first
    SELECT s.*,
           CASE WHEN NOT s.optional THEN row_number() OVER (PARTITION BY s.optional ORDER BY s.ub DESC, s.term_id) END AS scan_rank
    FROM (SELECT qt.*, sum(qt.ub) OVER (ORDER BY qt.ub, qt.term_id) < theta.t AS optional FROM qt CROSS JOIN theta) s
), candidates AS MATERIALIZED (
    SELECT chunk_id, sum(score) AS score FROM (
        {_scanned_terms(in_slice)}
        ORDER BY chunk_id) scans
    GROUP BY chunk_id
    HAVING sum(score) >= (SELECT t FROM theta) - {_OPTIONAL_BOUNDS}
), best AS MATERIALIZED (
    SELECT chunk_id, score FROM candidates ORDER BY score DESC, chunk_id LIMIT 2 * :depth
), bar AS MATERIALIZED (
    SELECT greatest((SELECT t FROM theta), coalesce((
        SELECT score FROM ({_full_scores("best")}) full_scores ORDER BY score DESC OFFSET :depth - 1 LIMIT 1
    ), {_NO_SCORE}) - {_SLACK}) AS t
), survivors AS MATERIALIZED (
    -- the bar is at least the depth-th best partial score: the full scores it is drawn from are not lower
    SELECT chunk_id, score FROM candidates WHERE score >= (SELECT t FROM bar) - {_OPTIONAL_BOUNDS}
), bm25 AS (
    {_full_scores("survivors")}
    ORDER BY score DESC, chunk_id LIMIT :depth
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
# The WHERE sets plan_cache_mode back to :plan_mode, the caller's, for its later statements
# (search.py switches it for this statement's planning). Naming no column, it is a one-time
# filter, run before any row is read, so it runs when no row comes back too; it saves the
# round trip a statement of its own took (0.09 ms of a 7 ms BM25 search at 100k chunks).
HIT_COLUMNS = f"""
SELECT f.*, c.document_id, c.text, d.external_id, d.title, legs.bm25_leg, legs.dense_leg, legs.query_idf
FROM (SELECT * FROM fused ORDER BY fused DESC, chunk_id LIMIT :k) f CROSS JOIN legs
CROSS JOIN LATERAL (SELECT c.document_id, c.text FROM chunks c
                    WHERE c.id = f.chunk_id AND c.collection_id = {CID} OFFSET 0) c
CROSS JOIN LATERAL (SELECT d.external_id, d.title FROM documents d
                    WHERE d.id = c.document_id AND d.collection_id = {CID} OFFSET 0) d
WHERE (SELECT set_config('plan_cache_mode', CAST(:plan_mode AS text), true)) IS NOT NULL
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
# Parsed once: text() scans the whole statement for its bind parameters (0.3 ms a search).
STATEMENTS = {"hybrid": text(HYBRID_SQL), "bm25": text(BM25_SQL), "dense": text(DENSE_SQL)}
SLICE_STATEMENT, DENSE_LEG_STATEMENT = text(BM25_SLICE_SQL), text(DENSE_LEG_SQL)
GIVEN_LEG_STATEMENTS = {"hybrid": text(GIVEN_HYBRID_SQL), "bm25": text(GIVEN_BM25_SQL)}
