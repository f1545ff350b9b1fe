"""What the lexical modules of the offline backend read words with: the word pattern, the
question words and auxiliaries, and where a phrase stands written in a text."""

from __future__ import annotations

import re

WORD = re.compile(r"[^\W_]+")
QUESTION_WORDS = frozenset("what how why when where which who whom whose".split())
AUXILIARIES = frozenset("is are was were do does did can could should would will has have had must may might".split())


def surface(phrase: str, text: str) -> str:
    """`phrase` as `text` writes it (case and spacing), or `phrase` itself when absent."""
    match = re.search(r"\s+".join(map(re.escape, phrase.split())), text, re.IGNORECASE)
    return match.group(0) if match else phrase
