"""Each claim read against the contexts: what of its additions they hold, the sentence that
supports it, and whether that sentence is about what the question asks.

Support is checked on what a claim adds, one atom at a time (a name or number no context
holds is unsupported, whatever else matches) and word by word for the rest. The evidence
for a claim is the context sentence holding most of its additions, ties broken by how much
of the question it covers. Whether the claim answers the question is read from that
sentence: the question's words near the added ones ("locality"), against the other names and
numbers of the same kind the contexts offer, so that a right name taken from the passage's
wrong sentence, or the option a passage does not pair with the question, scores below the
one it does.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from services.judging._lexical import Term, coverage, negated_words, negations, negators, outside_conditions
from services.judging._lexicon import ANTONYM_PAIRS, REVERSAL_PAIRS
from services.judging._morphology import related_in
from services.judging._opposites import negated_by_prefix
from services.judging.answer_type import asks_yes_or_no
from services.judging.atoms import Atom, atoms, holds
from services.judging.claims import Claim
from services.judging.context_sentences import ContextSentence
from services.retrieval.text import tokenize

LOCALITY_REACH = 4.0  # tokens: a question word this far from the answer counts half
MAX_CANDIDATES = 40  # competing names/numbers read per claim
ALIGNED = 0.8  # share of a claim's other additions its evidence must hold for a reversal to count


@dataclass(frozen=True)
class ClaimEvidence:
    """What the contexts say to one claim."""

    claim: Claim
    unsupported_atoms: tuple[Atom, ...]
    unsupported_words: tuple[str, ...]  # added words (as written) no context holds nor the question gives
    word_support: float  # share of the added stems some context holds (1.0 when none added)
    evidence: ContextSentence | None
    evidence_support: float  # share of the claim's additions in the evidence sentence
    question_coverage: float  # share of the question's terms the evidence sentence names
    best_coverage: float  # ...and the most any context sentence names
    locality: float  # 0-1: the question's words near the claim's additions in the evidence
    rival_locality: float  # the best locality of another name/number of the same kind
    rival: tuple[str, int] | None  # that name or number as written, and its context (0-based)
    reversal: tuple[str, str] | None  # (claim word, the evidence's opposite)



def read_claim(question: str, terms: Sequence[Term], claim: Claim, pool: Sequence[ContextSentence],
               contexts: Sequence[str], *, asked: Mapping[str, float], given: str = "") -> ClaimEvidence:
    """`claim` against the contexts; `asked`: the question's words as asked_weights weighs them;
    `given`: text whose names and numbers the answer did not invent (a claim read whole, as a
    restatement is, holds the question's: "Python" in "Does Python have ...: There are no complex
    literals." is the question's premise, not a fabrication, whether or not a context names it)."""
    context_stems = _stems_of(tuple(contexts))
    unsupported_atoms = tuple(a for a in claim.added_atoms
                              if not any(holds(a, c) for c in contexts) and not holds(a, given))
    held = [s in context_stems or related_in(s, context_stems) for s in claim.added_stems]
    # The signal counts what the contexts hold; the words shown as invented leave out the
    # question's own ("Argmax" in "Argmax returns the first occurrence." for "Does argmax ...?").
    given_stems = frozenset(tokenize(given))
    unsupported_words = tuple(w for w, s, ok in zip(claim.added_words, claim.added_stems, held, strict=True)
                              if not ok and s not in given_stems)
    word_support = sum(held) / len(held) if held else 1.0
    best, best_key, best_share, best_coverage = None, (-1.0, -1.0, -1.0), 0.0, 0.0
    claimed_negations = negations(claim.text)
    for sentence in pool:
        share = _share(claim, sentence)
        # Ties on what the claim adds go to the sentence negating as the claim does (negations
        # are stopwords to the share), then to the one naming most of the question.
        agrees = float(negations(sentence.text) == claimed_negations)
        key = (share, agrees, coverage(terms, sentence.speaks_of) if terms else 0.0)
        best_coverage = max(best_coverage, key[2])
        if key > best_key:
            best, best_key, best_share = sentence, key, share
    if best is None:
        return ClaimEvidence(claim, unsupported_atoms, unsupported_words, word_support, None, 0.0, 0.0, 0.0, 0.0,
                             0.0, None, None)
    own = _answer_stems(claim)
    near = locality(asked, own, best)
    rivals = _rivals(claim, pool, asked=frozenset(asked))
    rival, rival_at = 0.0, None
    for sentence in pool:
        stems = frozenset(sentence.stems)
        for rival_stems, surface in rivals.items():
            if stems.issuperset(rival_stems) and (nearness := locality(asked, rival_stems, sentence)) > rival:
                rival, rival_at = nearness, (surface, sentence.context)
    # Read only against evidence that holds what the claim adds: a paraphrase from elsewhere
    # words things its own way.
    reversal = None if _quoted(claim.text, best.text) else (
        turned_around(claim.text, best.text) or negated_by_prefix(claim.text, best.text))
    if reversal is not None and _share(claim, best, leaving_out=_stem_of(reversal[0])) < ALIGNED:
        reversal = None
    if reversal is not None and _presupposed(question, claim, best.text, reversal):
        reversal = None
    return ClaimEvidence(claim, unsupported_atoms, unsupported_words, word_support, best, best_share,
                         best_key[2], best_coverage, near, rival, rival_at, reversal)


def _presupposed(question: str, claim: Claim, evidence: str, reversal: tuple[str, str]) -> bool:
    """Whether a wh-question's own framing is what the reversal reads, not what the answer adds:
    the claim says the question's word against its evidence ("incapable" in "Hold a set speed was
    the centrifugal governor incapable of doing."), negates as the question does, or lacks a
    negation the question lacks too where the evidence's negation is not about the answer's
    additions ("Pauli is the principle about relating spin and space variables." against a
    passage sentence holding "not"). A yes/no question asks its statement: restating it asserts it."""
    if asks_yes_or_no(question):
        return False
    said, opposite = reversal
    asked = negators(question)
    if said and opposite:  # an opposite word
        return _stem_of(said) in tokenize(question)
    if said:  # the claim negates where the evidence does not
        return any(kind in asked for kind in negators(said))
    if any(kind in asked for kind in negators(opposite)):  # the question negates: its answer must too
        return False
    return not negated_words(evidence) & frozenset(claim.added_stems)


def _quoted(claim: str, sentence: str) -> bool:
    """Whether the claim is the sentence's own words, in order: a quote, or a piece of one (an
    answer's sentence cut at "[1,2]", read as a citation marker), turns nothing around even
    where the rest of the sentence holds a "not"."""
    words = _WORDS.findall(claim.lower())
    return bool(words) and f" {' '.join(words)} " in f" {' '.join(_WORDS.findall(sentence.lower()))} "


def _stem_of(word: str) -> str:
    stems = tokenize(word)
    return stems[0] if stems else word


# The antonym and reversal pairs by stem, both ways: "raises" against "lowers" is "raised"
# against "lowered".
_OPPOSITE_STEMS: dict[str, frozenset[str]] = {}
for _a, _b in ANTONYM_PAIRS + REVERSAL_PAIRS:
    for _x, _y in ((_a, _b), (_b, _a)):
        _OPPOSITE_STEMS[_stem_of(_x)] = _OPPOSITE_STEMS.get(_stem_of(_x), frozenset()) | {_stem_of(_y)}
_LOWER_WORD = re.compile(r"(?<![\w-])[a-z]+(?![\w-])")
_WORDS = re.compile(r"\w+")
_CAPITALS = re.compile(r"(?<![\w-])[A-Z]{2,}(?![\w-])")


def _reversible_words(text: str) -> list[str]:
    """The text's words a reversal is read from: in lower case, a capitalised word being a name
    ("South Carolina"); in capitals, a state a manual spells so ("is ON", "set to OFF") is a word
    when it has an opposite."""
    text = _CAPITALS.sub(lambda m: m.group(0).lower() if _stem_of(m.group(0).lower()) in _OPPOSITE_STEMS
                         else m.group(0), text[:1].lower() + text[1:])
    return _LOWER_WORD.findall(text)


def turned_around(claim: str, evidence: str) -> tuple[str, str] | None:
    """(claim word, the evidence's word for its opposite) when the claim says a word its evidence
    turns around and does not say itself, or negates what the evidence states ("cannot" for
    "can": (the negation, "")) or states what it negates (("", the negation)). Capitalised
    words are names ("South Carolina"), except states in capitals (_reversible_words)."""
    # A negation inside either side's condition clause ("If no index is specified, ...") is the
    # condition's: compared only where the other side speaks of that condition.
    claimed_not = negators(outside_conditions(claim, frozenset(tokenize(evidence))))
    stated_not = negators(outside_conditions(evidence, frozenset(tokenize(claim))))
    flipped = claimed_not.keys() ^ stated_not.keys()
    if flipped:
        word = sorted(flipped)[0]
        return (claimed_not[word], "") if word in claimed_not else ("", stated_not[word])
    said = {_stem_of(w): w for w in _reversible_words(evidence)}
    claimed = {_stem_of(w): w for w in _reversible_words(claim)}
    for stem, word in claimed.items():
        if stem in said:
            continue
        opposite = next((said[o] for o in sorted(_OPPOSITE_STEMS.get(stem, ())) if o in said and o not in claimed), None)
        if opposite is not None:
            return word, opposite
    return None


@lru_cache(maxsize=1024)
def _stems_of(contexts: tuple[str, ...]) -> frozenset[str]:
    """Every word stem of the contexts' whole texts: support is read from all of a context, not
    only from the sentences it segments into (a list item or row the segmenter skips counts)."""
    return frozenset(s for text in contexts for s in tokenize(text))


def _share(claim: Claim, sentence: ContextSentence, *, leaving_out: str = "") -> float:
    """Share of the claim's additions (atoms count double: they are what is checked) the sentence
    holds; `leaving_out`, a stem not counted (the word a reversal turned around)."""
    stems = frozenset(sentence.stems)
    parts = [2.0 * holds(a, sentence.text) for a in claim.added_atoms]
    weights = [2.0] * len(parts)
    added = [s for s in claim.added_stems if s != leaving_out]
    parts += [1.0 * (s in stems or related_in(s, stems)) for s in added]
    weights += [1.0] * len(added)
    return sum(parts) / sum(weights) if weights else 0.0


def _answer_stems(claim: Claim) -> tuple[str, ...]:
    atom_stems = tuple(s for a in claim.added_atoms for s in tokenize(a.surface))
    return atom_stems or claim.added_stems


def asked_weights(terms: Sequence[Term], pool: Sequence[ContextSentence], *,
                  avoid: frozenset[str] = frozenset()) -> dict[str, float]:
    """The question's stems (`terms` not negated, less `avoid`: the stems of its options, which say
    nothing about which option a sentence pairs with the question), each weighed by how few of the contexts' sentences name it, with
    what their pronouns stand for (ln((N + 1) / df); a stem none names weighs as one that one
    names). A word every sentence names (the company a whole passage is about) says nothing
    about which of its phrases answers: read at full weight it made 'KX', beside "Its" that
    stands for "Kestrel Robotics", nearer "the plant of Kestrel Robotics" than 'Kobe' beside
    "plant". With one sentence every weight is equal: the mean as before."""
    asked = dict.fromkeys(s for t in terms if not t.negation for s in t.stems if s not in avoid)
    named = [frozenset(s.stems) | frozenset(s.antecedent_stems) for s in pool]
    n = len(named)
    return {stem: math.log((n + 1) / max(sum(stem in stems for stems in named), 1)) for stem in asked}


def locality(asked: Mapping[str, float], own: Sequence[str], sentence: ContextSentence) -> float:
    """Weighted mean over the question's stems (`asked`, stem -> weight) of 1 / (1 + distance /
    reach) to the nearest of `own` in the sentence, read within the clause holding `own` (the
    best, where several do): 1 when every question word sits next to the answer, 0 when none is
    there. A question word only the sentence's antecedent names stands where its pronoun does, first."""
    if not sentence.clauses:
        return _nearness(asked, own, sentence.stems, sentence.antecedent_stems)
    return max((_nearness(asked, own, clause, sentence.antecedent_stems if i == 0 else ())
                for i, clause in enumerate(sentence.clauses) if set(own) & set(clause)), default=0.0)


def _nearness(asked: Mapping[str, float], own: Sequence[str], sentence: Sequence[str], antecedent: Sequence[str]) -> float:
    spots = [i for i, s in enumerate(sentence) if s in own]
    weight = sum(asked.values())
    if not weight or not spots:
        return 0.0
    total = 0.0
    for stem, w in asked.items():
        places = [i for i, s in enumerate(sentence) if s == stem] or ([-1] if stem in antecedent else [])
        if places:
            distance = min(abs(i - j) for i in places for j in spots)
            total += w / (1.0 + distance / LOCALITY_REACH)
    return total / weight


def _rivals(claim: Claim, pool: Sequence[ContextSentence], *, asked: frozenset[str]) -> dict[tuple[str, ...], str]:
    """Names, numbers and dates of the kinds the claim adds that the contexts offer instead:
    their stems, and each as first written. A name sharing a word with what the question asks
    (`asked`, its options left out) is what the question is about, not another answer to it: it
    sits nearest the question's words by being one of them ("Robotics" for "the head office of
    Kestrel Robotics", which made every right answer's rival)."""
    kinds = {a.kind for a in claim.added_atoms}
    if not kinds:
        return {}
    own = {(a.kind, a.key) for a in claim.added_atoms}
    own_stems = set(_answer_stems(claim))
    rivals: dict[tuple[str, ...], str] = {}
    for sentence in pool:
        for atom in atoms(sentence.text):
            stems = tuple(tokenize(atom.surface))
            if atom.kind in kinds and (atom.kind, atom.key) not in own and stems and not set(stems) & (own_stems | asked):
                rivals.setdefault(stems, atom.surface)
                if len(rivals) >= MAX_CANDIDATES:
                    return rivals
    return rivals
