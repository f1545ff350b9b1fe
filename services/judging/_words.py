"""What the lexical modules of the offline backend read words with: the word pattern, the
question words and auxiliaries (from lexicon.toml), and where a phrase stands written in a text."""

from __future__ import annotations

import re

from services.judging._lexicon import AUXILIARIES, QUESTION_WORDS

__all__ = ["AUXILIARIES", "QUESTION_WORDS", "WORD", "surface"]

WORD = re.compile(r"[^\W_]+")


def surface(phrase: str, text: str) -> str:
    """`phrase` as `text` writes it (case and spacing), or `phrase` itself when absent."""
    match = re.search(r"\s+".join(map(re.escape, phrase.split())), text, re.IGNORECASE)
    return match.group(0) if match else phrase
