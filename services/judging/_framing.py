"""What an answer says around its claims: where it got them, how sure it is, a label, a
courtesy. Language models write their RAG answers so ("According to the provided context, the
head office is in Osaka (Document 1). Let me know if you need anything else!"); none of it is
a claim about the contexts, and its words ("provided", "context", "Document", "1", "Let") stand
in none of them. The word lists are lexicon.toml's [judging] source_words ... source_line_labels.
"""

from __future__ import annotations

import re

from services.judging._lexicon import (
    ANSWER_LABELS,
    ATTRIBUTION_OPENERS,
    COURTESY_OPENERS,
    HEDGE_OPENERS,
    SOURCE_LINE_LABELS,
    SOURCE_QUALIFIERS,
    SOURCE_VERBS,
    SOURCE_WORDS,
    alternation,
)


def _any_of(words: tuple[str, ...]) -> str:
    """An alternation trying the longest first ("search results" before "results"), any spacing."""
    return alternation(sorted(words, key=len, reverse=True)).replace(r"\ ", r"\s+")


_DETERMINER = r"(?:(?:the|this|these|those|your|my|our)\s+)"
# "provided context", "given search results [2]", "Document 1": a source, after its determiner
_SOURCE = (rf"(?:(?:{_any_of(SOURCE_QUALIFIERS)})\s+)*(?:{_any_of(SOURCE_WORDS)})"
           r"(?:\s*#?\d+(?:\s*(?:,|and|&)\s*#?\d+)*)?(?:\s*\[[\d,\s]+\])?")
_NAMED_SOURCE = rf"{_DETERMINER}?{_SOURCE}"
# Where a sentence starts: the text's start, or after a sentence's end. The rules read the
# answer's text as written (not split into sentences), so that a quote or a list it gives
# ('"()"', "[0, 2]") stays as it is.
_STARTS = r"(^|[.!?]\s+|\n\s*)"
_OPENER = re.compile(
    rf"{_STARTS}(?:(?:{_any_of(ATTRIBUTION_OPENERS)})\s+{_NAMED_SOURCE}\s*[,:]"  # According to the context,
    rf"|{_DETERMINER}{_SOURCE}\s+(?:{_any_of(SOURCE_VERBS)})(?:\s+that)?\s*[,:]?"  # The documents state that
    rf"|(?:{_any_of(HEDGE_OPENERS)})(?:\s+that)?\s*,?"  # It seems that
    rf"|(?:{_any_of(ANSWER_LABELS)}))\s+",  # Answer:
    re.IGNORECASE)
# ", as stated in the context." closing a sentence; a comma before it, so that "X is described
# in the manual." keeps what it says of the manual.
_CLOSER = re.compile(rf",\s*(?:{_any_of(ATTRIBUTION_OPENERS)})\s+{_NAMED_SOURCE}(?=\s*[.!]?(?:\s|$))", re.IGNORECASE)
# "(source: context 1)", "(Document 2)", "[see the manual]" anywhere
_CITED = re.compile(rf"\s*[(\[]\s*(?:(?:sources?|see|cf\.?|from|ref\.?)\s*:?\s*)?{_NAMED_SOURCE}\s*[)\]]",
                    re.IGNORECASE)
# A courtesy, to the end of its sentence; a line naming only sources, to the end of the line.
_COURTESY = re.compile(rf"{_STARTS}(?:{_any_of(COURTESY_OPENERS)})\b[^.!?\n]*[.!?]*", re.IGNORECASE)
_SOURCE_LINE = re.compile(rf"(^|\n)\s*(?:{_any_of(SOURCE_LINE_LABELS)})\s*:[^\n]*", re.IGNORECASE)
_BOLD = re.compile(r"\*\*")  # not "__": "__anext__" is a name


def unframed(answer: str) -> str:
    """`answer` without what it says around its claims: "According to the provided context, the
    head office is in Osaka (Document 1). Let me know if you need anything else!" claims "the
    head office is in Osaka." An answer with none of it is returned as it is, and so is one that
    is nothing else (it claims nothing either way)."""
    text = _CITED.sub("", _BOLD.sub("", answer))
    text = _CLOSER.sub("", _SOURCE_LINE.sub(r"\1", _COURTESY.sub(r"\1", text)))
    while (shorter := _OPENER.sub(r"\1", text)) != text:  # "Answer: according to the context, ..."
        text = shorter
    return text.strip() or answer
