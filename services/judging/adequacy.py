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
from services.judging.answer_type import CHOICE, expected_kind, type_fit
from services.judging.claims import answer_claims, is_abstention, is_concise

CONTRADICTION_GRADE_CAP = 2
# A concise answer of the asked kind is GOOD, not EXCELLENT: whether it is right is the
# support check's business, which reads the contexts; grading reads only the question.
_CONCISE_GRADE = {1.0: 4, 0.5: 3, 0.0: 2}


@dataclass(frozen=True)
class Adequacy:
    score: int  # 1 (inadequate) .. 5 (excellent)
    gaps: tuple[str, ...]  # question terms the answer leaves unaddressed
    refinements: tuple[str, ...]  # a follow-up query per gap


def grade_answer(question: str, answer: str, *, relevance: float) -> Adequacy:
    """`relevance`: the answer's semantic closeness to the question, 0-1."""
    sentences = answer_sentences(answer)
    terms = lex.query_terms(question)
    if not sentences or is_abstention(answer):
        return Adequacy(1, *_gaps(terms, ""))
    claims = answer_claims(question, answer)
    if not any(c.added_stems or c.added_atoms for c in claims) and expected_kind(question).kind != CHOICE:
        return Adequacy(2, (), ())  # a restated question answers nothing
    if is_concise(answer):
        added = tuple(a for c in claims for a in c.added_atoms)
        fit = type_fit(expected_kind(question), added, " ".join(w for c in claims for w in c.added_words))
        return Adequacy(_CONCISE_GRADE[fit], (), ())
    addressing = addressing_text(question, terms, sentences)
    coverage = lex.coverage(terms, addressing)
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
    found = contradiction(question, terms, sentences)
    if found is not None and found.hard:
        score = min(score, CONTRADICTION_GRADE_CAP)
    return Adequacy(score, *_gaps(terms, addressing))


def _gaps(terms: tuple[lex.Term, ...], addressing: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The question's terms `addressing` leaves out, and a follow-up query per gap (the missing
    term first, with the question's other terms)."""
    gaps = lex.missing(terms, [addressing])
    refinements = tuple(" ".join([gap, *[t.surface for t in terms if t.surface != gap][:4]]) for gap in gaps[:3])
    return tuple(gaps), refinements
