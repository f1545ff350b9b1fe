"""The offline answer backend: extractive MMR answers with citations, scored against the chunks.

It is a deterministic method, not a language model. An answer is up to `max_sentences`
sentences taken verbatim from the retrieved chunks, picked by Maximal Marginal Relevance
over a blend of embedding similarity and query-term overlap, each followed by `[n]`, the
1-based position of its chunk. Reflection, grading and gap finding measure the same two
things an LLM judge would be asked about: is every sentence supported by a chunk, and does
the answer address what the question asks.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from services.answering._refine import refine
from services.answering.llm.base import AnswerBackend, Citation, Generation, Grade, Reflection, register_backend
from services.domain import Hit
from services.errors import InputError
from services.judging import _lexical as lex
from services.judging._contradiction import contradiction as find_contradiction
from services.judging._sentences import (
    MARKERS,
    addressing_text,
    answer_sentences,
    chunk_sentences,
    sentence_support,
    strip_markers,
    support_pool,
)
from services.retrieval.embedding import encode
from services.scoring.blend import REFLECTION_MIN_SCORE

PROMPT_VERSION = "offline-1"
MODEL_ID = "extractive-mmr-v1"

# Sentence relevance to the query. Cosine alone ranks fluent paraphrases of the question's
# topic above the sentence that holds the asked-for fact; query-term overlap pulls the
# sentence naming the question's entities and terms back up.
RELEVANCE_COSINE_WEIGHT = 0.6
RELEVANCE_LEXICAL_WEIGHT = 0.4
RELEVANCE_FLOOR = 0.25  # below this a sentence is not about the question at all
RELATIVE_FLOOR = 0.6  # ...or when it is this much weaker than the best sentence
MAX_CANDIDATES = 80  # sentences read per query, in chunk rank order (segmenting is cheap)
# ...of which at most this many, those sharing most query terms, are embedded: embedding is
# the cost (~10 ms a sentence on an idle 2-core CPU). On SQuAD, 20 lost no answer recall.
EMBED_AT_MOST = 32
NEAR_DUPLICATE = 0.9  # cosine at which two sentences with the same numbers and codes say the same

# reflection_score = 0.4 grounding + 0.35 coverage + 0.25 relevance. Grounding leads, as
# it is what reflection is for, but an extractive answer is grounded by construction, so on
# its own it cannot tell a good answer from a quoted irrelevance: coverage (does the
# answer mention what the question names) carries almost as much, and semantic relevance,
# which is noisier (paraphrases score high, so do on-topic non-answers), the least.
GROUNDING_WEIGHT = 0.4
COVERAGE_WEIGHT = 0.35
RELEVANCE_WEIGHT = 0.25
SUPPORTED = 0.6  # every sentence at least this -> answer_grounded
UNSUPPORTED = 0.4  # any sentence below this -> hallucination_detected
# One unsupported sentence among well-covering ones still averages to ~0.8; an answer with
# a claim the chunks do not support must never pass the threshold, whatever else it does.
HALLUCINATION_CAP = 0.75
# An answer whose best-matching sentence contradicts what was asked (a positive statement
# for a negated question, "highest" for "lowest", 2004 for 2014, "T cells" for "B cells") is
# grounded and covers the question's words, yet does not answer it. Where the rule that
# found it holds on both measured corpora (_contradiction.RULES) it scores no better than an
# unsupported claim and grades "poor".
CONTRADICTION_CAP = UNSUPPORTED
CONTRADICTION_GRADE_CAP = 2
# Where the rule also flags right answers (on the handbook, or too many answerable SQuAD
# questions), the contradiction is a soft signal: the reflection loses this much, the grade
# nothing. The median right handbook answer reflects at 0.90 (bench/contradictions.py,
# right_reflection), so a soft flag alone leaves it at the review threshold
# (REFLECTION_MIN_SCORE, 0.8), still approved; a larger penalty would queue typical right
# answers for review on the flag alone.
SOFT_CONTRADICTION_PENALTY = 0.1
# MiniLM cosine between a question and text: ~0.2 for unrelated, ~0.7 for a direct answer.
COSINE_UNRELATED, COSINE_ANSWERING = 0.2, 0.7

_CACHE_SIZE = 8192


class OfflineBackend(AnswerBackend):
    """Extractive answers and lexical-semantic judgements; no language model is involved."""

    name = "offline"
    label = "offline (extractive)"
    is_llm = False

    def __init__(self, embedding_model: str = "all-MiniLM-L6-v2", max_sentences: int = 4,
                 mmr_lambda: float = 0.7) -> None:
        super().__init__()
        if max_sentences < 1:
            raise InputError(f"max_sentences must be at least 1, got {max_sentences}")
        if not 0.0 <= mmr_lambda <= 1.0:
            raise InputError(f"mmr_lambda must be between 0 and 1, got {mmr_lambda}")
        self.embedding_model = embedding_model
        self.max_sentences = max_sentences
        self.mmr_lambda = mmr_lambda
        # Reflection re-reads the sentences generation just embedded: keep their vectors.
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        return MODEL_ID

    # --- the interface --------------------------------------------------------------------

    def generate(self, query: str, chunks: Sequence[Hit]) -> Generation:
        return self._timed("generate", PROMPT_VERSION, lambda: self._generate(query, list(chunks)))

    def reflect(self, query: str, answer: str, chunks: Sequence[Hit]) -> Reflection:
        return self._timed("reflect", PROMPT_VERSION, lambda: self._reflect(query, answer, list(chunks)))

    def grade(self, query: str, answer: str) -> Grade:
        return self._timed("grade", PROMPT_VERSION, lambda: self._grade(query, answer))

    def identify_gaps(self, query: str, answer: str, chunks: Sequence[Hit]) -> list[str]:
        return self._timed("identify_gaps", PROMPT_VERSION, lambda: lex.missing(
            lex.query_terms(query), [strip_markers(answer), *(c.text for c in chunks)]))

    def refine_query(self, query: str, *, reason: str, gaps: Sequence[str], expansion_terms: Sequence[str]) -> str:
        return self._timed("refine_query", PROMPT_VERSION, lambda: refine(
            query, reason=reason, gaps=gaps, expansion_terms=expansion_terms))

    def decompose(self, query: str) -> list[str]:
        return self._timed("decompose", PROMPT_VERSION, lambda: lex.decompose(query))

    # --- generation -----------------------------------------------------------------------

    def _generate(self, query: str, chunks: list[Hit]) -> Generation:
        candidates = chunk_sentences(chunks, answerable_only=True, limit=MAX_CANDIDATES)
        if not query.strip() or not candidates:
            return Generation(answer="")
        terms = lex.query_terms(query)
        lexical = np.array([lex.coverage(terms, seg.scoring) if terms else 0.0 for _, _, seg in candidates])
        if len(candidates) > EMBED_AT_MOST:
            # Embedding is the cost: only the sentences sharing most query terms are embedded
            # (rank order breaks ties, so with no overlap at all the top chunks are read).
            keep = sorted(sorted(range(len(candidates)), key=lambda i: (-lexical[i], i))[:EMBED_AT_MOST])
            candidates, lexical = [candidates[i] for i in keep], lexical[keep]
        vectors = self._embed([query, *(seg.scoring for _, _, seg in candidates)])
        sentence_vectors = vectors[1:]
        cosine = np.clip(sentence_vectors @ vectors[0], 0.0, 1.0)
        if terms:
            relevance = RELEVANCE_COSINE_WEIGHT * cosine + RELEVANCE_LEXICAL_WEIGHT * lexical
        else:
            relevance = cosine
        picked = self._mmr(relevance, sentence_vectors, [lex.facts(seg.scoring) for _, _, seg in candidates])
        if not picked:
            return Generation(answer="")
        picked.sort(key=lambda i: (candidates[i][0], candidates[i][1]))
        parts, citations = [], []
        for i in picked:
            chunk_index, _, seg = candidates[i]
            hit = chunks[chunk_index]
            parts.append(f"{seg.display} [{chunk_index + 1}]")
            citations.append(Citation(chunk_index + 1, hit.chunk_id, hit.document_id, hit.external_id, seg.quote))
        return Generation(answer=" ".join(parts), citations=tuple(citations))

    def _mmr(self, relevance: np.ndarray, vectors: np.ndarray, facts: list[frozenset[str]]) -> list[int]:
        floor = max(RELEVANCE_FLOOR, RELATIVE_FLOOR * float(relevance.max()))
        eligible = [i for i in range(len(relevance)) if relevance[i] >= floor]
        similarity = vectors @ vectors.T
        picked: list[int] = []
        while eligible and len(picked) < self.max_sentences:
            def gain(i: int) -> float:
                redundancy = max((float(similarity[i, j]) for j in picked), default=0.0)
                return self.mmr_lambda * float(relevance[i]) - (1 - self.mmr_lambda) * redundancy
            best = max(eligible, key=lambda i: (round(gain(i), 6), -i))  # ties: earlier chunk wins
            picked.append(best)
            # MMR's penalty only reorders; once the eligible run out it would still take the
            # same statement reworded. Table rows are as similar but state different values.
            eligible = [i for i in eligible if i != best and not (
                similarity[i, best] >= NEAR_DUPLICATE and facts[i] == facts[best])]
        return picked

    # --- judging --------------------------------------------------------------------------

    def _reflect(self, query: str, answer: str, chunks: list[Hit]) -> Reflection:
        sentences = answer_sentences(answer)
        cited = sorted({int(n) for group in MARKERS.findall(answer) for n in re.split(r"\s*,\s*", group)})
        if not sentences:
            return Reflection(False, False, 0.0, tuple(map(str, cited)), "no answer was produced", True, ())
        plain = " ".join(sentences)
        pool = support_pool(sentences, chunks)
        vectors = self._embed([query, plain, *sentences, *pool])  # one batch; most are cached already
        support = sentence_support(sentences, vectors[2:2 + len(sentences)], pool, vectors[2 + len(sentences):])
        grounding = float(np.mean(support))
        terms = lex.query_terms(query)
        addressing = addressing_text(query, terms, sentences)
        coverage = lex.coverage(terms, addressing)
        relevance = self._relevance(query, plain)
        score = GROUNDING_WEIGHT * grounding + COVERAGE_WEIGHT * coverage + RELEVANCE_WEIGHT * relevance
        if min(support) < UNSUPPORTED:
            score = min(score, HALLUCINATION_CAP)
        contradiction = find_contradiction(query, terms, sentences)
        if contradiction is not None:
            score = (min(score, CONTRADICTION_CAP) if contradiction.hard
                     else max(0.0, score - SOFT_CONTRADICTION_PENALTY))
        deficits = {"grounding": GROUNDING_WEIGHT * (1 - grounding), "coverage": COVERAGE_WEIGHT * (1 - coverage),
                    "relevance": RELEVANCE_WEIGHT * (1 - relevance)}
        weakest = max(deficits, key=lambda k: deficits[k])
        absent = lex.missing(terms, [addressing])
        low = int(np.argmin(support))
        weak_sentence = f"sentence {low + 1} is weakly supported ({support[low]:.2f})"
        if support[low] < UNSUPPORTED:  # an unsupported claim outranks everything else
            reason = weak_sentence + (f"; answer does not mention {lex.quoted_list(absent)}" if absent else "")
        elif contradiction is not None:
            reason = contradiction.reason
        elif weakest == "coverage" and absent:
            reason = (f"answer does not mention {lex.quoted_list(absent)} from the question" if addressing == plain
                      else f"no sentence of the answer names all the question asks about: the closest "
                           f"does not mention {lex.quoted_list(absent)}")
        elif weakest == "relevance":
            reason = f"answer is only loosely related to the question (relevance {relevance:.2f})"
        else:
            reason = (weak_sentence if support[low] < SUPPORTED
                      else f"every sentence is supported by the chunks (lowest {support[low]:.2f})")
        if score >= REFLECTION_MIN_SCORE:
            reason = f"answer is grounded and addresses the question; weakest part: {reason}"
        return Reflection(
            answer_grounded=bool(min(support) >= SUPPORTED),
            hallucination_detected=bool(min(support) < UNSUPPORTED),
            reflection_score=round(float(score), 4),
            sources_cited=tuple(map(str, cited)),
            reflection_reason=reason,
            needs_regeneration=bool(score < REFLECTION_MIN_SCORE),
            sentence_support=tuple(round(float(s), 4) for s in support),
        )

    def _relevance(self, query: str, answer: str) -> float:
        """cos(query, answer) mapped from [COSINE_UNRELATED, COSINE_ANSWERING] onto [0, 1]."""
        if not query.strip() or not answer.strip():
            return 0.0
        vectors = self._embed([query, answer])
        cosine = float(vectors[0] @ vectors[1])
        return float(np.clip((cosine - COSINE_UNRELATED) / (COSINE_ANSWERING - COSINE_UNRELATED), 0.0, 1.0))

    def _grade(self, query: str, answer: str) -> Grade:
        sentences = answer_sentences(answer)
        plain = " ".join(sentences)  # as reflect reads it: its embedding is cached
        terms = lex.query_terms(query)
        addressing = addressing_text(query, terms, sentences)
        coverage = lex.coverage(terms, addressing) if plain else 0.0
        relevance = self._relevance(query, plain)
        if not plain:
            score = 1
        elif coverage >= 0.9 and relevance >= 0.7:
            score = 5
        elif coverage >= 0.7 and relevance >= 0.5:
            score = 4
        elif coverage >= 0.5 or (coverage >= 0.3 and relevance >= 0.5):
            score = 3
        elif coverage > 0 or relevance >= 0.3:
            score = 2
        else:
            score = 1
        contradiction = find_contradiction(query, terms, sentences)
        if contradiction is not None and contradiction.hard:
            score = min(score, CONTRADICTION_GRADE_CAP)
        gaps = lex.missing(terms, [addressing])
        # A follow-up query per gap: the missing term first, with the question's other terms.
        refinements = tuple(" ".join([gap, *[t.surface for t in terms if t.surface != gap][:4]]) for gap in gaps[:3])
        return Grade(score, tuple(gaps), refinements)

    # --- embeddings -----------------------------------------------------------------------

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors for `texts`, encoding only those not seen before, in one batch."""
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
            if missing:
                for text, vector in zip(missing, encode(self.embedding_model, missing), strict=True):
                    self._vectors[text] = vector
                while len(self._vectors) > _CACHE_SIZE:
                    self._vectors.popitem(last=False)
            for text in texts:
                self._vectors.move_to_end(text)
            return np.stack([self._vectors[t] for t in texts])


register_backend("offline", OfflineBackend)
