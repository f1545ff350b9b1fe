"""A claim that repeats a context's words save a few it replaces: a changed quote.

An answer that copies its passage's sentence is supported by it; one that copies it and swaps
one to three words ("negative" for "positive", "last" for "first", "2 + x" for "1 + x",
"highest" for "lowest") says what the passage does not, though every word it uses may stand
somewhere in the contexts and the swapped word pairs with no known opposite. Read word by word,
in order, against the stretch of context that holds most of the claim.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher
from functools import lru_cache

from services.judging._lexicon import CARDINAL_VALUES
from services.judging._opposites import OPPOSITES
from services.retrieval.text import tokenize

MIN_WORDS = 5  # a shorter claim is a phrase, not a quote to compare
QUOTED_SHARE = 0.75  # share of the claim's words the context stretch must hold, in order
MAX_SWAPPED = 3  # words replaced on either side; more is a paraphrase, not a changed quote
SLACK = 3  # context words read on either side of the stretch the claim lines up with
# Swapping these changes no fact: an article, a pronoun standing for what the question names, a
# preposition of place or time ("held in" for "held on"; "before"/"after" are not among them).
_TRIVIAL = frozenset(
    "a an the this that these those it its they their them he she his her is are was were be "
    "in on at of for from to by with during".split())
# Words, and the stop that ends a sentence: a word swapped just before it is inside the quote,
# not at its open edge.
_WORDS = re.compile(r"\w+|[.!?](?=\s|$)")
_FIGURE = re.compile(r"\d")


# A negation contracted or spelled out is one wording: "doesn't" quotes "does not", "can't"
# quotes "cannot" (which stays one word: "cannot" for "can" is a swap).
_CONTRACTED = re.compile(r"\b(can|won)['’]t\b|n['’]t\b")


def _spelled_out(match: re.Match[str]) -> str:
    return {"can": "cannot", "won": "will not"}.get(match.group(1) or "", " not")


@lru_cache(maxsize=8192)
def _words(text: str) -> tuple[str, ...]:
    return tuple(_WORDS.findall(_CONTRACTED.sub(_spelled_out, text.lower())))


def changed_quote(claim: str, contexts: Sequence[str], question: str = "") -> tuple[str, str] | None:
    """(the claim's words, the context's words they replace) when the claim quotes a context but
    for one to three words swapped for others; None for an exact quote, a paraphrase, or a swap
    that changes nothing (an article, a pronoun for the question's own words)."""
    said = _words(claim)
    if sum(w[0].isalnum() or w[0] == "_" for w in said) < MIN_WORDS:
        return None
    best: tuple[int, SequenceMatcher[str], tuple[str, ...]] | None = None
    for context in contexts:
        words = _words(context)
        i, j, size = SequenceMatcher(None, said, words, autojunk=False).find_longest_match(0, len(said), 0, len(words))
        if size == 0:
            continue
        stretch = words[max(0, j - i - SLACK):j - i + len(said) + SLACK]
        matcher = SequenceMatcher(None, said, stretch, autojunk=False)
        held = sum(block.size for block in matcher.get_matching_blocks())
        if best is None or held > best[0]:
            best = (held, matcher, stretch)
    if best is None:
        return None
    held, matcher, stretch = best
    if held == len(said) or held < QUOTED_SHARE * len(said):
        return None
    asked = frozenset(_words(question))
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op != "replace" or i2 - i1 > MAX_SWAPPED:
            continue
        new, old = said[i1:i2], stretch[j1:j2]
        if j2 - j1 > MAX_SWAPPED and 0 < i1 and i2 < len(said):
            # More context words than a swap: a paraphrase, unless the claim's words stand in for
            # their opposite beside the quoted words (the claim's "The" lined up with a "the"
            # read around the stretch: "The internal E-stop" against "the path. The external E-stop").
            old = next((side for side in (old[-len(new):], old[:len(new)]) if _opposed(new, side)), ())
            if not old:
                continue
        if i1 == 0 or i2 == len(said):
            joined, whole = "".join(new), "".join(old)
            if (whole.endswith(joined) if i1 == 0 else whole.startswith(joined)):
                continue
            # At the claim's edge the context's side runs into the words read around the stretch,
            # and a claim may open or close with words of its own ("Yes, ..."): only a figure
            # put in a figure's place counts there ("Three shape dimension" for "One ..."), or a
            # word put in its opposite's ("The internal E-stop ..." for "External E-stop ...").
            old = old[-len(new):] if i1 == 0 else old[:len(new)]
            if not (all(map(_figure, new + old)) or _opposed(new, old)):
                continue
        if "".join(new) == "".join(old):  # the same characters split otherwise ("2**x2" read as "2x2")
            continue
        # The question's own words put in for the context's are a restatement ("the robot arm" for
        # "it"), unless they turn it around: "after" for "before" where the question asks with both.
        if set(new) <= _TRIVIAL or set(old) <= _TRIVIAL or (set(new) <= asked and not _opposed(new, old)) \
                or _inflected(new, old):
            continue
        return " ".join(new), " ".join(old)
    return None


def _opposed(new: tuple[str, ...], old: tuple[str, ...]) -> bool:
    """A word of `new` is a known opposite of a word of `old` (services.judging._opposites)."""
    return any(OPPOSITES.get(a, frozenset()) & set(old) for a in new)


def _inflected(new: tuple[str, ...], old: tuple[str, ...]) -> bool:
    """The same words in other forms ("lower" for "lowers": a question's "Does it lower ...?" quoting
    "It lowers ..."): the stemmer makes them one; a figure is never another's form."""
    return len(new) == len(old) and all(
        a == b or (not _figure(a) and tokenize(a) == tokenize(b) != []) for a, b in zip(new, old, strict=True))


def _figure(word: str) -> bool:
    return _FIGURE.search(word) is not None or word in CARDINAL_VALUES or word == "one"  # not a cardinal there: "the one"
