"""Retrieval on the SQuAD collection, checked against independent Python references.

BM25 against rank-bm25 (with Lucene's idf), hybrid against a Python weighted RRF over the
two legs run separately, dense similarity against numpy on the stored vectors.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from rank_bm25 import BM25Okapi
from sqlalchemy import text

from services.corpus.indexing import indexed_text
from services.errors import InputError
from services.retrieval import embedding
from services.retrieval.search import default_params, search
from services.retrieval.search_sql import BM25_CTES, COLLECTION_CTE, SCANNED_TERMS
from services.retrieval.text import tokenize

DEPTH = 50
SCORE_TOL = 1e-9


class _LuceneBM25(BM25Okapi):
    """rank-bm25 with Lucene's idf, ln(1 + (N - df + 0.5) / (df + 0.5)), and no epsilon floor."""

    def _calc_idf(self, nd):  # type: ignore[no-untyped-def]
        for word, df in nd.items():
            self.idf[word] = math.log(1.0 + (self.corpus_size - df + 0.5) / (df + 0.5))


_CHUNKS_SQL = """
SELECT c.id, d.title, c.text
FROM chunks c JOIN documents d ON d.id = c.document_id JOIN collections k ON k.id = c.collection_id
WHERE k.name = :name ORDER BY c.id
"""


class _Reference:
    def __init__(self, rows, k1: float, b: float) -> None:  # type: ignore[no-untyped-def]
        self.chunk_ids = [row.id for row in rows]
        self.bm25 = _LuceneBM25([tokenize(indexed_text(row.title, row.text)) for row in rows], k1=k1, b=b)

    def scores(self, query: str) -> dict[int, float]:
        return dict(zip(self.chunk_ids, map(float, self.bm25.get_scores(tokenize(query)))))

    def idf(self, term: str) -> float:
        n = self.bm25.corpus_size
        return self.bm25.idf.get(term, math.log(1.0 + (n + 0.5) / 0.5))  # unseen: df = 0


@pytest.fixture(scope="module")
def reference(engine, squad_collection, settings) -> _Reference:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        rows = conn.execute(text(_CHUNKS_SQL), {"name": squad_collection}).all()
    assert len(rows) > 500, "the SQuAD collection should have been ingested"
    return _Reference(rows, settings.bm25_k1, settings.bm25_b)


