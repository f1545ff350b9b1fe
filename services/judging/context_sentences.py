"""The contexts' sentences as the judge reads them, and what each speaks of.

A context is segmented into sentences (hard-wrapped lines joined first); a sentence opening with
a pronoun or a definite description ("Its plant ...", "The company has ...") speaks of the
subject of the sentence before it, which it carries as its antecedent; semicolons split a
sentence into clauses, each saying its own thing. services.judging.evidence reads claims
against these sentences, services.judging.vectors embeds them in their context.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from services.judging._segments import clean, segment_chunk
from services.retrieval.text import STOPWORDS, tokenize


@dataclass(frozen=True)
class ContextSentence:
    context: int  # 0-based index of its context
    text: str  # as written (codes keep their underscores)
    stems: tuple[str, ...]  # in order, for distances
    # What the pronoun opening this sentence stands for, the subject of the sentence before it
    # ("Hann window" for "It is also known as the Cosine Bell." after "The Hann window is a
    # taper ..."): what this sentence speaks of is named there.
    antecedent: str = ""
    antecedent_stems: tuple[str, ...] = ()
    # The stems of each clause, when semicolons join several ("The external E-stop is category 1
    # by default; the pendant E-stop is always category 0."): each says its own thing of its own
    # subject, so an answer's nearness to the question is read within its clause. Empty for one.
    clauses: tuple[tuple[str, ...], ...] = ()

    @property
    def speaks_of(self) -> str:
        """The sentence with its antecedent: the text the question's words are looked for in."""
        return f"{self.antecedent} {self.text}" if self.antecedent else self.text


def context_sentences(contexts: Sequence[str]) -> tuple[ContextSentence, ...]:
    return tuple(s for i, text in enumerate(contexts) for s in _sentences_of(i, text))


# An indented line going on in lower case continues the sentence above it (reference docs
# wrap at ~80 columns and indent): a hard wrap, not a sentence's end. Unindented lines are
# left to the segmenter, which joins those it can tell apart from list items and rows.
_HARD_WRAP = re.compile(r"(?<![.!?:])[ \t]*\n[ \t]+(?=[a-z(\"'`])")


def unwrapped(text: str) -> str:
    """`text` with its hard-wrapped lines joined, as its sentences are read. Only whitespace
    changes, so the embedding model reads the same tokens in both."""
    return _HARD_WRAP.sub(" ", text)


def sentence_spans(text: str) -> list[tuple[str, int, int]]:
    """Each sentence of the context (as context_sentences gives it) with where it stands in
    unwrapped(text): [start, end). A sentence the text does not hold verbatim is left out."""
    joined, spans, cursor = unwrapped(text), [], 0
    for sentence, _ in _segmented(text):
        start = joined.find(sentence, cursor)
        if start >= 0:
            cursor = start + len(sentence)
            spans.append((sentence, start, cursor))
    return spans


# Pronouns that stand for what the sentence before named, when they open a sentence.
_ANAPHORA = frozenset({"it", "its", "this", "these", "they", "their", "he", "his", "she", "her", "such"})
_SUBJECT_WORDS = 4  # a subject longer than this is a clause, not a name: its first words stand for it
_OPENING = re.compile(r"[A-Za-z][\w'’-]*")
# "The company has ...", "The function returns ...": a definite article before a common noun (lower
# case, no name of its own) speaks of what the sentence before named, as a pronoun does.
_DEFINITE = frozenset({"the", "that", "those"})
_DESCRIPTION_WORDS = 2  # "The company", "The return value": longer is a description of its own


@lru_cache(maxsize=8192)
def _sentences_of(index: int, text: str) -> tuple[ContextSentence, ...]:
    read = _segmented(text)
    sentences: list[ContextSentence] = []
    for i, (quote, stems) in enumerate(read):
        subject = _subject(sentences[-1]) if i and _refers_back(quote) else ""
        sentences.append(ContextSentence(index, quote, stems, subject, tuple(tokenize(subject)),
                                         clauses=_clause_stems(quote)))
    return tuple(sentences)


def _refers_back(quote: str) -> bool:
    """Whether the sentence opens with a pronoun ("Its KX series ...") or a definite description
    ("The company has ...") standing for the subject of the sentence before it."""
    words = _OPENING.findall(quote)
    if not words:
        return False
    if words[0].lower() in _ANAPHORA:
        return True
    if words[0].lower() not in _DEFINITE:
        return False
    description = list(itertools.takewhile(lambda w: w.lower() not in STOPWORDS, words[1:_DESCRIPTION_WORDS + 2]))
    return 0 < len(description) <= _DESCRIPTION_WORDS and all(w.islower() and w.isalpha() for w in description)


def _subject(sentence: ContextSentence) -> str:
    """What a pronoun opening the next sentence stands for: this sentence's subject, its words
    after an opening article or pronoun up to the next small word ("company" of "The company has
    its head office in Osaka", "Hann window" of "The Hann window is a taper"), with what its own
    opening pronoun stood for. Not the whole sentence: its other names ("Osaka") are not what
    "Its plant" belongs to, and read as standing where the pronoun does they sat beside every
    word after it ('KX' of "Its KX series arms" was each city's rival for "head office")."""
    words = _OPENING.findall(sentence.text)
    start = 1 if words and (words[0].lower() in STOPWORDS or words[0].lower() in _ANAPHORA) else 0
    subject = []
    for word in words[start:start + _SUBJECT_WORDS]:
        if word.lower() in STOPWORDS:
            break
        subject.append(word)
    return " ".join(filter(None, (sentence.antecedent, " ".join(subject))))


_CLAUSE_END = re.compile(r"(?<=;)\s+")  # the clause goes on to its semicolon


def _clause_stems(quote: str) -> tuple[tuple[str, ...], ...]:
    if not _CLAUSE_END.search(quote) or quote.lstrip().startswith("|"):  # a table row reads "Header: value; ..."
        return ()
    clauses = tuple(stems for clause in _CLAUSE_END.split(quote) if (stems := tuple(tokenize(clean(clause)))))
    return clauses if len(clauses) > 1 else ()


@lru_cache(maxsize=8192)
def _segmented(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The context's sentences and their stems, hard-wrapped lines joined first (reference docs
    wrap at ~80), whatever place the context has among others: segmenting is what costs."""
    return tuple((seg.quote.strip(), tuple(tokenize(seg.scoring))) for seg in segment_chunk(unwrapped(text))
                 if not seg.heading and seg.scoring)
