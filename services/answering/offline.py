"""The offline answer backend: extractive MMR answers with citations, scored against the chunks.

It is a deterministic method, not a language model. An answer is up to `max_sentences`
sentences taken verbatim from the retrieved chunks, picked by Maximal Marginal Relevance
over a blend of embedding similarity and query-term overlap, each followed by `[n]`, the
1-based position of its chunk. Reflection and grading are the offline judge's
(services.judging): is what each sentence adds supported by a chunk, and does the answer
address what the question asks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from services.answering._refine import refine
from services.answering.llm.base import (
    AnswerBackend,
    Citation,
    Generation,
    Grade,
    Reflection,
    gap_query_of,
    register_backend,
)
from services.domain import Hit
from services.errors import InputError
from services.judging import Verdict, judge_answer
from services.judging import _lexical as lex
from services.judging._sentences import MARKERS, chunk_sentences, strip_markers
from services.judging.adequacy import addressing, answer_relevance, grade_answer
from services.judging.semantic import Embed
from services.judging.vectors import cached_embedder
from services.judging.verdict import ABSTAINED, UNCHECKED
from services.scoring.blend import REFLECTION_MIN_SCORE

PROMPT_VERSION = "offline-3"  # 2: judged by services.judging; 3: reflection = P(supported) with addressing
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
# The reflection score: P(supported)'s weight; addressing the question has the rest (seed 004).
GROUNDING_WEIGHT = 0.4

class OfflineBackend(AnswerBackend):
    """Extractive answers and lexical-semantic judgements; no language model is involved."""

    name = "offline"
    label = "offline (extractive)"
    is_llm = False
    reflects_by_judge = True

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
        # The judge re-reads the sentences generation just embedded: one cache for both.
        self._embed = cached_embedder(embedding_model)

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
        candidates = _candidates(chunks)
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

    def judge(self, query: str, answer: str, chunks: Sequence[Hit]) -> Verdict:
        """The offline judge (services.judging) on the chunks' texts."""
        return judge_answer(query, answer, [c.text for c in chunks], embed=self._embed)

    def _reflect(self, query: str, answer: str, chunks: list[Hit]) -> Reflection:
        return reflection_from_verdict(self.judge(query, answer, chunks), query, answer, self._embed)

    def _grade(self, query: str, answer: str) -> Grade:
        adequacy = grade_answer(query, answer, relevance=answer_relevance(query, answer, self._embed))
        return Grade(adequacy.score, adequacy.gaps, adequacy.refinements)



def _candidates(chunks: list[Hit]) -> list[tuple[int, int, lex.Segment]]:
    """The sentences generation picks from: the question's chunks' first MAX_CANDIDATES, and
    the additional context's (gap queries' passages, after them) up to as many again, so the
    question's own chunks cannot crowd out what was searched for their gaps."""
    own = [i for i, c in enumerate(chunks) if gap_query_of(c) is None]
    extra = [i for i, c in enumerate(chunks) if gap_query_of(c) is not None]
    found = [(own[i], p, seg) for i, p, seg in
             chunk_sentences([chunks[i] for i in own], answerable_only=True, limit=MAX_CANDIDATES)]
    seen = {seg.scoring for _, _, seg in found}
    found += [(extra[i], p, seg) for i, p, seg in
              chunk_sentences([chunks[i] for i in extra], answerable_only=True, limit=MAX_CANDIDATES)
              if seg.scoring not in seen]
    return found


def reflection_from_verdict(verdict: Verdict, query: str, answer: str, embed: Embed) -> Reflection:
    """Seed 004's reflection read off the judge's verdict: grounded, hallucinated and the
    reason come from the same claims, so they agree. Its score weighs the two things the seed
    asks of an answer, grounded (P(supported)) and addressing the question (adequacy's
    reading), as the offline judge before services/judging weighed them: P(supported) alone
    cannot tell a quoted sentence that answers from a quoted sentence about the topic that does
    not, and on our corpora the workbench's own answers fell from 0.735 to 0.660 (python-
    reference) without it (README: *How the judge decides*). An answer the verdict finds
    ungrounded (a name or number no context holds, a turned-around word) or contradicting the
    question by a rule that holds is held at its P."""
    cited = sorted({int(n) for group in MARKERS.findall(answer) for n in re.split(r"\s*,\s*", group)})
    p = verdict.p_supported
    addresses = addressing(query, answer, relevance=answer_relevance(query, answer, embed))
    score = GROUNDING_WEIGHT * p + (1 - GROUNDING_WEIGHT) * addresses
    if not verdict.grounded or verdict.features.get("contradiction", 0.0) >= 1.0:
        score = min(score, p)
    return Reflection(
        answer_grounded=verdict.grounded,
        hallucination_detected=bool(verdict.unsupported_words) or any(c.reversed for c in verdict.claims),
        reflection_score=round(score, 4),
        sources_cited=tuple(map(str, cited)),
        reflection_reason=verdict.reason if verdict.label in (ABSTAINED, UNCHECKED)
        else f"{verdict.reason}; addresses the question {addresses:.2f}",
        needs_regeneration=score < REFLECTION_MIN_SCORE,
        sentence_support=tuple(c.support for c in verdict.claims),
    )


register_backend("offline", OfflineBackend)