@pytest.fixture(scope="module")
def squad_queries(squad_dir) -> list[str]:  # type: ignore[no-untyped-def]
    lines = (squad_dir / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    every = [json.loads(line)["text"] for line in lines if line.strip()]
    spread = every[:: len(every) // 40][:39]  # spread over the file: answerable and not
    return [*spread, "Normandy Normandy Normans normans"]  # a repeated query term counts repeatedly


def _params(collection: str, **overrides):  # type: ignore[no-untyped-def]
    return default_params(collection=collection, **overrides)


# --- BM25 ------------------------------------------------------------------------------

def test_sql_bm25_scores_and_top10_equal_rank_bm25(reference, squad_queries, squad_collection):  # type: ignore[no-untyped-def]
    assert len(squad_queries) == 40
    for query in squad_queries:
        expected = reference.scores(query)
        result = search(query, _params(squad_collection, mode="bm25", k=10, depth=DEPTH))
        hits = result.hits
        assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
        for hit in hits:
            assert hit.bm25_score is not None and hit.dense_similarity is None and hit.dense_rank is None
            assert abs(hit.bm25_score - expected[hit.chunk_id]) <= SCORE_TOL, (query, hit.chunk_id)
            assert hit.fused_score == hit.bm25_score
            assert hit.bm25_rank == hit.rank
        assert [h.bm25_score for h in hits] == sorted((h.bm25_score for h in hits), reverse=True)

        _assert_top_up_to_ties(hits, expected, 10, query)


def _assert_top_up_to_ties(hits, expected: dict[int, float], n: int, query: str) -> None:  # type: ignore[no-untyped-def]
    """The hits are the reference's top n, up to chunks tied with the n-th score."""
    matching = sorted((s for s in expected.values() if s > 0), reverse=True)
    assert len(hits) == min(n, len(matching)), query
    if not hits:
        return
    last = matching[len(hits) - 1]
    must = {cid for cid, s in expected.items() if s > last + SCORE_TOL}
    may = {cid for cid, s in expected.items() if s >= last - SCORE_TOL}
    assert must <= {h.chunk_id for h in hits} <= may, query


# The BM25 leg's own CTEs, stopped where MaxScore has split the query terms.
_OPTIONAL_TERMS_SQL = f"WITH {COLLECTION_CTE}, {BM25_CTES.strip()} SELECT count(*) FILTER (WHERE optional) FROM split"


@pytest.mark.parametrize("depth", [3, 10])
def test_maxscore_pruning_keeps_the_exact_top(reference, squad_queries, squad_collection, engine, settings, depth):  # type: ignore[no-untyped-def]
    """Terms too weak to lift a chunk into the top `depth` are only looked up for chunks the
    other terms already put near it: the top stays exactly rank-bm25's."""
    pruned = 0
    for query in squad_queries:
        expected = reference.scores(query)
        hits = search(query, _params(squad_collection, mode="bm25", k=depth, depth=depth)).hits
        for hit in hits:
            assert abs(hit.bm25_score - expected[hit.chunk_id]) <= SCORE_TOL, (query, hit.chunk_id)
        _assert_top_up_to_ties(hits, expected, depth, query)
        with engine.connect() as conn:
            cid = conn.execute(text("SELECT id FROM collections WHERE name = :n"), {"n": squad_collection}).scalar_one()
            pruned += conn.execute(text(_OPTIONAL_TERMS_SQL), {
                "cid": cid, "terms": tokenize(query), "depth": depth,
                "k1": settings.bm25_k1, "b": settings.bm25_b}).scalar_one() > 0
    assert pruned >= 10, f"only {pruned} of {len(squad_queries)} queries had an optional term: pruning went untested"


@pytest.mark.parametrize(("k1", "b"), [(2.0, 0.3), (0.6, 1.0)])
def test_maxscore_bounds_hold_for_any_k1_and_b(engine, squad_queries, squad_collection, k1, b):  # type: ignore[no-untyped-def]
    """Each term's bound is computed from its (tf, shortest chunk) pairs for the k1 and b searched
    with: the pruned top stays rank-bm25's at settings the index was not written for."""
    with engine.connect() as conn:
        rows = conn.execute(text(_CHUNKS_SQL), {"name": squad_collection}).all()
        cid = conn.execute(text("SELECT id FROM collections WHERE name = :n"), {"n": squad_collection}).scalar_one()
    reference = _Reference(rows, k1, b)
    pruned = 0
    for query in squad_queries:
        expected = reference.scores(query)
        hits = search(query, _params(squad_collection, mode="bm25", k=10, depth=10, k1=k1, b=b)).hits
        for hit in hits:
            assert abs(hit.bm25_score - expected[hit.chunk_id]) <= SCORE_TOL, (query, hit.chunk_id)
        _assert_top_up_to_ties(hits, expected, 10, query)
        with engine.connect() as conn:
            pruned += conn.execute(text(_OPTIONAL_TERMS_SQL), {
                "cid": cid, "terms": tokenize(query), "depth": 10, "k1": k1, "b": b}).scalar_one() > 0
    assert pruned >= 10, f"only {pruned} of {len(squad_queries)} queries had an optional term: pruning went untested"


# How far a query's terms reach into the statement's paths: the most terms summed, the most looked up.
_SPLIT_SQL = f"WITH {COLLECTION_CTE}, {BM25_CTES.strip()} SELECT max(scan_rank), count(*) FILTER (WHERE optional) FROM split"


def test_long_queries_stay_exact_past_the_merged_scans_and_the_lookups(reference, squad_queries, squad_collection, engine, settings):  # type: ignore[no-untyped-def]
    """More terms to sum than SCANNED_TERMS: the rest are summed in one sorted scan. Several
    optional terms: all are looked up together for the survivors. Neither path may change a
    score or the top."""
    long_queries = [" ".join(squad_queries[i:i + 4]) for i in range(0, 40, 4)]
    most_summed = most_looked_up = 0
    with engine.connect() as conn:
        cid = conn.execute(text("SELECT id FROM collections WHERE name = :n"), {"n": squad_collection}).scalar_one()
    for query in long_queries:
        expected = reference.scores(query)
        for depth in (3, DEPTH):
            hits = search(query, _params(squad_collection, mode="bm25", k=depth, depth=depth)).hits
            for hit in hits:
                assert abs(hit.bm25_score - expected[hit.chunk_id]) <= SCORE_TOL, (query, hit.chunk_id)
            _assert_top_up_to_ties(hits, expected, depth, query)
            with engine.connect() as conn:
                summed, looked_up = conn.execute(text(_SPLIT_SQL), {
                    "cid": cid, "terms": tokenize(query), "depth": depth, "k1": settings.bm25_k1, "b": settings.bm25_b}).one()
            most_summed, most_looked_up = max(most_summed, summed or 0), max(most_looked_up, looked_up or 0)
    assert most_summed > SCANNED_TERMS, f"at most {most_summed} terms summed: the sorted scan of the rest went untested"
    assert most_looked_up >= 3, f"at most {most_looked_up} terms looked up: several optional terms went untested"


def test_matched_idf_share_is_the_matched_fraction_of_query_idf(reference, squad_queries, squad_collection):  # type: ignore[no-untyped-def]
    for query in squad_queries[:10]:
        terms = tokenize(query)
        total = sum(reference.idf(t) for t in terms)
        result = search(query, _params(squad_collection, mode="bm25", k=10, depth=DEPTH))
        by_id = dict(zip(reference.chunk_ids, reference.bm25.doc_freqs))
        for hit in result.hits:
            matched = sum(reference.idf(t) for t in terms if t in by_id[hit.chunk_id])
            assert hit.matched_idf_share == pytest.approx(matched / total, abs=1e-12)
            assert 0 < hit.matched_idf_share <= 1


# --- hybrid = weighted RRF of the two legs ---------------------------------------------

def _rrf_reference(bm25_hits, dense_hits, *, rrf_k: float, w_bm25: float, w_dense: float, k: int):  # type: ignore[no-untyped-def]
    bm25 = {h.chunk_id: h for h in bm25_hits}
    dense = {h.chunk_id: h for h in dense_hits}
    fused = {}
    for cid in bm25.keys() | dense.keys():
        score = w_bm25 / (rrf_k + bm25[cid].bm25_rank) if cid in bm25 else 0.0
        score += w_dense / (rrf_k + dense[cid].dense_rank) if cid in dense else 0.0
        fused[cid] = score
    order = sorted(fused, key=lambda cid: (-fused[cid], cid))[:k]  # SQL: ORDER BY fused DESC, chunk_id
    return [(cid, fused[cid]) for cid in order], bm25, dense


@pytest.mark.parametrize("w_bm25, w_dense", [(1.0, 1.0), (0.3, 1.0), (1.0, 0.45)])
def test_hybrid_equals_python_rrf_over_separate_legs(squad_queries, squad_collection, settings, w_bm25, w_dense):  # type: ignore[no-untyped-def]
    differs_from_equal_weights = 0
    for query in squad_queries[:30]:
        bm25_leg = search(query, _params(squad_collection, mode="bm25", k=DEPTH, depth=DEPTH)).hits
        dense_leg = search(query, _params(squad_collection, mode="dense", k=DEPTH, depth=DEPTH)).hits
        assert [h.bm25_rank for h in bm25_leg] == list(range(1, len(bm25_leg) + 1))
        assert [h.dense_rank for h in dense_leg] == list(range(1, len(dense_leg) + 1))
        expected, bm25, dense = _rrf_reference(
            bm25_leg, dense_leg, rrf_k=settings.rrf_k, w_bm25=w_bm25, w_dense=w_dense, k=10
        )
        hybrid = search(query, _params(squad_collection, mode="hybrid", k=10, depth=DEPTH,
                                       bm25_weight=w_bm25, dense_weight=w_dense)).hits
        assert [h.chunk_id for h in hybrid] == [cid for cid, _ in expected], query
        for hit, (_, score) in zip(hybrid, expected):
            assert abs(hit.fused_score - score) <= 1e-12
        equal_weights, _, _ = _rrf_reference(bm25_leg, dense_leg, rrf_k=settings.rrf_k, w_bm25=1, w_dense=1, k=10)
        differs_from_equal_weights += [c for c, _ in equal_weights] != [h.chunk_id for h in hybrid]
    if (w_bm25, w_dense) != (1.0, 1.0):
        assert differs_from_equal_weights > 0, "leg weights had no effect on any ranking"


def test_hybrid_hits_carry_both_legs_exactly_as_the_legs_report_them(squad_queries, squad_collection):  # type: ignore[no-untyped-def]
    one_leg_only = 0
    for query in squad_queries[:30]:
        bm25 = {h.chunk_id: h for h in search(query, _params(squad_collection, mode="bm25", k=DEPTH, depth=DEPTH)).hits}
        dense = {h.chunk_id: h for h in search(query, _params(squad_collection, mode="dense", k=DEPTH, depth=DEPTH)).hits}
        for hit in search(query, _params(squad_collection, mode="hybrid", k=20, depth=DEPTH)).hits:
            assert hit.chunk_id in bm25 or hit.chunk_id in dense
            if hit.chunk_id in bm25:
                leg = bm25[hit.chunk_id]
                assert hit.bm25_rank == leg.bm25_rank
                # float sums may be added up in another order: equal to the last bits only
                assert hit.bm25_score == pytest.approx(leg.bm25_score, abs=1e-12)
                assert hit.matched_idf_share == pytest.approx(leg.matched_idf_share, abs=1e-12)
            else:
                assert hit.bm25_score is None and hit.bm25_rank is None and hit.matched_idf_share is None
            if hit.chunk_id in dense:
                leg = dense[hit.chunk_id]
                assert hit.dense_rank == leg.dense_rank
                assert hit.dense_similarity == pytest.approx(leg.dense_similarity, abs=1e-12)
            else:
                assert hit.dense_similarity is None and hit.dense_rank is None
            one_leg_only += (hit.chunk_id in bm25) != (hit.chunk_id in dense)
    assert one_leg_only > 0, "no hit came from a single leg, so the None case was never checked"


# --- dense -----------------------------------------------------------------------------

def _as_list(vector) -> list[float]:  # type: ignore[no-untyped-def]
    """A stored vector as floats, whether the driver hands back a pgvector Vector or numpy."""
    return vector.to_list() if hasattr(vector, "to_list") else list(vector)


def test_dense_similarity_is_one_minus_cosine_distance_of_stored_vectors(engine, squad_queries, squad_collection, settings):  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT c.id, c.embedding FROM chunks c JOIN collections k ON k.id = c.collection_id "
                 "WHERE k.name = :name ORDER BY c.id"),
            {"name": squad_collection},
        ).all()
    ids = np.array([r.id for r in rows])
    matrix = np.array([np.asarray(_as_list(r.embedding), dtype=np.float64) for r in rows])
    matrix_unit = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    for query in squad_queries[:20]:
        hits = search(query, _params(squad_collection, mode="dense", k=10, depth=DEPTH)).hits
        assert len(hits) == 10
        q = embedding.encode(settings.embedding_model, [query])[0].astype(np.float64)
        exact = matrix_unit @ (q / np.linalg.norm(q))
        by_id = dict(zip(ids.tolist(), exact.tolist()))
        for hit in hits:
            assert hit.dense_similarity == pytest.approx(by_id[hit.chunk_id], abs=1e-6)
            assert hit.fused_score == hit.dense_similarity and hit.bm25_score is None
        # the leg returns the true nearest neighbours (up to float ties)
        tenth = np.sort(exact)[::-1][9]
        assert {int(i) for i in ids[exact > tenth + 1e-6]} <= {h.chunk_id for h in hits}, query


