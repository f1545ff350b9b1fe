"""Questions a corpus asks of itself: the labelled data self-calibration fits on.

Nobody has judged a new corpus, but every chunk knows one question it answers: take one of
its sentences, remove the sentence's rarest word (the thing a question would ask for), and
keep a short window of the words around the gap, as long as real questions are. Searching
that text should bring the chunk's document back; whether it does, against the confidence
the search got, is a verdict that costs nothing.

The window length varies (WINDOW_WORDS) so the pseudo-questions span easy and hard ones:
a mapping fitted on easy questions alone would never see low confidence and could not say
what it means. A collection with fewer chunks than questions wanted asks each chunk up to
QUESTIONS_PER_CHUNK questions (another sentence or window each time): most pseudo-questions
come back, so the misses a mapping learns from are few, and with one question per chunk a
corpus of 700 chunks gave fits whose ECE on real questions moved from 0.08 to 0.17 with the
seed (bench/qpp.py). Deterministic for a seed, so a fitted profile can be reproduced.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.orm import Session

from services.corpus.indexing import find_collection
from services.retrieval.text import STOPWORDS, tokenize

DEFAULT_PSEUDO_QUERIES = 1800  # at 600 a fit moved with the seed (ECE 0.08-0.17); ~1 min a mode
WINDOW_WORDS = (4, 12)  # inclusive range of words kept around the removed term
MIN_SENTENCE_WORDS = 6
QUESTIONS_PER_CHUNK = 4  # at most, when the collection has fewer chunks than questions wanted
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n{2,}")
_WORD = re.compile(r"\S+")
_EDGE_PUNCT = re.compile(r"^\W+|\W+$")
_PROSE_WORD = re.compile(r"^[\"'(]?[A-Za-z][a-z'-]*[.,;:!?)\"']*$")
MIN_PROSE_SHARE = 0.6  # a window mostly of table rules, code or markup is nothing anyone asks

# A seeded sample of a collection's chunks: hashing the id with the seed orders chunks the same
# way on every run of the same seed. The collection is bound by id, not looked up by name in the
# statement: chunks are partitioned by collection, and only a value the planner sees lets it
# plan this collection's partition alone (see services/retrieval/search.py).
SAMPLE_SQL = text("""
SELECT c.id, d.external_id, c.text FROM chunks c JOIN documents d ON d.id = c.document_id
WHERE c.collection_id = CAST(:cid AS integer) AND d.collection_id = CAST(:cid AS integer)
ORDER BY md5(c.id::text || :seed), c.id
LIMIT :n
""")
DF_SQL = text("""
SELECT t.term, t.df FROM bm25_terms t
WHERE t.collection_id = CAST(:cid AS integer) AND t.term = ANY(:terms)
""")


@dataclass(frozen=True)
class PseudoQuery:
    text: str
    chunk_id: int
    document: str  # the external id of the chunk's document: the answer a search should find
    removed: str  # the word taken out
    # The window with the word still in, whitespace normalized: a chunk holding it answers the
    # question as well as the source does (boilerplate repeated across documents).
    passage: str


def sample_pseudo_queries(session: Session, *, collection: str, n: int, seed: int = 0) -> list[PseudoQuery]:
    """Up to `n` distinct pseudo-questions from a seeded sample of the collection's chunks
    (chunks with no usable sentence are skipped, so fewer may come back)."""
    cid = find_collection(session, collection)
    if cid is None:
        return []
    rows = session.execute(SAMPLE_SQL, {"cid": cid, "seed": str(seed), "n": n}).all()
    terms = sorted({t for _id, _doc, body in rows for t in tokenize(body)})
    df: dict[str, int] = dict(session.execute(DF_SQL, {"cid": cid, "terms": terms}).tuples().all())
    rng = random.Random(seed)
    passes = min(QUESTIONS_PER_CHUNK, -(-n // len(rows))) if rows else 0
    queries: dict[tuple[int, str], PseudoQuery] = {}  # a chunk asked the same question twice counts once
    for _pass in range(passes):
        for chunk_id, document, body in rows:
            query = pseudo_query(body, df, rng)
            if query is not None and len(queries) < n:
                queries.setdefault((chunk_id, query[0]), PseudoQuery(query[0], chunk_id, document, *query[1:]))
    return list(queries.values())


def pseudo_query(body: str, df: dict[str, int], rng: random.Random) -> tuple[str, str, str] | None:
    """(question text, removed word, passage) from one chunk's text, or None when the chosen
    sentence's window is not prose or has no word the index knows."""
    sentences = [s for s in _SENTENCE_END.split(body) if len(_WORD.findall(s)) >= MIN_SENTENCE_WORDS]
    if not sentences:
        return None
    words = _WORD.findall(rng.choice(sentences))
    target = _rarest_word(words, df)
    if target is None:
        return None
    width = rng.randint(*WINDOW_WORDS)
    start = max(0, min(target - rng.randint(0, width), len(words) - width))
    window = words[start:start + width + 1]
    if sum(1 for w in window if _PROSE_WORD.match(w)) < MIN_PROSE_SHARE * len(window):
        return None
    kept = [w for i, w in enumerate(window, start) if i != target]
    question = _EDGE_PUNCT.sub("", " ".join(kept))
    if not tokenize(question):
        return None
    return question, _EDGE_PUNCT.sub("", words[target]), " ".join(window)


def _rarest_word(words: Sequence[str], df: dict[str, int]) -> int | None:
    """Index of the word whose stem is in the fewest chunks (the sentence's most specific
    word), among words that are not stop words and that the index has seen. (A content word
    at random instead made questions the search found less often, not more: measured on
    python-reference and numpy-api, bench/qpp.py.)"""
    best, best_df = None, None
    for i, word in enumerate(words):
        stems = tokenize(word)
        if len(stems) != 1 or word.lower() in STOPWORDS or stems[0] not in df:
            continue
        if best_df is None or df[stems[0]] < best_df:
            best, best_df = i, df[stems[0]]
    return best
