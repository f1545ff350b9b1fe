"""The one tokenizer BM25 uses at ingest and at query time."""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

import Stemmer

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STEMMER = Stemmer.Stemmer("english")

# Function words carry no retrieval signal and would dominate the postings table.
STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if
    in into is it its may me my no not of on or our should so than that the their them then
    there these they this those to was we were what when where which while who whom why will
    with would you your""".split()
)


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(word)


def tokenize(text: str) -> list[str]:
    """Lower-cased, stop-word-free, Snowball-stemmed word tokens, in order."""
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def term_counts(text: str) -> tuple[Counter[str], int]:
    """Term frequencies and document length (in tokens) of one text."""
    tokens = tokenize(text)
    return Counter(tokens), len(tokens)
