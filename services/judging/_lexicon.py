"""The offline judge's word lists, read once from lexicon.toml beside this module.

The data file says what each list is for, which rule reads it and where its words come from;
this module only gives them their Python types. A list missing from the file, or of the wrong
shape, fails at import with the list's name: the judge never runs on part of its lexicon.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from types import MappingProxyType
from typing import Any

LEXICON_FILE = "lexicon.toml"


@cache
def load_lexicon() -> dict[str, Any]:
    """The parsed data file, read as package data so an installed wheel finds it too."""
    text = resources.files(__name__.rpartition(".")[0]).joinpath(LEXICON_FILE)
    return tomllib.loads(text.read_text(encoding="utf-8"))


def alternation(words: Iterable[str]) -> str:
    """`words` as a regex alternation ("not|no|never"), in the order given."""
    return "|".join(map(re.escape, words))


def _entry(section: str, key: str) -> Any:
    try:
        return load_lexicon()[section][key]
    except KeyError:
        raise ValueError(f"{LEXICON_FILE} has no list [{section}] {key}") from None


def _words(section: str, key: str) -> tuple[str, ...]:
    value = _entry(section, key)
    if not isinstance(value, list) or not all(isinstance(w, str) and w for w in value):
        raise ValueError(f"{LEXICON_FILE}: [{section}] {key} must be a list of words")
    return tuple(value)


def _pairs(section: str, key: str) -> tuple[tuple[str, str], ...]:
    value = _entry(section, key)
    if not isinstance(value, list) or not all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(w, str) and w for w in p) for p in value):
        raise ValueError(f"{LEXICON_FILE}: [{section}] {key} must be a list of [word, word] pairs")
    return tuple((a, b) for a, b in value)


def _values(section: str, key: str) -> Mapping[str, str]:
    value = _entry(section, key)
    if not isinstance(value, dict) or not all(type(n) is int for n in value.values()):
        raise ValueError(f"{LEXICON_FILE}: [{section}] {key} must map words to whole numbers")
    return MappingProxyType({word: str(n) for word, n in value.items()})


def _spellings(section: str, key: str) -> Mapping[str, str]:
    value = _entry(section, key)
    if not isinstance(value, dict) or not all(isinstance(n, str) and n for n in value.values()):
        raise ValueError(f"{LEXICON_FILE}: [{section}] {key} must map spellings to names")
    return MappingProxyType(dict(value))


QUESTION_WORDS = frozenset(_words("words", "question_words"))
AUXILIARIES = frozenset(_words("words", "auxiliaries"))

NEGATION_WORDS = _words("negation", "negation_words")  # in pattern order
NEGATED_AUXILIARIES = frozenset(_words("negation", "negated_auxiliaries"))

ANTONYM_PAIRS = _pairs("opposites", "antonym_pairs")
NEGATING_PREFIXES = _words("opposites", "negating_prefixes")  # tried in this order
ORDINAL_WORDS = frozenset(_words("opposites", "ordinal_words"))
ORDINAL_SUFFIXES = _words("opposites", "ordinal_suffixes")  # in pattern order
CARDINAL_VALUES = _values("opposites", "cardinal_words")  # "three" -> "3"
UNITS = _spellings("judging", "units")  # "metres" -> "m": the unit a number is read with

IRREGULAR_PAST = _pairs("morphology", "irregular_past")  # (past form, base form)

REVERSAL_PAIRS = _pairs("judging", "reversal_pairs")
SOURCE_WORDS = _words("judging", "source_words")  # this and the next seven: what services.judging._framing cuts
SOURCE_QUALIFIERS = _words("judging", "source_qualifiers")
ATTRIBUTION_OPENERS = _words("judging", "attribution_openers")
SOURCE_VERBS = _words("judging", "source_verbs")
HEDGE_OPENERS = _words("judging", "hedge_openers")
COURTESY_OPENERS = _words("judging", "courtesy_openers")
ANSWER_LABELS = _words("judging", "answer_labels")
SOURCE_LINE_LABELS = _words("judging", "source_line_labels")

CLAUSE_VERBS = frozenset(_words("decompose", "clause_verbs"))
STEM_QUESTION_WORDS = _words("decompose", "stem_question_words")  # this tuple and the next ones in pattern order
STEM_AUXILIARIES = _words("decompose", "stem_auxiliaries")
STEM_SUBJECTS = _words("decompose", "stem_subjects")
ENUMERATION_QUESTION_WORDS = _words("decompose", "enumeration_question_words")
ENUMERATION_COPULAS = _words("decompose", "enumeration_copulas")
COMPARISON_WORDS = _words("decompose", "comparison_words")