# --- query validation ------------------------------------------------------------------

@pytest.mark.parametrize("query", ["", "   ", "\n\t  \r\n", "\x00\x07\x1b"])
def test_empty_query_is_an_input_error(query, squad_collection):  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="the query is empty"):
        search(query, _params(squad_collection))


def test_overlong_query_is_an_input_error_naming_the_limit(squad_collection, settings):  # type: ignore[no-untyped-def]
    limit = settings.max_query_chars
    assert search("a" * limit, _params(squad_collection, mode="bm25")).query == "a" * limit
    with pytest.raises(InputError, match=f"the limit is {limit:,}"):
        search("a" * (limit + 1), _params(squad_collection))


def test_control_characters_are_stripped(squad_collection):  # type: ignore[no-untyped-def]
    plain = search("Where is Normandy located?", _params(squad_collection))
    noisy = search("Where\x00 is\x07 Normandy\x1b located?\x7f", _params(squad_collection))
    assert not any(ch in noisy.query for ch in "\x00\x07\x1b\x7f")
    assert noisy.query.split() == plain.query.split()
    assert [h.chunk_id for h in noisy.hits] == [h.chunk_id for h in plain.hits]
    assert noisy.hits and noisy.hits[0].bm25_score is not None


@pytest.mark.parametrize("query", ["the of and which is", "🙂🚀 🎉", "what? !! ..."])
def test_query_without_index_terms_falls_back_to_dense(query, squad_collection):  # type: ignore[no-untyped-def]
    assert tokenize(query) == []
    hybrid = search(query, _params(squad_collection, mode="hybrid", k=5))
    assert len(hybrid.hits) == 5
    assert all(h.bm25_score is None and h.bm25_rank is None and h.dense_similarity is not None for h in hybrid.hits)
    assert [h.dense_rank for h in hybrid.hits] == [1, 2, 3, 4, 5]
    assert search(query, _params(squad_collection, mode="bm25")).hits == ()


