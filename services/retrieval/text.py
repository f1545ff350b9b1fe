"""The one tokenizer BM25 uses at ingest and at query time, and what text the store can hold."""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

import Stemmer

from services.errors import InputError

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STEMMER = Stemmer.Stemmer("english")

# Function words carry no retrieval signal and would dominate the postings table. The word
# pattern splits "Tesla's" and "don't" at the apostrophe, so the fragments of possessives
# and contractions (s, t, d, ll, m, re, ve) are function words too: "s" alone sat in 37% of
# the chunks of a 100k-chunk Wikipedia sample, and every question with a possessive read
# all of its postings.
STOPWORDS = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if
    in into is it its may me my no not of on or our should so than that the their them then
    there these they this those to was we were what when where which while who whom why will
    with would you your s t d ll m re ve""".split()
)


# A "word" longer than this is a hash, a base64 run or a sequence, not something people search
# for; dropping it also keeps every term under PostgreSQL's btree row limit (~2,700 bytes),
# which would otherwise fail the whole ingest.
MAX_TERM_CHARS = 200
# PostgreSQL text and jsonb cannot hold NUL, and an unpaired surrogate has no UTF-8 form.
_UNSTORABLE_CHAR = re.compile(r"[\x00\ud800-\udfff]")


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(word)


def tokenize(text: str) -> list[str]:
    """Lower-cased, stop-word-free, Snowball-stemmed word tokens, in order."""
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS and len(w) <= MAX_TERM_CHARS]


def term_counts(text: str) -> tuple[Counter[str], int]:
    """Term frequencies and document length (in tokens) of one text."""
    tokens = tokenize(text)
    return Counter(tokens), len(tokens)


def unstorable_char(value: str) -> str | None:
    """Describe the first character the store cannot hold, or None when it can hold them all."""
    match = _UNSTORABLE_CHAR.search(value)
    if match is None:
        return None
    if match.group() == "\x00":
        return "a NUL character (\\u0000)"
    return f"an unpaired surrogate (\\u{ord(match.group()):04x}), which is not valid UTF-8"


def require_storable(value: str | None, what: str) -> None:
    """Raise InputError naming `what` when the text holds a character the store cannot hold."""
    if value is not None and (problem := unstorable_char(value)) is not None:
        raise InputError(f"{what} contains {problem}; remove it and try again")
