"""Sentences as the offline backend and grading read them: an answer's, and the chunks' it quotes."""

from __future__ import annotations

import re
from collections.abc import Sequence

from services.corpus.chunking import split_sentences
from services.domain import Hit
from services.judging import _lexical as lex

# "[1]", "[1, 3]": citations in an answer ("every month [1].", "monthly[2]."). Not after a capital
# letter: "UO[6]", "DI[3]", "R[1]" are a controller's signals and registers, and a claim cut
# there lost what it said of them ("UO[6] FAULT is OFF" read as "FAULT is OFF").
MARKERS = re.compile(r"\s*(?<![A-Z])\[(\d+(?:\s*,\s*\d+)*)\]")


def addressing_text(query: str, terms: Sequence[lex.Term], sentences: list[str]) -> str:
    """The text that has to name what the question asks about: for a one-part question, the
    answer's sentence that covers most of its terms; for a multi-part one, the whole answer.

    A one-part question is answered by a statement about its subject. Its terms scattered
    over several quoted sentences are not an answer: "How do viruses overcome barriers?"
    read against "Bacteria overcome barriers by ... [1] ... bacteria and viruses ... [2]"."""
    plain = " ".join(sentences)
    if len(sentences) < 2 or len(lex.decompose(query)) > 1:
        return plain
    return max(sentences, key=lambda s: lex.coverage(terms, s))  # ties: the earlier sentence


def chunk_sentences(chunks: Sequence[Hit], *, answerable_only: bool, limit: int) -> list[tuple[int, int, lex.Segment]]:
    """(chunk index, position, segment) in rank order; a sentence repeated by chunk
    overlap is kept once, in its best-ranked chunk."""
    seen: set[str] = set()
    found = []
    for chunk_index, hit in enumerate(chunks):
        for position, seg in enumerate(lex.segment_chunk(hit.text)):
            if (answerable_only and not seg.answerable) or not seg.scoring or seg.scoring in seen:
                continue
            seen.add(seg.scoring)
            found.append((chunk_index, position, seg))
            if len(found) == limit:
                return found
    return found


def strip_markers(answer: str) -> str:
    """The answer without its citation markers; an answer that is nothing but one ("[0, 2]", a
    list) is its own text."""
    return " ".join(MARKERS.sub(" ", answer).split()) or " ".join(answer.split())


def answer_sentences(answer: str) -> list[str]:
    """The answer's sentences without citation markers, as the chunks' sentences are scored."""
    sentences: list[str] = []
    for piece in MARKERS.split(answer)[::2]:  # split() interleaves the captured marker text
        sentences.extend(lex.clean(x) for x in split_sentences(piece))
    return [s for s in sentences if any(ch.isalnum() for ch in s)]