def test_sql_metacharacters_in_the_query_are_harmless(engine, squad_collection):  # type: ignore[no-untyped-def]
    def count() -> int:
        with engine.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM chunks")).scalar_one()

    before = count()
    for query in ["'; DROP TABLE chunks; --", "x' OR '1'='1", "$$; DELETE FROM documents; $$", "a\\'b %_ {}"]:
        for mode in ("bm25", "dense", "hybrid"):
            result = search(query, _params(squad_collection, mode=mode))
            assert result.query == query
    assert search("'; DROP TABLE chunks; --", _params(squad_collection, mode="hybrid")).hits
    assert count() == before


@pytest.mark.parametrize("k, depth", [(0, None), (1001, None), (20, 10)])
def test_k_outside_its_bounds_is_an_input_error(squad_collection, k, depth):  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="k must be between 1 and 1000"):
        search("Normandy", _params(squad_collection, k=k, depth=depth))


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_depth_beyond_the_default_ef_search_returns_every_candidate(squad_collection, mode):  # type: ignore[no-untyped-def]
    hits = search("Where is Normandy located?", _params(squad_collection, mode=mode, k=300, depth=300)).hits
    assert len(hits) == 300
    assert max(h.dense_rank for h in hits if h.dense_rank is not None) > 200  # the dense leg went past 200


