"""Whether an answer says the opposite of what its question asks, and how far to trust that.

The sentence of the answer that matches the question's other terms best is read against the
question (ties go to the earlier one; a negation or opposite word anywhere else in the answer
does not count). Each rule kind below finds one way it can contradict the question: a
positive statement for a negated question ("What did X not do?" against "X did Y."), a
question word turned around ("lowest" against "highest", "non-local" against "local"), a
year, ordinal or number swapped ("in 2014" against "in 2004"), or a word or a name of the
question's phrase replaced ("killer B cells" against "killer T cells").

A rule kind is hard, and caps the answer's reflection and grade, only where it holds on both
corpora it was measured on (RULES): on SQuAD 2.0 it flags the first answers to unanswerable
questions far more often than those to answerable ones, and on the product's own handbook
(the demo corpus) it flags no right answer. A kind that fails either is a soft signal: the
reflection loses a bounded penalty. A handbook is written differently from the questions
SQuAD builds to look answerable: it states a relation one way ("lower $SENS = more
sensitive") for a question asked the other way, and asks "how do I do X without Y".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from services.judging._lexical import PHRASING, Term, coverage, is_negated, negated_conditions, negations, stems
from services.judging._opposites import negated_by_prefix, opposite_word, substitution, swapped

# A hard rule has to flag unanswerable questions' answers at least this many times as often
# as answerable ones' (so on a balanced sample three flags in four are right), and at least
# MIN_FLAGS times: fewer is too little to tell a rule from chance.
MIN_RATIO = 3.0
MIN_FLAGS = 5


@dataclass(frozen=True)
class Evidence:
    """What bench/contradictions.py counted for one rule kind (seed 13, 500 questions a class):
    first answers (balanced preset) it flags on SQuAD 2.0 answerable and unanswerable
    questions, and right answers (answerable, citing a relevant document) it flags among the
    demo questions and the handbook probes."""

    squad_answerable: int
    squad_unanswerable: int
    demo_right: int

    @property
    def holds(self) -> bool:
        return (self.demo_right == 0 and self.squad_unanswerable >= MIN_FLAGS
                and self.squad_unanswerable >= MIN_RATIO * self.squad_answerable)


@dataclass(frozen=True)
class Rule:
    kind: str
    evidence: Evidence
    # How the reason names the two words: "{asked}" of the question, "{said}" of the sentence.
    template: str
    # What the reason concludes, as a hard rule and as a soft one.
    verdict: tuple[str, str]

    @property
    def hard(self) -> bool:
        return self.evidence.holds


@dataclass(frozen=True)
class Contradiction:
    kind: str
    asked: str  # the question's word ("lowest", "2014"; "not" for a negated question)
    said: str  # what the sentence has in its place ("" for a negated question)
    hard: bool
    reason: str


_OPPOSITE = ("the question asks about '{asked}' but the sentence that matches it best says '{said}'",
             ("it states the opposite", "it may state the opposite"))
_SWAP = ("the question names '{asked}' but the sentence that matches it best says '{said}'",
         ("it is about something else", "it may be about something else"))
_SUBSTITUTE = ("the sentence that matches the question best has '{said}' where the question has '{asked}'",
               ("it is about something else", "it may be about something else"))
_NEGATED = ("the question is negated but the sentence that matches it best is not",
            ("it states the opposite", "it may state the opposite"))
_WITHOUT = ("the question asks for a way 'without' something but the sentence that matches it best has no negation",
            ("it states the opposite", "it may state the opposite"))

# Measured 2026-11-25 (seed 13, 500 questions a class; bench/contradictions.py prints them);
# negated_question again 2026-11-29 on the same answers, once a why's premise stopped counting (73 -> 72).
# "without" asks for a way under a condition ("How do I make detection more sensitive
# without false alarms?"), not for the complement of a statement: it is a kind of its own,
# and no SQuAD question of the sample has it. Comparatives and numbers are how a handbook
# states a relation or a limit ("lower $SENS = more sensitive" answers "less sensitive";
# "up to 32" answers "beyond 16"); a replaced phrase word flags one answerable SQuAD answer
# for every two unanswerable ones.
RULES: dict[str, Rule] = {rule.kind: rule for rule in (
    Rule("negated_question", Evidence(squad_answerable=1, squad_unanswerable=72, demo_right=0), *_NEGATED),
    Rule("without_condition", Evidence(squad_answerable=0, squad_unanswerable=0, demo_right=2), *_WITHOUT),
    Rule("opposite_word", Evidence(squad_answerable=0, squad_unanswerable=15, demo_right=2), *_OPPOSITE),
    Rule("negating_prefix", Evidence(squad_answerable=3, squad_unanswerable=11, demo_right=0), *_OPPOSITE),
    Rule("swapped_year", Evidence(squad_answerable=1, squad_unanswerable=17, demo_right=0), *_SWAP),
    Rule("swapped_ordinal", Evidence(squad_answerable=0, squad_unanswerable=9, demo_right=0), *_SWAP),
    Rule("swapped_number", Evidence(squad_answerable=2, squad_unanswerable=7, demo_right=1), *_SWAP),
    Rule("substituted_word", Evidence(squad_answerable=9, squad_unanswerable=18, demo_right=0), *_SUBSTITUTE),
    Rule("substituted_name", Evidence(squad_answerable=2, squad_unanswerable=16, demo_right=0), *_SUBSTITUTE),
)}


def best_matching(terms: Sequence[Term], sentences: Sequence[str]) -> str:
    """The sentence covering most of the question's terms other than its negation."""
    asserted = [t for t in terms if not t.negation]
    return sentences[max(range(len(sentences)), key=lambda i: (coverage(asserted, sentences[i]), -i))]


