"""The judge's signals that compare meaning: cosines of the packaged embedding model between the
question, the answer's claims and the context sentences that support them.

services.judging.features reads them beside the word signals; each is named there for what it
measures. A concise claim is read as its question (what it adds moves the question's vector
little); a context sentence is read in its context where the embedder can.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from services.judging._lexical import Term, coverage
from services.judging.answer_type import Expected, chosen_option, without_options
from services.judging.claims import is_concise
from services.judging.context_sentences import ContextSentence
from services.judging.evidence import ClaimEvidence
from services.retrieval.text import tokenize

Embed = Callable[[list[str]], np.ndarray]  # texts -> unit vectors, one row each
# context sentences -> unit vectors: read in their context where the embedder can
# (services.judging.vectors.SentenceEmbedder.in_context), else alone
SentenceVectors = Callable[[Sequence[ContextSentence]], np.ndarray]

# MiniLM cosine between a question and text: ~0.2 for unrelated, ~0.7 for a direct answer.
COSINE_UNRELATED, COSINE_ANSWERING = 0.2, 0.7
MARGIN_SENTENCES = 12  # context sentences embedded to find the one most about the question
NEARNESS_SENTENCES = 40  # sentences of the evidence's context read for where it speaks of the question


def sentence_reader(embed: Embed, contexts: Sequence[str]) -> SentenceVectors:
    """How `embed` reads the sentences of `contexts`: in their context when it can, alone
    when it embeds texts only (the recording in services.intake.batch, a test's embedder)."""
    in_context = getattr(embed, "in_context", None)
    if in_context is None:
        return lambda sentences: embed([s.text for s in sentences])
    return lambda sentences: in_context(contexts, sentences)  # type: ignore[no-any-return]


def claim_statement(question: str, claim: str) -> str:
    """A concise claim is read with its question ("Osaka" says nothing alone)."""
    return f"{question} {claim}" if is_concise(claim) else claim


# Where meaning is compared, a concise claim read with its question is given its question's
# vector: the few words it adds move that vector little (cos(question, question + claim) >=
# COSINE_ANSWERING for 99.2% of the development set's concise answers, 2026-11-28), and
# embedding each such pair was model work no other signal needed.
def claim_relevance(question: str, claim: str, embed: Embed) -> float:
    """How much the claim is about the question, in [0, 1]; a concise claim, read as its
    question, is wholly about it."""
    return 1.0 if is_concise(claim) else relevance_between(question, claim, embed)


def relevance_between(question: str, text: str, embed: Embed) -> float:
    """cos(question, text) mapped from [COSINE_UNRELATED, COSINE_ANSWERING] onto [0, 1]."""
    vectors = embed([question, text])
    return _mapped(float(vectors[0] @ vectors[1]))


def _mapped(cosine: float) -> float:
    return float(np.clip((cosine - COSINE_UNRELATED) / (COSINE_ANSWERING - COSINE_UNRELATED), 0.0, 1.0))


def evidence_margin_and_relevance(question: str, answering: ClaimEvidence, pool: Sequence[ContextSentence],
                                  terms: Sequence[Term], embed: Embed, sentences: SentenceVectors) -> tuple[float, float]:
    """cos(question, evidence) less the best cos(question, sentence) over the context sentences
    that name most of the question (at most MARGIN_SENTENCES of them): 0 when the answer comes
    from the sentence most about the question, below 0 when another sentence is more so; and
    how much the evidence itself is about the question (as relevance_between maps it). Read on
    the context's sentence, not the answer, so a concise answer and a sentence quoting the same
    evidence read alike, and an answer echoing the question gains nothing by it."""
    if answering.evidence is None:
        return -1.0, 0.0
    ranked = sorted(pool, key=lambda s: -coverage(terms, s.speaks_of))[:MARGIN_SENTENCES] if terms else pool[:MARGIN_SENTENCES]
    cosines = sentences([answering.evidence, *ranked]) @ embed([question])[0]
    return float(np.clip(cosines[0] - cosines.max(), -1.0, 0.0)), _mapped(float(cosines[0]))


def evidence_nearness(question: str, answering: ClaimEvidence, pool: Sequence[ContextSentence], embed: Embed,
                      sentences: SentenceVectors) -> float:
    """1 / (1 + how many sentences of its context lie between the evidence and the sentence of
    that context most like the question): a passage answers near where it speaks of the
    question; a name or phrase from elsewhere in it sits farther off."""
    if answering.evidence is None:
        return 0.0
    own = [s for s in pool if s.context == answering.evidence.context][:NEARNESS_SENTENCES]
    if answering.evidence not in own:
        return 0.0
    top = int(np.argmax(sentences(own) @ embed([question])[0]))
    return 1.0 / (1.0 + abs(own.index(answering.evidence) - top))


def option_relevance(expected: Expected, question: str, answer: str, pool: Sequence[ContextSentence],
                     embed: Embed, read: SentenceVectors) -> float:
    """cos(question without its options, the sentence naming the chosen option) less the same for
    the other option (-1..1; 0 when the answer names neither, or one sentence names both):
    the option a passage states in its sentence about the question is the one it pairs with it."""
    chosen = chosen_option(expected, answer)
    if chosen is None:
        return 0.0
    sentences = []
    for option in expected.options:
        own = set(tokenize(option))
        best = max(pool, key=lambda s: len(own & set(s.stems)), default=None)
        if best is None or not own & set(best.stems):
            return 0.0
        sentences.append(best)
    if len({s.text for s in sentences}) < len(sentences):
        return 0.0
    cosines = read(sentences) @ embed([without_options(question, expected.options)])[0]
    others = [c for i, c in enumerate(cosines) if i != chosen]
    return float(np.clip(cosines[chosen] - max(others), -1.0, 1.0))


def similarity(question: str, adding: Sequence[ClaimEvidence], embed: Embed, sentences: SentenceVectors) -> float:
    """The lowest cosine between a claim (a concise one read as its question) and its evidence."""
    pairs = [(r.claim.text, r.evidence) for r in adding if r.evidence is not None]
    if not pairs:
        return 0.0
    claims = embed([question if is_concise(claim) else claim for claim, _ in pairs])
    evidence = sentences([sentence for _, sentence in pairs])
    return float(np.clip((claims * evidence).sum(axis=1), 0.0, 1.0).min())
