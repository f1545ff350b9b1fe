"""Hits from the contexts another RAG system retrieved: its own scores where it sent them,
the workbench's where it did not, and a plain account of what could not be computed.

Per record, so that one run's hits share one scale:
- dense similarity: the record's when every context carries one; otherwise the embedded
  model's for all of them (the query encoded once, the contexts in one batch);
- rerank scores: used only when every context carries one (a partial set would score some
  hits by sigmoid and others by similarity);
- BM25: the record's bm25_score is kept as given; the keyword evidence confidence uses (the
  share of the query's idf mass a passage holds) needs corpus statistics, so it is computed
  only for contexts whose document_id names a document in the collection, by the search's
  own BM25 SQL (services.retrieval.search), with that document's title travelling with the
  passage as it does with every stored chunk. A passage holding none of the query's terms
  gets none, as the BM25 leg would not have retrieved it.

What a record cannot give is named rather than invented: bm25_dense_agreement needs each
leg's rank over the source system's whole index, so imported hits are scored like a
single-leg mode (confidence.SINGLE_LEG_AGREEMENT, a neutral 0.5), and that is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from services.corpus.indexing import find_collection, indexed_text
from services.domain import ANONYMOUS_CONTEXT, Hit, RetrievalResult
from services.intake.schema import ExternalContext
from services.retrieval import embedding
from services.retrieval.entities import extract_entities

# The search has no public "score these texts" entry point; these are its own BM25 CTEs and
# per-posting formula, so the numbers here are the search's, not a second implementation.
from services.retrieval.search_sql import BM25_CTES, BM25_IMPACT, COLLECTION_CTE
from services.retrieval.text import term_counts, tokenize
from services.scoring.confidence import SINGLE_LEG_AGREEMENT
from services.settings import Settings

CRAG_TOP_HITS = 3
EXTERNAL_MODE = "external"  # the retrieval mode of imported hits: the source system retrieved them
EXTERNAL_RERANKER = "external"
AGREEMENT_NOT_COMPUTED = (
    "needs each leg's rank over the source system's whole index, which a record does not carry; "
    f"scored as a single-leg mode is (a neutral {SINGLE_LEG_AGREEMENT})")


@dataclass(frozen=True)
class ScoredContexts:
    result: RetrievalResult  # mode "external"; hits in the record's order
    vectors: np.ndarray | None  # embeddings of the hits (at least the top three), for CRAG's agreement signal
    scores: dict[str, str]  # per score: where it came from
    not_computed: dict[str, str]  # component or input -> why it could not be computed


@dataclass(frozen=True)
class KnownDocument:
    document_id: int
    title: str


def score_contexts(query: str, contexts: Sequence[ExternalContext], *, collection: str, settings: Settings,
                   session: Session, need_vectors: bool = False) -> ScoredContexts:
    """The record's contexts as hits scored against `query` (no re-retrieval), in its rank order."""
    prepared = prepare_contexts(query, contexts, collection=collection, settings=settings, session=session,
                                need_vectors=need_vectors)
    return prepared.scored(lambda texts: embedding.encode(settings.embedding_model, texts))


Encode = Callable[[list[str]], np.ndarray]  # texts -> unit vectors, one row each


@dataclass(frozen=True)
class PreparedContexts:
    """A record's contexts with everything the store tells about them (known documents, BM25),
    waiting for their vectors: `texts_to_encode` are what `scored` will ask its encoder for, so
    a batch of records can encode them all in one pass first (services.intake.batch)."""

    query: str
    collection: str
    given: tuple[ExternalContext, ...]  # in rank order
    titles: tuple[str, ...]
    indexed: tuple[str, ...]  # what is embedded: the title travels with the passage, as with stored chunks
    keyword: dict[int, tuple[float | None, float | None]]  # position -> (BM25, matched idf share), known ones only
    document_ids: tuple[int, ...]
    scores: dict[str, str]
    not_computed: dict[str, str]
    need_vectors: bool

    @property
    def texts_to_encode(self) -> list[str]:
        if not self.given:
            return []
        if all(c.dense_similarity is not None for c in self.given):
            # CRAG's agreement signal reads the top three only
            return list(self.indexed[:CRAG_TOP_HITS]) if self.need_vectors else []
        return [*self.indexed, self.query]

    def scored(self, encode: Encode) -> ScoredContexts:
        """The hits, with the similarities and vectors `encode` gives for `texts_to_encode`."""
        given, keyword = self.given, self.keyword
        dense, vectors = _dense_similarities(self, encode)
        rerank_given = bool(given) and all(c.rerank_score is not None for c in given)
        hits = tuple(
            Hit(chunk_id=-(i + 1),  # negative: a passage from the record, not a chunk of the corpus
                document_id=self.document_ids[i],
                external_id=c.document_id or c.source or f"{ANONYMOUS_CONTEXT}{i + 1}",
                title=self.titles[i], text=c.text, rank=i + 1,
                fused_score=float(c.score if c.score is not None else dense[i]),
                bm25_score=c.bm25_score if c.bm25_score is not None else keyword.get(i, (None, None))[0],
                dense_similarity=dense[i], rerank_score=c.rerank_score if rerank_given else None,
                matched_idf_share=keyword.get(i, (None, None))[1])
            for i, c in enumerate(given)
        )
        result = RetrievalResult(query=self.query, mode=EXTERNAL_MODE, hits=hits,
                                 reranker=EXTERNAL_RERANKER if rerank_given else "none",
                                 query_entities=extract_entities(self.query), params={"collection": self.collection})
        return ScoredContexts(result, vectors, self.scores, self.not_computed)


