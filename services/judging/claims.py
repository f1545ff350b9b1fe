"""An answer read as claims, each with what it adds to the question.

Words an answer shares with its question prove nothing: a restated question carries every
one of them whether the one fact it adds is right or invented. What a claim adds (the words,
names, numbers and dates the question does not hold) is what the contexts must support. A
concise answer ("Osaka", "in 1066", "yes") is one claim that is all addition; an abstention
("I don't know") claims nothing and is its own class.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from services.judging._framing import unframed
from services.judging._lexical import PHRASING
from services.judging._morphology import related_in
from services.judging._sentences import answer_sentences, strip_markers
from services.judging.answer_type import asks_yes_or_no
from services.judging.atoms import CODE, CONCISE_WORDS, NUMBER, YEAR, Atom, atoms, holds
from services.retrieval.text import tokenize

# An abstention says the system does not know or the sources do not say; a short answer
# saying so and naming no value is one ("The manual does not say how often, but J2 takes
# 2 kg" answers).
_ABSTENTION = re.compile(
    r"\b(?:i\s+(?:do\s+not|don't|don’t|cannot|can't|can’t)\s+(?:know|tell|say|answer|find)|"
    r"(?:not|no)\s+(?:enough|sufficient)\s+(?:information|context|data|evidence)|"
    r"(?:does|do|did)\s+not\s+(?:say|mention|contain|specify|state|include|provide)|"
    r"(?:doesn't|doesn’t|don't|don’t)\s+(?:say|mention|contain|specify|state|include|provide)|"
    r"(?:cannot|can't|can’t|unable\s+to)\s+(?:be\s+)?(?:answer|determine|find|say|tell)|"
    r"no\s+(?:answer|information|mention)|unknown|unanswerable|n/?a)\b",
    re.IGNORECASE,
)
ABSTENTION_MAX_WORDS = 25
# "Yes," or "No." opening an answer says which way it answers a yes/no question: not a word the
# contexts must hold. Only set off by punctuation or alone: "No checking is performed" negates.
_POLAR = re.compile(r"^\s*[*_]{0,2}(?P<word>yes|no)[*_]{0,2}(?:\s*(?:[,.;:!]+|[–—]+)|\s+-+\s|\s*$)\s*", re.IGNORECASE)
# "isn't", "won't": a verb and its "n't" are no content words ("isn" and "won" would be).
_NEGATED_VERB = re.compile(r"\b\w+n['’]t\b", re.IGNORECASE)
_PHRASING_STEMS = frozenset(s for word in PHRASING for s in tokenize(word))


@dataclass(frozen=True)
class Claim:
    """One sentence of an answer and what it adds to the question."""

    text: str
    added_stems: tuple[str, ...]  # content-word stems the question does not hold, in order
    added_atoms: tuple[Atom, ...]  # names, numbers, dates and codes the question does not hold
    added_words: tuple[str, ...]  # the added words as written, for the reader


def polar_reply(answer: str) -> tuple[str | None, str]:
    """The 'yes' or 'no' an answer opens with, if any, and the rest of it: ("no", "it returns a
    view.") for "No, it returns a view."; (None, answer) for an answer that opens otherwise."""
    plain = strip_markers(answer)
    match = _POLAR.match(plain)
    if match is None:
        return None, answer
    return match.group("word").lower(), plain[match.end():]


def what_is_said(question: str, answer: str) -> tuple[str, str | None]:
    """The text whose claims are read, and "yes" or "no" when that is the whole answer. Where the
    answer says it got its claims from ("According to the context, ..."), how sure it is and
    its courtesies are no claims (unframed). A yes or no opening the answer to a yes/no
    question says which way it answers, not a fact to find: what follows it is the claim. A
    bare one asserts the question's own statement (or denies it); that statement is what the
    contexts are read for (services.judging.polarity). A reply whose rest only echoes it ("No,
    it is not.", "Yes, they do.") is bare: its function words claim nothing to find."""
    said = unframed(answer)
    reply, rest = polar_reply(said) if asks_yes_or_no(question) else (None, said)
    if reply is None:
        return said, None
    rest = unframed(rest)
    return (rest, None) if tokenize(_NEGATED_VERB.sub(" not", rest)) else (question, reply)


def is_abstention(answer: str, question: str = "") -> bool:
    """Empty, or a short answer saying it cannot answer and giving no number, date or code. Words
    the question holds say nothing of the answer: "What happens to an unknown escape ...: the
    backslash is left in the result." restates 'unknown' and answers."""
    plain = strip_markers(answer).strip()
    if not plain:
        return True
    asked = question.lower()
    return (len(plain.split()) <= ABSTENTION_MAX_WORDS
            and any(m.group(0).lower() not in asked for m in _ABSTENTION.finditer(plain))
            and not any(a.kind in (NUMBER, YEAR, CODE) for a in atoms(plain)))


def is_concise(answer: str) -> bool:
    return len(strip_markers(answer).split()) <= CONCISE_WORDS


# Kept: an answer's claims are read for its verdict and for its grade, and by intake
# once more to learn what the judge will embed (services.intake.batch), each time the same.
@lru_cache(maxsize=1024)
def answer_claims(question: str, answer: str) -> tuple[Claim, ...]:
    """The answer's sentences as claims (a concise answer is one claim)."""
    sentences = answer_sentences(answer)
    if not sentences and strip_markers(answer).strip():
        sentences = [strip_markers(answer).strip()]
    asked = frozenset(tokenize(question))
    return tuple(_claim(question, asked, sentence) for sentence in sentences)


def _claim(question: str, asked: frozenset[str], sentence: str) -> Claim:
    added_atoms = tuple(a for a in atoms(sentence) if not holds(a, question))
    stems, words = [], []
    for word in re.findall(r"[^\W_]+", sentence):
        for stem in tokenize(word):
            if stem in asked or stem in _PHRASING_STEMS or related_in(stem, asked) or stem in stems:
                continue
            stems.append(stem)
            words.append(word)
    return Claim(sentence, tuple(stems), added_atoms, tuple(words))