def contradictions(query: str, terms: Sequence[Term], sentences: Sequence[str]) -> tuple[Contradiction, ...]:
    """Every rule kind that finds the best-matching sentence contradicting the question, in
    RULES order (each read on its own: the measurement counts them apart)."""
    if not sentences:
        return ()
    best = best_matching(terms, sentences)
    found: list[Contradiction] = []
    for kind, asked, said in _findings(query, terms, best):
        rule = RULES[kind]
        template, (hard_verdict, soft_verdict) = rule.template, rule.verdict
        reason = f"{template.format(asked=asked, said=said)}: {hard_verdict if rule.hard else soft_verdict}"
        found.append(Contradiction(kind, asked, said, rule.hard, reason))
    return tuple(found)


def contradiction(query: str, terms: Sequence[Term], sentences: Sequence[str]) -> Contradiction | None:
    """The contradiction to act on: the first hard one, else the first soft one, else None."""
    found = contradictions(query, terms, sentences)
    return next((c for c in found if c.hard), found[0] if found else None)


def _findings(query: str, terms: Sequence[Term], best: str) -> list[tuple[str, str, str]]:
    """(kind, question word, sentence word) of every rule that fires, in RULES order."""
    found: list[tuple[str, str, str]] = []
    if not is_negated(best) and (any(t.negation for t in terms) or _states_a_negated_condition(query, best)):
        found.append(("without_condition", "without", "") if negations(query) == {"without"}
                     else ("negated_question", "not", ""))
    pairs: list[tuple[str, Callable[[str, str], tuple[str, str] | None]]] = [
        ("opposite_word", opposite_word), ("negating_prefix", negated_by_prefix)]
    for kind, rule in pairs:
        if pair := rule(query, best):
            found.append((kind, *pair))
    if value := swapped(query, best):
        found.append((f"swapped_{value[0]}", value[1], value[2]))
    if replaced := substitution(query, best, phrasing=PHRASING):
        found.append((f"substituted_{replaced[0]}", replaced[1], replaced[2]))
    return found


def _states_a_negated_condition(query: str, sentence: str) -> bool:
    """Whether the sentence states what a condition of the question negates: all of its words."""
    said = stems(sentence)
    return any(condition and condition <= said for condition in negated_conditions(query))
