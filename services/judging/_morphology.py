"""Word forms the stemmer keeps apart: "began" and "begin", "abolition" and "abolished".

Snowball strips inflections ("abolished" -> "abolish") but not derivations ("abolition" ->
"abolit") and cannot know irregular verbs. A question asking "When did X begin?" is answered
by "X began in 1944": without these, coverage calls the answer incomplete and the question
term a gap.
"""

from __future__ import annotations

from functools import lru_cache

from services.judging._lexicon import IRREGULAR_PAST
from services.retrieval.text import tokenize

# Stem of the past form -> stem of the base form.
_BASE: dict[str, str] = {}
for _pair in IRREGULAR_PAST:
    _past, _base = (tokenize(w)[0] for w in _pair)
    _BASE[_past] = _base

# Two stems share a root when they agree on this many leading letters and on most of the
# shorter one: "abolit"/"abolish", "separ"/"separat", but not "state"/"station".
_ROOT_LETTERS = 5
_ROOT_SHARE = 0.8


def base_form(stem: str) -> str:
    return _BASE.get(stem, stem)


def shares_root(a: str, b: str) -> bool:
    if a == b:
        return True
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return common >= _ROOT_LETTERS and common >= _ROOT_SHARE * min(len(a), len(b))


def related_in(stem: str, stems: frozenset[str]) -> bool:
    """Whether `stems` hold `stem` in another form: an irregular past or a derivation."""
    bases, by_root = _index(stems)
    if base_form(stem) in bases:
        return True
    return any(shares_root(stem, other) for other in by_root.get(stem[:_ROOT_LETTERS], ()))


@lru_cache(maxsize=4096)
def _index(stems: frozenset[str]) -> tuple[frozenset[str], dict[str, tuple[str, ...]]]:
    """The base forms of `stems`, and `stems` by their first letters: a text's stems are read
    once for every question term checked against it (a frozenset keeps its hash)."""
    by_root: dict[str, list[str]] = {}
    for other in stems:
        if len(other) >= _ROOT_LETTERS:
            by_root.setdefault(other[:_ROOT_LETTERS], []).append(other)
    return frozenset(map(base_form, stems)), {k: tuple(v) for k, v in by_root.items()}