def prepare_contexts(query: str, contexts: Sequence[ExternalContext], *, collection: str, settings: Settings,
                     session: Session, need_vectors: bool = False,
                     known: dict[str, KnownDocument] | None = None) -> PreparedContexts:
    """What the store says of the record's contexts (their documents in `collection`, the BM25
    evidence of the known ones); nothing is encoded yet. `known`: known_documents of at least
    these contexts' document ids, read beforehand (a batch reads its records' in one statement);
    a statement is then run only for a record with a known document."""
    given = [contexts[i] for i in sorted(range(len(contexts)),
                                         key=lambda i: (contexts[i].rank is None, contexts[i].rank or 0, i))]
    if known is None:
        known = known_documents([c.document_id for c in given if c.document_id], collection, session)
    titles = [known[c.document_id].title if c.document_id in known else "" for c in given]
    indexed = [indexed_text(title, c.text) for title, c in zip(titles, given)]
    known_at = [i for i, c in enumerate(given) if c.document_id in known]
    keyword = dict(zip(known_at, _bm25_for_texts(query, [indexed[i] for i in known_at], collection, settings, session)))
    scores, not_computed = _provenance(given, len(known_at), collection, settings)
    return PreparedContexts(query, collection, tuple(given), tuple(titles), tuple(indexed), keyword,
                            tuple(_document_ids(given, known)), scores, not_computed, need_vectors)


def _dense_similarities(prepared: PreparedContexts, encode: Encode) -> tuple[list[float], np.ndarray | None]:
    """The record's similarities when it gave one for every context, else the model's for all;
    and the contexts' embeddings when they were computed or CRAG needs them."""
    given, indexed = prepared.given, list(prepared.indexed)
    if not given:
        return [], None
    if all(c.dense_similarity is not None for c in given):
        similarities = [float(c.dense_similarity) for c in given if c.dense_similarity is not None]  # every one
        return similarities, encode(indexed[:CRAG_TOP_HITS]) if prepared.need_vectors else None
    vectors = encode(indexed)
    query_vector = encode([prepared.query])[0].astype(np.float64)
    return [float(v) for v in vectors.astype(np.float64) @ query_vector], vectors


def _provenance(given: Sequence[ExternalContext], known: int, collection: str,
                settings: Settings) -> tuple[dict[str, str], dict[str, str]]:
    """Where each score came from, and what could not be computed and why."""
    n = len(given)
    scores: dict[str, str] = {}
    not_computed: dict[str, str] = {}
    if not n:
        return scores, not_computed
    with_dense = sum(c.dense_similarity is not None for c in given)
    scores["dense_similarity"] = "given by the record" if with_dense == n else (
        f"computed with {settings.embedding_model}"
        + (f" (the record gave it for only {with_dense} of {n} contexts)" if with_dense else ""))
    with_rerank = sum(c.rerank_score is not None for c in given)
    if with_rerank == n:
        scores["rerank_score"] = "given by the record"
    elif with_rerank:
        not_computed["rerank_score"] = "the record gave rerank scores for only some contexts; none were used"
    if known:
        scores["matched_idf_share"] = (f"computed with the statistics of collection {collection!r} for the "
                                       f"{known} of {n} contexts whose document it holds")
    else:
        not_computed["bm25"] = (f"no context's document_id names a document in collection {collection!r}: "
                                "without corpus statistics there is no keyword evidence, only dense similarity")
    if any(c.bm25_score is not None for c in given):
        scores["bm25_score"] = "given by the record (shown, not used for relevance: its scale is the source's)"
    if any(c.score is None for c in given):
        scores["fused_score"] = "the record's score where given, else the dense similarity"
    not_computed["bm25_dense_agreement"] = AGREEMENT_NOT_COMPUTED
    anonymous = sum(1 for c in given if not c.document_id and not c.source)
    if anonymous:
        not_computed["low_diversity"] = (f"{anonymous} of {n} contexts name no document_id or source: "
                                         "each was counted as a document of its own")
    return scores, not_computed


