"""The checkable atoms of a text: numbers, years, codes and names, each found or not in a context.

A name, number or date that an answer adds and no context holds is a fabrication, whatever
else of the answer matches: "The maker of the robot arm has its head office in Kobe" shares
every other word with its passage, and "Kobe" is what was invented. Atoms are compared by
value, not by spelling: "1,000" is 1000, "three" is 3, "SRVO-062" is one code. A number is
read with the unit written after it: "7 m" is held by "7 metres" or by a bare 7, not by the 7
of "a 7-inch screen".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from services.judging._lexicon import CARDINAL_VALUES, UNITS, alternation
from services.retrieval.text import STOPWORDS

NUMBER, YEAR, CODE, NAME, LITERAL = "number", "year", "code", "name", "literal"
# A text this short is a concise answer ("Osaka", "the Normans"), not a sentence: its first
# word in capitals is a name, not a sentence's opening.
CONCISE_WORDS = 5

# Codes: alarm codes (SRVO-062), parameters ($MCR.$GENOVERRIDE), identifiers written as code
# (__call__, np.abs, os.path.join, KX-40, J2): what must match character for character.
_CODE = re.compile(
    r"\$[A-Za-z_][\w.$]*"
    r"|\b[A-Za-z]{1,8}-\d[\w-]*"
    r"|\b_*[A-Za-z][A-Za-z0-9]*(?:[._][A-Za-z0-9_]+)+(?:\(\))?"
    r"|\b__\w+__"
    r"|\b[A-Za-z]+\d+[A-Za-z\d]*\b"
)
# What an answer gives in quotes or backticks is claimed character for character: code
# ("-(x+1)", `from module import *`, "()") must stand in a context as written, spaces aside.
# Only where it is more than one code, number or word (those are atoms of their own).
_QUOTED = re.compile(r"``([^`]+)``|`([^`]+)`|\"([^\"]+)\"|“([^”]+)”")
_LITERAL_CHARS = re.compile(r"[\s()\[\]{}+\-*/=<>%,:;|&^~!@]")
MAX_LITERAL_CHARS = 60
_NUMBER = re.compile(r"(?<![\w.$-])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?![\w-]*\d)")
_YEAR = re.compile(r"^(1[0-9]{3}|20[0-9]{2})$")
# A unit right after a number: a space, a hyphen or nothing between ("10 m", "7-inch", "5kg").
_UNIT = re.compile(rf"[ \t\u00a0-]?({alternation(sorted(UNITS, key=len, reverse=True))})(?![\w/])")
_CAPITALIZED = re.compile(r"\b[A-Z][\w'’-]*[A-Za-z0-9]|\b[A-Z]\b")
_WORD = re.compile(r"[A-Za-z]+")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;]\s+|[\"“(]\s*)$")
# Words that open sentences and headlines in capitals without naming anything.
_NOT_NAMES = frozenset("""i a an the this that these those it its he she they we you there here
    yes no not also however but and or if when where what which who why how in on at of for to
    by with from after before during since until about as is are was were be been""".split())


@dataclass(frozen=True)
class Atom:
    """One checkable value of a text: `key` is what is compared, `surface` what is shown."""

    surface: str
    kind: str  # number | year | code | name | literal
    key: str
    unit: str = ""  # a number's unit as lexicon.toml names it ("m" for "metres"), "" for none


def atoms(text: str) -> tuple[Atom, ...]:
    """The text's atoms, in order, each value once."""
    return _atoms(text)


@lru_cache(maxsize=65_536)
def _atoms(text: str) -> tuple[Atom, ...]:
    found: dict[tuple[str, str, str], Atom] = {}
    taken: list[tuple[int, int]] = []

    def add(start: int, end: int, atom: Atom) -> None:
        if any(s < end and start < e for s, e in taken):
            return
        taken.append((start, end))
        found.setdefault((atom.kind, atom.key, atom.unit), atom)

    def add_number(start: int, end: int, key: str, year: bool) -> None:
        unit = _UNIT.match(text, end)
        if unit is None:
            add(start, end, Atom(text[start:end], YEAR if year else NUMBER, key))
        else:  # "1500 m" is a length, not a year; the unit's span is taken ("5 V" names nothing)
            add(start, unit.end(), Atom(text[start:unit.end()], NUMBER, key, UNITS[unit.group(1)]))

    for match in _QUOTED.finditer(text):
        quoted = next(g for g in match.groups() if g is not None).strip()
        if len(quoted) <= MAX_LITERAL_CHARS and _LITERAL_CHARS.search(quoted) and not _CODE.fullmatch(quoted):
            # Its span is not taken: the numbers and names inside stay atoms of their own.
            literal = _squeezed(quoted)
            found.setdefault((LITERAL, literal, ""), Atom(quoted, LITERAL, literal))
    for match in _CODE.finditer(text):
        value = match.group(0).rstrip(".")
        if value.replace(".", "").isdigit():
            continue  # 3.5 is a number
        add(match.start(), match.start() + len(value), Atom(value, CODE, value.lower()))
    for match in _NUMBER.finditer(text):
        whole, fraction = match.group(1).replace(",", ""), match.group(2)
        add_number(match.start(), match.end(), _number_key(whole, fraction),
                   fraction is None and _YEAR.match(whole) is not None)
    for match in _WORD.finditer(text):
        cardinal = CARDINAL_VALUES.get(match.group(0).lower())
        if cardinal is not None and not any(s <= match.start() < e for s, e in taken):
            add_number(match.start(), match.end(), _number_key(cardinal, None), False)
    concise = len(_WORD.findall(text)) <= CONCISE_WORDS
    for match in _CAPITALIZED.finditer(text):
        word = match.group(0)
        if word.lower() in _NOT_NAMES or word.lower() in STOPWORDS:
            continue
        if not concise and _SENTENCE_START.search(text[:match.start()]) and not _looks_like_a_name(word):
            continue
        add(match.start(), match.end(), Atom(word, NAME, _fold(word)))
    order = {key: text.find(atom.surface) for key, atom in found.items()}
    return tuple(found[k] for k in sorted(found, key=lambda k: order[k]))


def holds(atom: Atom, text: str) -> bool:
    """Whether `text` names the atom's value (a number by value, in its unit or with none; a
    name as a word; a quoted literal as written, spaces and case aside)."""
    if atom.kind == LITERAL:
        return atom.key in _squeezed(text)
    return any(other.kind == atom.kind and other.key == atom.key and (not atom.unit or other.unit in ("", atom.unit))
               for other in _atoms(text)) or (atom.kind in (NAME, CODE) and _word_in(atom.surface, text))


def _squeezed(text: str) -> str:
    return re.sub(r"\s+", "", text).lower()


def _number_key(whole: str, fraction: str | None) -> str:
    fraction = (fraction or "").rstrip("0")
    return f"{int(whole)}.{fraction}" if fraction else str(int(whole))


def _looks_like_a_name(word: str) -> bool:
    """A sentence's first word is a name when it is written as one inside a word (KUKA, McDonald)."""
    return any(c.isupper() for c in word[1:]) or any(c.isdigit() for c in word)


def _fold(word: str) -> str:
    word = word.lower().replace("’", "'")
    return word[:-2] if word.endswith("'s") else word


@lru_cache(maxsize=65_536)
def _word_pattern(surface: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w]){re.escape(_fold(surface))}(?![\w])")


def _word_in(surface: str, text: str) -> bool:
    return _word_pattern(surface).search(text.lower().replace("’", "'")) is not None
