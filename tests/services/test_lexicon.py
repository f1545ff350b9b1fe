"""The offline judge's word lists (services/judging/lexicon.toml): they parse, every list
the judge reads is filled, holds each entry once, and is written the way the rules read it."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from services.judging import _lexicon as lexicon
from services.judging._decompose import decompose
from services.judging._lexical import negations
from services.judging._morphology import related_in
from services.judging._opposites import OPPOSITES, negated_by_prefix, opposite_word, swapped_value
from services.retrieval.text import tokenize

# Every list of the data file, by (section, key): a list added to the file is checked too.
RAW = tomllib.loads(resources.files("services.judging").joinpath("lexicon.toml").read_text(encoding="utf-8"))
LISTS = {(section, key): value for section, entries in RAW.items() for key, value in entries.items()}
# How the modules read them (_lexicon's typed constants), each with its (section, key).
USED = {
    ("words", "question_words"): lexicon.QUESTION_WORDS,
    ("words", "auxiliaries"): lexicon.AUXILIARIES,
    ("negation", "negation_words"): lexicon.NEGATION_WORDS,
    ("negation", "negated_auxiliaries"): lexicon.NEGATED_AUXILIARIES,
    ("opposites", "antonym_pairs"): lexicon.ANTONYM_PAIRS,
    ("opposites", "negating_prefixes"): lexicon.NEGATING_PREFIXES,
    ("opposites", "ordinal_words"): lexicon.ORDINAL_WORDS,
    ("opposites", "ordinal_suffixes"): lexicon.ORDINAL_SUFFIXES,
    ("opposites", "cardinal_words"): lexicon.CARDINAL_VALUES,
    ("morphology", "irregular_past"): lexicon.IRREGULAR_PAST,
    ("decompose", "clause_verbs"): lexicon.CLAUSE_VERBS,
    ("decompose", "stem_question_words"): lexicon.STEM_QUESTION_WORDS,
    ("decompose", "stem_auxiliaries"): lexicon.STEM_AUXILIARIES,
    ("decompose", "stem_subjects"): lexicon.STEM_SUBJECTS,
    ("decompose", "enumeration_question_words"): lexicon.ENUMERATION_QUESTION_WORDS,
    ("decompose", "enumeration_copulas"): lexicon.ENUMERATION_COPULAS,
    ("decompose", "comparison_words"): lexicon.COMPARISON_WORDS,
    ("judging", "reversal_pairs"): lexicon.REVERSAL_PAIRS,
    ("judging", "units"): lexicon.UNITS,
    ("judging", "source_words"): lexicon.SOURCE_WORDS,
    ("judging", "source_qualifiers"): lexicon.SOURCE_QUALIFIERS,
    ("judging", "attribution_openers"): lexicon.ATTRIBUTION_OPENERS,
    ("judging", "source_verbs"): lexicon.SOURCE_VERBS,
    ("judging", "hedge_openers"): lexicon.HEDGE_OPENERS,
    ("judging", "courtesy_openers"): lexicon.COURTESY_OPENERS,
    ("judging", "answer_labels"): lexicon.ANSWER_LABELS,
    ("judging", "source_line_labels"): lexicon.SOURCE_LINE_LABELS,
}
# Lists matched case for case: a unit's spelling is its meaning ("mA" is not "MA", "MB" not "mb").
CASED = {("judging", "units")}


def _entries(value: Any) -> list[Any]:
    """A list's entries: the words of a word list, the pairs of a pair list, the words of a table."""
    return list(value) if isinstance(value, list | dict) else [value]


def _words(value: Any) -> list[Any]:
    """Every word of a list, pairs taken apart."""
    return [word for entry in _entries(value) for word in (entry if isinstance(entry, list) else [entry])]


def test_the_data_file_lists_exactly_what_the_modules_read() -> None:
    assert set(LISTS) == set(USED)
    assert lexicon.load_lexicon() == RAW


@pytest.mark.parametrize("name", sorted(LISTS), ids=lambda n: f"{n[0]}.{n[1]}")
def test_every_list_is_filled_with_distinct_lower_case_words(name: tuple[str, str]) -> None:
    value = LISTS[name]
    entries = _entries(value)
    assert entries, f"{name} is empty"
    as_read = [tuple(e) if isinstance(e, list) else e for e in entries]
    assert [e for e, n in Counter(as_read).items() if n > 1] == [], f"{name} repeats an entry"
    words = _words(value)
    assert words and all(isinstance(w, str) and w and w == w.strip() for w in words), f"{name} has an empty or padded word"
    if name not in CASED:
        assert all(w == w.lower() for w in words), f"{name} has a word not in lower case"
    assert len(USED[name]) == len(entries), f"{name} lost entries on the way to the modules"


def test_each_antonym_pair_is_two_plain_words_read_both_ways() -> None:
    # opposite_word reads only lower-case letter runs: another character would never match.
    unordered = Counter(frozenset(pair) for pair in lexicon.ANTONYM_PAIRS)
    assert [sorted(p) for p, n in unordered.items() if n > 1] == []
    for a, b in lexicon.ANTONYM_PAIRS:
        assert re.fullmatch(r"[a-z]+", a) and re.fullmatch(r"[a-z]+", b)
        assert a != b
        assert b in OPPOSITES[a] and a in OPPOSITES[b]
    assert all(word in OPPOSITES[other] for word, others in OPPOSITES.items() for other in others)
    assert opposite_word("What is the lowest point?", "The highest point is the summit.") == ("lowest", "highest")
    assert opposite_word("What is the highest point?", "The lowest point is the valley.") == ("highest", "lowest")


def test_irregular_past_forms_are_distinct_words_with_their_own_stems() -> None:
    pasts = [past for past, _ in lexicon.IRREGULAR_PAST]
    assert len({tokenize(p)[0] for p in pasts}) == len(pasts)  # one base per past stem
    assert all(past != base for past, base in lexicon.IRREGULAR_PAST)
    assert related_in(tokenize("begin")[0], frozenset(tokenize("The war began in 1944")))


def test_order_dependent_lists_keep_their_order() -> None:
    # negated_by_prefix tries the prefixes in order: "non-" before "non", "in" last.
    assert lexicon.NEGATING_PREFIXES[:2] == ("non-", "non") and lexicon.NEGATING_PREFIXES[-1] == "in"
    assert negated_by_prefix("Which is a non-local variable?", "A local variable is declared inside.") == (
        "non-local", "local")
    assert list(lexicon.CARDINAL_VALUES.items())[:2] == [("two", "2"), ("three", "3")]
    assert swapped_value("Who won the 3rd race?", "She won the 2nd race.") == ("3rd", "2nd")
    assert swapped_value("Did it take three months?", "It took 6 months.") == ("3", "6")


def test_the_lists_reach_the_rules_that_read_them() -> None:
    assert negations("What did the treaty not change?") == {"not"}
    assert negations("Can I run it without the pendant?") == {"without"}
    assert decompose("How do I calibrate the robot and reset the alarm?") == [
        "How do I calibrate the robot?", "How do I reset the alarm?"]
    assert decompose("What is the difference between TCP, UDP and ICMP?") == [
        "What is the difference between TCP, UDP and ICMP?"]


def test_a_missing_list_fails_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lexicon, "load_lexicon", lambda: {"words": {}})
    with pytest.raises(ValueError, match=r"\[words\] question_words"):
        lexicon._words("words", "question_words")


def test_the_data_file_ships_with_the_package() -> None:
    pyproject = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    assert "lexicon.toml" in pyproject["tool"]["setuptools"]["package-data"]["services.judging"]
