"""Grade 1-5: does the answer answer what was asked, read by its style.

A sentence answer is graded by how much of the question its addressing sentence names and how
close it sits to the question in meaning. A concise answer ("Osaka", "1066", "yes") names none
of the question's words by design: it is graded as an answer to the question, by whether it is
of the kind asked for ("where" wants a place), never for failing to repeat the question. An
answer that only restates the question, or abstains, answers nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.judging import _lexical as lex
from services.judging._contradiction import contradiction
from services.judging._sentences import addressing_text, answer_sentences
from services.judging.answer_type import CHOICE, expected_kind, type_fit, words_not_asked
from services.judging.claims import answer_claims, is_abstention, is_concise
from services.judging.semantic import Embed, relevance_between

CONTRADICTION_GRADE_CAP = 2
# A concise answer of the asked kind is GOOD, not EXCELLENT: whether it is right is the
# support check's business, which reads the contexts; grading reads only the question.
_CONCISE_GRADE = {1.0: 4, 0.5: 3, 0.0: 2}
ADDRESSING_COVERAGE, ADDRESSING_RELEVANCE = 0.35 / 0.6, 0.25 / 0.6


@dataclass(frozen=True)
class Adequacy:
    score: int  # 1 (inadequate) .. 5 (excellent)
    gaps: tuple[str, ...]  # question terms the answer leaves unaddressed
    refinements: tuple[str, ...]  # a follow-up query per gap


def grade_answer(question: str, answer: str, *, relevance: float) -> Adequacy:
    """`relevance`: the answer's semantic closeness to the question, 0-1."""
    terms = lex.query_terms(question)
    read = _read(question, answer, terms)
    if read is None:
        return Adequacy(1, *_gaps(terms, ""))
    if isinstance(read, float):  # a restatement (0.0: graded as a concise answer of no kind) or a concise answer
        return Adequacy(_CONCISE_GRADE[read], (), ())
    coverage = lex.coverage(terms, read)
    if coverage >= 0.9 and relevance >= 0.7:
        score = 5
    elif coverage >= 0.7 and relevance >= 0.5:
        score = 4
    elif coverage >= 0.5 or (coverage >= 0.3 and relevance >= 0.5):
        score = 3
    elif coverage > 0 or relevance >= 0.3:
        score = 2
    else:
        score = 1
    found = contradiction(question, terms, answer_sentences(answer))
    if found is not None and found.hard:
        score = min(score, CONTRADICTION_GRADE_CAP)
    return Adequacy(score, *_gaps(terms, read))


def addressing(question: str, answer: str, *, relevance: float) -> float:
    """How squarely the answer takes up what was asked, 0-1: the grade's reading as a number
    (seed 004's reflection weighs it beside grounding). A sentence answer: the share of the
    question's terms its addressing sentence names and its closeness in meaning, weighed as
    the offline judge before services/judging weighed them (0.35 : 0.25); a concise answer:
    whether it is of the kind asked for; an abstention or a restatement: 0."""
    terms = lex.query_terms(question)
    read = _read(question, answer, terms)
    if read is None:
        return 0.0
    if isinstance(read, float):
        return read
    return ADDRESSING_COVERAGE * lex.coverage(terms, read) + ADDRESSING_RELEVANCE * relevance


def answer_relevance(question: str, answer: str, embed: Embed) -> float:
    """How much the answer's plain text is about the question, in [0, 1] (semantic.relevance_between)."""
    plain = " ".join(answer_sentences(answer))
    if not question.strip() or not plain:
        return 0.0
    return relevance_between(question, plain, embed)


def _read(question: str, answer: str, terms: tuple[lex.Term, ...]) -> str | float | None:
    """None for no answer; for an answer judged by kind, a number (0.0 for a restatement, else
    a concise answer's type fit); otherwise the text that has to name what was asked."""
    sentences = answer_sentences(answer)
    if not sentences or is_abstention(answer, question):
        return None
    claims = answer_claims(question, answer)
    if not any(c.added_stems or c.added_atoms for c in claims) and expected_kind(question).kind != CHOICE:
        return 0.0  # a restated question answers nothing
    if is_concise(answer):
        added = tuple(a for c in claims for a in c.added_atoms)
        return type_fit(expected_kind(question), added, words_not_asked(question, answer), answer)
    return addressing_text(question, terms, sentences)


def _gaps(terms: tuple[lex.Term, ...], addressing: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The question's terms `addressing` leaves out, and a follow-up query per gap (the missing
    term first, with the question's other terms)."""
    gaps = lex.missing(terms, [addressing])
    refinements = tuple(" ".join([gap, *[t.surface for t in terms if t.surface != gap][:4]]) for gap in gaps[:3])
    return tuple(gaps), refinements
