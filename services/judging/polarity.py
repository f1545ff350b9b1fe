"""Which way the contexts take a yes/no question's statement, for an answer that is a bare yes or no.

A bare reply asserts the question's own statement or denies it. Read as an answer is read (every
word, name and figure against the contexts; a word turned around; a quote with a word swapped),
the statement tells which way the contexts go where they say it plainly: they take it the other
way when they hold it with a word turned ("is not allowed" for "is allowed", "lowers" for
"raises") or another figure in its figure's place ("30 seconds" for "60 seconds"), and they state
it as asked when one sentence holds all of it with nothing turned. A reply going against them
is unsupported; one going with them is still only uncertain, and where they take no side
(the "no" a passage implies without a negation: "raises a SyntaxError" for "Can I ...?") which
way they go needs a reader (a model backend or an NLI model).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from services.judging._lexical import negations, quoted_list
from services.judging._morphology import related_in
from services.judging.atoms import NUMBER, YEAR, Atom, atoms
from services.judging.evidence import ClaimEvidence
from services.judging.verdict import GROUNDED_WORD_SUPPORT, reversal_text
from services.retrieval.text import tokenize

_FIGURES = (NUMBER, YEAR)


@dataclass(frozen=True)
class Polarity:
    turned: str | None = None  # how the contexts take the statement the other way, for the reason
    stated: bool = False  # one context sentence holds all of the statement, nothing turned

    def agrees(self, reply: str) -> bool | None:
        """Whether `reply` ("yes" or "no") goes the contexts' way; None when they take no side."""
        if self.turned:
            return reply == "no"
        if self.stated:
            return reply == "yes"
        return None


def statement(question: str) -> str:
    """The question's words read as a statement. The checks read words, figures and quoted runs,
    so the inverted auxiliary can stay where it is ("Is the timeout 60 seconds." still says 60)."""
    return question.strip().rstrip("?").strip() + "."


def read_polarity(read: Sequence[ClaimEvidence], swapped: tuple[str, str] | None, word_support: float) -> Polarity:
    """The polarity of a statement from its claims read against the contexts (`read`), the quote
    it changes (`swapped`, _quotes.changed_quote) and the share of its words the contexts hold."""
    turned = next((r.reversal for r in read if r.reversal), None) or swapped
    if turned is not None:
        return Polarity(f"the question's statement {reversal_text(turned)}")
    # A figure no context holds is the other way only where the sentence the rest stands in puts
    # another figure of its kind: a name or figure of the question's premise the contexts never
    # repeat ("Does argmax ...?" of argmax's own docstring) is not denied by them.
    replaced = [a for r in read if r.evidence is not None for a in r.unsupported_atoms
                if a.kind in _FIGURES and _another_figure(a, r.evidence.text)]
    if replaced and word_support >= GROUNDED_WORD_SUPPORT:
        return Polarity(f"the question's statement says {quoted_list([a.surface for a in replaced])} "
                        "where its context gives another figure")
    return Polarity(stated=bool(read) and all(map(_stated_in_its_sentence, read)))


def _stated_in_its_sentence(read: ClaimEvidence) -> bool:
    """Every content word of the claim, in some form, in its evidence sentence (what it speaks
    of included), and no negation there the claim lacks: one the reversal did not line up ("it
    is the comma which makes a tuple, not the parentheses") may still deny it."""
    sentence = read.evidence
    if sentence is None or read.unsupported_atoms:
        return False
    stems = frozenset(sentence.stems) | frozenset(sentence.antecedent_stems)
    return (all(s in stems or related_in(s, stems) for s in tokenize(read.claim.text))
            and negations(sentence.text) <= negations(read.claim.text))


def _another_figure(atom: Atom, sentence: str) -> bool:
    return any(a.kind == atom.kind and a.key != atom.key and (a.unit == atom.unit or not a.unit or not atom.unit)
               for a in atoms(sentence))