def _document_ids(given: Sequence[ExternalContext], known: dict[str, KnownDocument]) -> list[int]:
    """The corpus's id for a known document; otherwise one negative id per distinct
    document_id or source, and one per context that names neither."""
    placeholders: dict[str, int] = {}
    ids = []
    for i, c in enumerate(given):
        if c.document_id in known:
            ids.append(known[c.document_id].document_id)
            continue
        key = f"id:{c.document_id}" if c.document_id else f"source:{c.source}" if c.source else f"context:{i}"
        ids.append(placeholders.setdefault(key, -(len(placeholders) + 1)))
    return ids


_KNOWN_DOCUMENTS = text("""
SELECT d.external_id, d.id, d.title FROM documents d JOIN collections c ON c.id = d.collection_id
WHERE c.name = :collection AND d.external_id = ANY(:external_ids)
""")


def known_documents(external_ids: list[str], collection: str, session: Session) -> dict[str, KnownDocument]:
    """The documents of `collection` among `external_ids`, by external id."""
    if not external_ids:
        return {}
    rows = session.execute(_KNOWN_DOCUMENTS, {"collection": collection, "external_ids": sorted(set(external_ids))})
    return {row.external_id: KnownDocument(row.id, row.title) for row in rows}


# The search's stats / q / qt CTEs over postings given as arrays (the passages' own term
# counts) instead of bm25_postings. Its pruning CTEs come along in BM25_CTES unreferenced;
# PostgreSQL does not run a WITH query nothing reads.
_TEXTS_BM25 = text(f"""
WITH {COLLECTION_CTE}, {BM25_CTES.strip()}, given AS (
    SELECT g.ord, t.id AS term_id, g.tf, g.dl
    FROM unnest(CAST(:ords AS int[]), CAST(:text_terms AS text[]), CAST(:tfs AS int[]), CAST(:dls AS int[]))
         AS g(ord, term, tf, dl)
    CROSS JOIN LATERAL (  -- one probe of the (collection_id, term) key per term, never a scan of the collection's
        SELECT t.id FROM bm25_terms t WHERE t.collection_id = (SELECT id FROM coll) AND t.term = g.term OFFSET 0) t
), scored AS (
    SELECT p.ord, sum({BM25_IMPACT}) AS score
    FROM qt JOIN given p ON p.term_id = qt.term_id CROSS JOIN stats
    GROUP BY p.ord
)
SELECT s.ord, s.score,
       (SELECT sum(q.idf_weight) FROM q JOIN given p ON p.term_id = q.term_id WHERE p.ord = s.ord)
         / (SELECT sum(idf_weight) FROM q) AS idf_share
FROM scored s
""")


def _bm25_for_texts(query: str, texts: Sequence[str], collection: str, settings: Settings,
                    session: Session) -> list[tuple[float | None, float | None]]:
    """(BM25 score, matched idf share) of each text against the query, with the collection's
    statistics; (None, None) for a text holding none of the query's terms the corpus knows."""
    if not texts:
        return []
    query_terms = tokenize(query)
    wanted = set(query_terms)
    arrays: dict[str, list[Any]] = {"ords": [], "text_terms": [], "tfs": [], "dls": []}
    for ordinal, body in enumerate(texts):
        counts, dl = term_counts(body)  # dl counts every token, as indexing does; only query terms score
        for term in wanted & counts.keys():
            for name, value in zip(arrays, (ordinal, term, counts[term], dl)):
                arrays[name].append(value)
    rows = session.execute(_TEXTS_BM25, {
        **arrays, "cid": find_collection(session, collection), "terms": query_terms, "k1": float(settings.bm25_k1),
        "b": float(settings.bm25_b), "depth": 1,  # bound for the unreferenced pruning CTEs only
    })
    found = {row.ord: (float(row.score), None if row.idf_share is None else float(row.idf_share)) for row in rows}
    return [found.get(i, (None, None)) for i in range(len(texts))]
