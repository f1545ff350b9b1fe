"""Opposites: a question asking about the "lowest" read against a sentence about the "highest",
about 2014 against a sentence about 2004, or about "killer B cells" against "killer T cells".

A question written to look answerable from a passage often reuses the passage's wording with
one word turned around ("before" for "after", "inside" for "outside"), one value swapped
(another year, "third" for "second", "Article 20" for "Article 12") or one word replaced in
an otherwise identical phrase. The sentence still covers every other term, so coverage and
embedding similarity call it an answer; the one word it contradicts is what says it is not.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from services.judging._lexicon import (
    ANTONYM_PAIRS,
    CARDINAL_VALUES,
    NEGATING_PREFIXES,
    ORDINAL_SUFFIXES,
    ORDINAL_WORDS,
    alternation,
)
from services.judging._words import QUESTION_WORDS, WORD
from services.retrieval.text import STOPWORDS, tokenize

# Each antonym pair read both ways. Pairs a negating prefix already makes ("known"/"unknown")
# are left to negated_by_prefix.
OPPOSITES: dict[str, frozenset[str]] = {}
for _a, _b in ANTONYM_PAIRS:
    OPPOSITES[_a] = OPPOSITES.get(_a, frozenset()) | {_b}
    OPPOSITES[_b] = OPPOSITES.get(_b, frozenset()) | {_a}

_LOWER_WORD = re.compile(r"(?<![\w-])[a-z]+(?![\w-])")


def turned_around(question: str, sentence: str) -> tuple[str, str] | None:
    """(question word, its opposite in the sentence) when the sentence says the opposite of
    a word the question asks with: an opposite word or the word negated by a prefix."""
    return opposite_word(question, sentence) or negated_by_prefix(question, sentence)


def opposite_word(question: str, sentence: str) -> tuple[str, str] | None:
    """(question word, its opposite in the sentence) by the antonym pairs; None otherwise.

    Only words written in lower case count: "South" of "South Carolina" and "New" of "New
    York" name places (a sentence's first word is read in lower case). A question naming
    both sides ("before or after") contrasts them rather than asking one.
    """
    asked = set(_LOWER_WORD.findall(question))
    said = set(_LOWER_WORD.findall(sentence[:1].lower() + sentence[1:]))
    for word in sorted(asked, key=question.find):
        opposites = OPPOSITES.get(word, frozenset())
        if word in said or opposites & asked:
            continue
        found = sorted(opposites & said)
        if found:
            return word, found[0]
    return None


_PREFIXED_WORD = re.compile(r"(?<![\w-])[^\W\d_]+(?:-[^\W\d_]+)*(?![\w-])")
_MIN_ROOT = 4  # "unit" is not "it" negated
_MIN_IN_ROOT = 6  # "in" is a preposition too: "intake" is no "take", "indistinguishable" is
_NON_APART = re.compile(r"\bnon\s+(?=[^\W\d_])", re.IGNORECASE)  # "non shared" is "non-shared"


def negated_by_prefix(question: str, sentence: str) -> tuple[str, str] | None:
    """(question word, the same word with or without a negating prefix in the sentence):
    "non-local" against "local", "necessary" against "unnecessary"."""
    question, sentence = _NON_APART.sub("non-", question), _NON_APART.sub("non-", sentence)
    asked = {w.lower() for w in _PREFIXED_WORD.findall(question)}
    said = {w.lower() for w in _PREFIXED_WORD.findall(sentence)}
    lowered = question.lower()
    for word in sorted(asked - said, key=lowered.find):
        for prefix in NEGATING_PREFIXES:
            shortest = _MIN_IN_ROOT if prefix == "in" else _MIN_ROOT
            root = word.removeprefix(prefix)
            if root != word and len(root) >= shortest and root in said and root not in asked:
                return word, root
            if len(word) >= shortest and prefix + word in said and prefix + word not in asked:
                return word, prefix + word
    return None


# Counts written out are counts ("three months" against "3 months"): CARDINAL_VALUES.
# A number joined to letters or hyphens is part of a code ("SRVO-021", "KR-P-0361"), a name
# of its own rather than a value.
_VALUE = re.compile(rf"(?<![\w.,-])(\d[\d,]*(?:\.\d+)?)({alternation(ORDINAL_SUFFIXES)}|'s|s)?(?![\w-])|\b[A-Za-z]+\b")
_YEAR = re.compile(r"1\d{3}|20\d{2}")


def _values(text: str) -> dict[str, set[str]]:
    """The years, ordinals and other numbers a text names, by kind ("1980s" is the year 1980s)."""
    found: dict[str, set[str]] = {"year": set(), "ordinal": set(), "number": set()}
    for match in _VALUE.finditer(text):
        digits, suffix = match.group(1), (match.group(2) or "").lower()
        if digits is None:
            word = match.group(0).lower()
            if word in ORDINAL_WORDS:
                found["ordinal"].add(word)
            elif word in CARDINAL_VALUES:
                found["number"].add(CARDINAL_VALUES[word])
            continue
        digits = digits.replace(",", "").rstrip(".")
        if suffix in ORDINAL_SUFFIXES:
            found["ordinal"].add(digits + suffix)
        elif _YEAR.fullmatch(digits):
            found["year"].add(digits + ("s" if suffix in ("s", "'s") else ""))
        else:
            found["number"].add(digits)
    return found


def swapped_value(question: str, sentence: str) -> tuple[str, str] | None:
    """(value in the question, the different value of the same kind in the sentence); see swapped."""
    found = swapped(question, sentence)
    return None if found is None else (found[1], found[2])


def swapped(question: str, sentence: str) -> tuple[str, str, str] | None:
    """(kind, value in the question, the different value of that kind in the sentence) when
    the sentence names another year, ordinal or number where the question names one; None
    when it names the question's own (a decade like "1980s" is named by any of its years) or
    none of that kind at all (then it is silent, not contradicting)."""
    asked, said = _values(question), _values(sentence)
    for kind, values in asked.items():
        others = said[kind] - values
        if not others:
            continue
        for value in sorted(values, key=question.find):
            if value in said[kind] or (value.endswith("0s") and any(v.startswith(value[:3]) for v in said[kind])):
                continue
            return kind, value, min(others, key=sentence.find)
    return None


_CONTEXT_WORDS = 3  # how far a neighbouring phrase reaches for its nearest content word


def substituted(question: str, sentence: str, *, phrasing: frozenset[str] = frozenset()) -> tuple[str, str] | None:
    """(question word, the word in its place in the sentence); see substitution."""
    found = substitution(question, sentence, phrasing=phrasing)
    return None if found is None else (found[1], found[2])


def substitution(question: str, sentence: str, *,
                 phrasing: frozenset[str] = frozenset()) -> tuple[str, str, str] | None:
    """(kind, question word, the word in its place in the sentence) when the sentence holds the
    question's phrase around a content word with another content word in that place: "killer
    B cells" against "Killer T cells", "two of Oppman's daughters" against "two of Triton's
    daughters". None when every content word of the question is in the sentence, or no
    missing one has its neighbours there. Words in `phrasing` ("mean" of "What does X
    mean?") are how the question is asked, not what it is about: they are never replaced.

    Both neighbouring phrases must match, each up to the nearest content word on its side
    (a run of "of the" alone matches anything). One side is enough for the question's first
    or last word when its phrase is two words or more ("top of a driver" against "top of a
    boiler"), and for a name replaced by a name when the phrase reaches two content words
    ("the American Union law" against "European Union law"). Numbers are swapped_value's;
    spelling variants ("harmonise", "Jumièges", "Africa"/"African") are the same word.
    The kind is "name" for a capitalised question word past its first, else "word"."""
    asked, said = WORD.findall(question), WORD.findall(sentence)
    said_folded = [_fold(w) for w in said]
    for i, word in enumerate(asked):
        if not _is_content(word) or word.lower() in phrasing or any(_same_word(word, other) for other in said):
            continue
        left, right = _neighbours(asked, i, -1), _neighbours(asked, i, 1)
        if i == 0 and right is not None and len(right) >= 2:
            left = []
        if i == len(asked) - 1 and left is not None and len(left) >= 2:
            right = []
        sides = [(left, right)] if left is not None and right is not None else []
        if i > 0 and word[:1].isupper():  # a name: its phrase on either side will do
            sides += [(phrase, []) for phrase in [_neighbours(asked, i, -1, content_words=2)] if phrase]
            sides += [([], phrase) for phrase in [_neighbours(asked, i, 1, content_words=2)] if phrase]
        for before, after in sides:
            for k in range(len(before), len(said) - len(after)):
                if said_folded[k - len(before):k] != before or said_folded[k + 1:k + 1 + len(after)] != after:
                    continue
                replacement = said[k]
                # A name matched on one side only must be replaced by a name (not a sentence's first word).
                by_name = word[:1].isupper() and not (before and after)
                if by_name and not (k > 0 and replacement[:1].isupper()):
                    continue
                if _is_content(replacement) and not any(_same_word(replacement, w) for w in asked):
                    return ("name" if i > 0 and word[:1].isupper() else "word"), word, replacement
    return None


def _neighbours(words: list[str], index: int, step: int, *, content_words: int = 1) -> list[str] | None:
    """The folded words from `index` (exclusive) through the `content_words`-th content word
    in direction `step`, in reading order; None when they are not within reach."""
    found: list[str] = []
    seen = 0
    position = index + step
    while 0 <= position < len(words) and len(found) < _CONTEXT_WORDS + content_words - 1:
        found.append(_fold(words[position]))
        if _is_content(words[position]):
            seen += 1
            if seen == content_words:
                return found[::-1] if step < 0 else found
        position += step
    return None


def _is_content(word: str) -> bool:
    if len(word) == 1:
        return word.isupper()  # "B" of "B cells" names something ("T" is no contraction's "t")
    lowered = word.lower()
    return not (lowered in STOPWORDS or lowered in QUESTION_WORDS or any(c.isdigit() for c in word))


# Pure functions of words, called for every pair of a question's and a sentence's words, and
# again for the same pairs when intake first records what a judge embeds (services.intake.batch).
# Cached, the judge's own time on bench/intake.py's short records fell by 29% (cProfile,
# read_answer 1.82 s -> 1.30 s for 768 calls; substitution 0.92 s -> 0.22 s).
@lru_cache(maxsize=65_536)
def _fold(word: str) -> str:
    """Lower case without accents: "Jumièges" and "Jumieges" are one name."""
    return unicodedata.normalize("NFKD", word).encode("ascii", "ignore").decode().lower() or word.lower()


@lru_cache(maxsize=262_144)
def _same_word(a: str, b: str) -> bool:
    """One word in two spellings: stems, British and American "-ise"/"-ize", a shortened form
    ("Sept", "Africa" of "African"), or, for long words, a single typo."""
    a, b = _fold(a).replace("is", "iz"), _fold(b).replace("is", "iz")
    if a == b or tokenize(a) == tokenize(b) != []:
        return True
    shorter, longer = sorted((a, b), key=len)
    if len(shorter) >= 3 and longer.startswith(shorter):
        return True
    return len(shorter) >= 6 and _one_edit(shorter, longer)


def _one_edit(shorter: str, longer: str) -> bool:
    """Whether one insertion, deletion, substitution or swap of neighbours turns one into the other."""
    if len(longer) - len(shorter) > 1:
        return False
    if len(longer) > len(shorter):
        return any(longer[:i] + longer[i + 1:] == shorter for i in range(len(longer)))
    diff = [i for i in range(len(shorter)) if shorter[i] != longer[i]]
    return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                              and shorter[diff[0]] == longer[diff[1]] and shorter[diff[1]] == longer[diff[0]])
