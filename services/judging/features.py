"""The judge's signals for one answer: what the fitted model (services.judging.model) combines.

Every signal is a number in [0, 1] or [-1, 1], named for what it measures. They are computed
for answers of every style alike (a concise span, a sentence, a restated question) so that
one model can weigh them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from services.judging._contradiction import contradiction
from services.judging._lexical import Term, query_terms
from services.judging.answer_type import CHOICE, Expected, chosen_option, expected_kind, type_fit
from services.judging.atoms import CONCISE_WORDS
from services.judging.claims import answer_claims, is_abstention, is_concise
from services.judging.evidence import ClaimEvidence, ContextSentence, context_sentences, locality, read_claim
from services.retrieval.text import tokenize

Embed = Callable[[list[str]], np.ndarray]  # texts -> unit vectors, one row each

FEATURES = (
    "abstains", "adds_nothing", "unsupported_atom", "atom_support", "word_support", "evidence_support",
    "question_coverage", "locality", "locality_margin", "type_fit", "option_margin", "reversal",
    "contradiction", "similarity", "relevance", "concise",
)
# MiniLM cosine between a question and text: ~0.2 for unrelated, ~0.7 for a direct answer.
COSINE_UNRELATED, COSINE_ANSWERING = 0.2, 0.7


@dataclass(frozen=True)
class Reading:
    """The signals, and the per-claim evidence they were read from (for the reason and the UI)."""

    features: dict[str, float]
    claims: tuple[ClaimEvidence, ...]
    expected: Expected
    abstains: bool
    contradiction_reason: str | None


def read_answer(question: str, answer: str, contexts: Sequence[str], *, embed: Embed | None) -> Reading:
    expected = expected_kind(question)
    features = dict.fromkeys(FEATURES, 0.0)
    if is_abstention(answer):
        features["abstains"] = 1.0
        return Reading(features, (), expected, True, None)
    terms = query_terms(question)
    pool = context_sentences(contexts)
    avoid = frozenset(s for option in expected.options for s in tokenize(option))
    # The option an answer picks is what it adds: read it against the question without its options.
    claims = answer_claims(_without(question, expected.options), answer)
    read = tuple(read_claim(question, terms, c, pool, contexts, avoid=avoid) for c in claims)
    adding = [r for r in read if r.claim.added_stems or r.claim.added_atoms]
    features["concise"] = float(is_concise(answer))
    features["adds_nothing"] = float(not adding)
    all_atoms = [a for r in adding for a in r.claim.added_atoms]
    missing_atoms = [a for r in adding for a in r.unsupported_atoms]
    features["unsupported_atom"] = float(bool(missing_atoms))
    features["atom_support"] = 1.0 - len(missing_atoms) / len(all_atoms) if all_atoms else 1.0
    if adding:
        features["word_support"] = min(r.word_support for r in adding)
        features["evidence_support"] = min(r.evidence_support for r in adding)
        # The claim that answers is the one whose evidence is most about the question.
        answering = max(adding, key=lambda r: (r.question_coverage, r.locality))
        features["question_coverage"] = answering.question_coverage
        features["locality"] = max(r.locality for r in adding)
        features["locality_margin"] = float(np.clip(max(r.locality - r.rival_locality for r in adding), -1.0, 1.0))
    added_text = " ".join(w for r in adding for w in r.claim.added_words)
    features["type_fit"] = type_fit(expected, tuple(all_atoms), added_text)
    if expected.kind == CHOICE:
        features["option_margin"] = _option_margin(expected, answer, terms, pool, avoid)
    features["reversal"] = float(any(r.reversal for r in read))
    found = contradiction(question, terms, [r.claim.text for r in read])
    if found is not None:
        features["contradiction"] = 1.0 if found.hard else 0.5
    if embed is not None and adding:
        features["similarity"] = _similarity(question, adding, embed)
        features["relevance"] = _relevance(question, answering.claim.text, embed)
    return Reading(features, read, expected, False, found.reason if found else None)


def _without(question: str, options: Sequence[str]) -> str:
    for option in options:
        question = question.replace(option, " ")
    return question


def _option_margin(expected: Expected, answer: str, terms: Sequence[Term], pool: Sequence[ContextSentence],
                   avoid: frozenset[str]) -> float:
    """How much nearer the question's words the contexts put the chosen option than the other
    (-1..1; 0 when the answer names neither or both)."""
    chosen = chosen_option(expected, answer)
    if chosen is None:
        return 0.0
    asked = [s for t in terms if not t.negation for s in t.stems if s not in avoid]
    reach = []
    for option in expected.options:
        own = tuple(tokenize(option))
        reach.append(max((locality(asked, own, s.stems) for s in pool if set(own) & set(s.stems)), default=0.0))
    others = [r for i, r in enumerate(reach) if i != chosen]
    return float(np.clip(reach[chosen] - max(others, default=0.0), -1.0, 1.0))


def _statement(question: str, claim: str) -> str:
    """A concise claim is read with its question ("Osaka" says nothing alone)."""
    return f"{question} {claim}" if len(claim.split()) <= CONCISE_WORDS else claim


def _relevance(question: str, claim: str, embed: Embed) -> float:
    """cos(question, claim) mapped from [COSINE_UNRELATED, COSINE_ANSWERING] onto [0, 1]."""
    vectors = embed([question, _statement(question, claim)])
    cosine = float(vectors[0] @ vectors[1])
    return float(np.clip((cosine - COSINE_UNRELATED) / (COSINE_ANSWERING - COSINE_UNRELATED), 0.0, 1.0))


def _similarity(question: str, adding: Sequence[ClaimEvidence], embed: Embed) -> float:
    """The lowest cosine between a claim (a concise one read with its question) and its evidence."""
    pairs = [(_statement(question, r.claim.text), r.evidence.text) for r in adding if r.evidence is not None]
    if not pairs:
        return 0.0
    vectors = embed([t for pair in pairs for t in pair])
    return float(min(np.clip(vectors[2 * i] @ vectors[2 * i + 1], 0.0, 1.0) for i in range(len(pairs))))