def test_unknown_mode_is_an_input_error(squad_collection):  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="unknown retrieval mode 'fuzzy'.*bm25, dense, hybrid"):
        search("Normandy", _params(squad_collection, mode="fuzzy"))


@pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
def test_unknown_collection_gives_no_hits(mode, squad_collection):  # type: ignore[no-untyped-def]
    assert search("Normandy", _params(squad_collection, mode=mode)).hits  # the same query does match in squad
    assert search("Normandy", _params("no-such-collection", mode=mode)).hits == ()


# The pilot's rows and the theta they give, for a query's terms.
_PILOT_SQL = f"""WITH {COLLECTION_CTE}, {BM25_CTES.strip()}
SELECT (SELECT count(DISTINCT chunk_id) FROM pilot) AS pilot_chunks, (SELECT t FROM theta) AS theta,
       (SELECT t FROM bar) AS bar,
       (SELECT t.df FROM qt JOIN bm25_terms t ON t.id = qt.term_id ORDER BY qt.ub DESC LIMIT 1) AS strongest_df"""
_RARE_AND_COMMON_SQL = """
SELECT (SELECT term FROM bm25_terms WHERE collection_id = :cid AND df BETWEEN 2 AND 5 ORDER BY df, term LIMIT 1) AS rare,
       (SELECT array_agg(term) FROM (SELECT term FROM bm25_terms WHERE collection_id = :cid AND df BETWEEN 150 AND 400
                                     ORDER BY df, term LIMIT 2) common) AS common"""


def test_a_rare_strongest_term_fills_the_pilot_from_the_next_terms(reference, squad_collection, engine, settings):  # type: ignore[no-untyped-def]
    """The strongest term holding fewer postings than the pilot wants, its next terms fill it:
    theta is then a real bar, not 0 (which pruned nothing), and the top stays rank-bm25's."""
    with engine.connect() as conn:
        cid = conn.execute(text("SELECT id FROM collections WHERE name = :n"), {"n": squad_collection}).scalar_one()
        rare, common = conn.execute(text(_RARE_AND_COMMON_SQL), {"cid": cid}).one()
        query = " ".join([rare, *common])
        found = conn.execute(text(_PILOT_SQL), {"cid": cid, "terms": tokenize(query), "depth": DEPTH,
                                                "k1": settings.bm25_k1, "b": settings.bm25_b}).one()
    assert found.strongest_df < DEPTH, f"{query!r}: its strongest term holds {found.strongest_df} postings, not a rare one"
    assert found.pilot_chunks >= DEPTH, f"{query!r}: the pilot holds {found.pilot_chunks} chunks, fewer than the depth"
    assert found.theta > 0 and found.bar >= found.theta, (query, found)
    expected = reference.scores(query)
    hits = search(query, _params(squad_collection, mode="bm25", k=DEPTH, depth=DEPTH)).hits
    for hit in hits:
        assert abs(hit.bm25_score - expected[hit.chunk_id]) <= SCORE_TOL, (query, hit.chunk_id)
    _assert_top_up_to_ties(hits, expected, DEPTH, query)
