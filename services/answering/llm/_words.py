"""What both lexical modules of the offline backend read words with: the word pattern and the question words."""

from __future__ import annotations

import re

WORD = re.compile(r"[^\W_]+")
QUESTION_WORDS = frozenset("what how why when where which who whom whose".split())
