"""Opposite words: a question asking about the "lowest" read against a sentence about the "highest".

A question written to look answerable from a passage often reuses the passage's wording with
one word turned around ("before" for "after", "inside" for "outside"). The sentence still
covers every other term, so coverage and embedding similarity call it an answer; the one
word it contradicts is what says it is not.
"""

from __future__ import annotations

import re

_PAIRS = """
more less; most least; higher lower; highest lowest; high low; larger smaller; largest smallest;
large small; bigger smaller; biggest smallest; longer shorter; longest shortest; long short;
greater lesser; greatest least; maximum minimum; increase decrease; increases decreases;
increased decreased; increasing decreasing; rise fall; rises falls; raised lowered;
first last; before after; earlier later; earliest latest; early late; older newer; oldest newest;
old new; ancient modern; start end; began ended; begin end; open closed; opened closed;
inside outside; inner outer; internal external; upper lower; above below; top bottom;
north south; east west; northern southern; eastern western;
strong weak; stronger weaker; strongest weakest; fast slow; faster slower; hot cold; warm cool;
heavier lighter; rich poor; cheap expensive; positive negative; attractive repulsive; attraction repulsion;
best worst; better worse; success failure; successful unsuccessful; win lose; won lost; victory defeat;
accept reject; accepted rejected; agree refuse; agreed refused; allow prohibit; allowed prohibited;
legal illegal; formal informal; direct indirect; public private; major minor; male female; men women;
same different; true false; enhance diminish; gain loss; import export; imports exports;
""".strip()

OPPOSITES: dict[str, frozenset[str]] = {}
for _pair in filter(None, (p.split() for p in _PAIRS.replace("\n", " ").split(";"))):
    _a, _b = _pair
    OPPOSITES[_a] = OPPOSITES.get(_a, frozenset()) | {_b}
    OPPOSITES[_b] = OPPOSITES.get(_b, frozenset()) | {_a}

_LOWER_WORD = re.compile(r"(?<![\w-])[a-z]+(?![\w-])")


def turned_around(question: str, sentence: str) -> tuple[str, str] | None:
    """(question word, its opposite in the sentence) when the sentence says the opposite of
    a word the question asks with; None otherwise.

    Only words written in lower case count, on both sides: "South" of "South Carolina" and
    "New" of "New York" name places (a sentence's first word is read in lower case). A
    question naming both sides ("before or after") contrasts them rather than asking one.
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
