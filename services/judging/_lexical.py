"""Query terms and coverage, the offline judge's word-level reading of a question: which of
its words and entities an answer has to mention, and which of them a text does.

The backend's modules read the word-level helpers from here: chunk sentences (_segments) and
sub-questions (_decompose) are re-exported. Contradictions (_contradiction) build on this
module, so they are imported from their own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from services.judging._decompose import decompose
from services.judging._lexicon import NEGATED_AUXILIARIES, NEGATION_WORDS, alternation
from services.judging._morphology import related_in
from services.judging._segments import Segment, clean, facts, segment_chunk
from services.judging._words import AUXILIARIES, QUESTION_WORDS, WORD, surface
from services.retrieval.entities import extract_entities, mentions
from services.retrieval.expansion import PHRASING_WORDS
from services.retrieval.text import STOPWORDS, tokenize

__all__ = ["PHRASING", "Segment", "Term", "asks_negated", "clean", "containment", "coverage", "covers", "decompose",
           "facts", "is_negated", "missing", "negated_conditions", "negations", "negators", "outside_conditions", "query_terms",
           "quoted_list", "segment_chunk", "stems"]

_FILLER = PHRASING_WORDS  # an answer need not repeat how a question is phrased
# How a question is asked rather than what about: never a word an answer has to repeat or replace.
PHRASING = _FILLER | AUXILIARIES
# A negated question asks about the complement of what a positive statement says: "What is
# not composed of X" is not answered by "It is composed of X". Negation words are stopwords
# to retrieval, so the query's negation becomes a term of its own that only a negated text
# covers. The stems of negated auxiliaries ("didn" of "didn't") are phrasing, not terms.
_NEGATION = re.compile(rf"\b(?:{alternation(NEGATION_WORDS)})\b|\w*n[’']t\b", re.IGNORECASE)
# "whether or not", "may or may not": a question naming both ways is not negated.
_BOTH_WAYS = re.compile(r"\bor\s+(?:\w+\s+)?not\b", re.IGNORECASE)
# Where a negator may be capitalised and still negate; elsewhere "None" or "NOT" is a name.
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]\W*)$")
_PREMISED = re.compile(r"^\W*(?:why|how\s+come)\b", re.IGNORECASE)  # its negation is given
# A condition, up to the clause's end: "if", "unless", "whenever" anywhere; "when", "while" and
# "once" unless they ask ("When did ...?").
_CONDITION = re.compile(rf"\b(?:if|unless|whenever|(?:when|while|once)(?!\s+(?:{alternation(AUXILIARIES)}|\w+n[’']t)\b))\b[^,;:?]*",
                        re.IGNORECASE)


@dataclass(frozen=True)
class Term:
    """A query word or entity an answer is expected to mention."""

    surface: str  # as written in the query
    stems: tuple[str, ...]
    entity: bool
    negation: bool = False  # the query's negation: covered by any negated text


def stems(text: str) -> frozenset[str]:
    return frozenset(tokenize(text))


def is_negated(text: str) -> bool:
    return bool(_NEGATION.search(text))


def negations(text: str) -> frozenset[str]:
    """The negation words of a text, lower case, leaving out those of a phrase naming both ways
    ("whether or not") and those written as names. "doesn't", "cannot" and "can not" all say
    "not": a claim with one where its context has the other turns nothing around."""
    return frozenset(negators(text))


_CLAUSE_END = re.compile(r"[,;:.!?()]")


def negated_words(text: str) -> frozenset[str]:
    """The first two content words (stems) after each negation of `text`, in its clause: what it
    negates ("cannot change the string" -> change, string; "does not open, and the pump" -> open)."""
    found: set[str] = set()
    for match in _NEGATION.finditer(text):
        found.update(tokenize(_CLAUSE_END.split(text[match.end():match.end() + 60], maxsplit=1)[0])[:2])
    return frozenset(found)


def negators(text: str) -> dict[str, str]:
    """negations(text), each with the first word that says it, as written ("not": "doesn't")."""
    found: dict[str, str] = {}
    text = _BOTH_WAYS.sub(" ", text)
    for match in _NEGATION.finditer(text):
        written = match.group(0)
        if not written.islower() and not _SENTENCE_START.search(text[:match.start()]):
            continue  # "other than None", "bitwise NOT": a value and an operator, not negators
        word = written.lower().replace("’", "'")
        found.setdefault("not" if word == "cannot" or word.endswith("n't") else word, written)
    return found


def asks_negated(question: str) -> bool:
    """Whether the question asks about a negated statement ("What did X not do?"). A negation
    in a condition (negated_conditions) asks nothing, nor does the premise of a why ("Why
    doesn't str.replace change my string?" is answered by a cause, not by a "not")."""
    if _PREMISED.match(question):
        return False
    return bool(negations(_CONDITION.sub(" ", question)))


def outside_conditions(text: str, spoken_of: frozenset[str]) -> str:
    """`text` without the condition clauses none of whose words `spoken_of` (stems) holds: a
    negation in "If no index is specified, the last item is removed." is the condition's, and a
    claim about what happens then ("It removes the last item.") leaves nothing of it out."""
    return _CONDITION.sub(lambda m: m.group(0) if frozenset(tokenize(m.group(0))) & spoken_of else " ", text)


def negated_conditions(question: str) -> tuple[frozenset[str], ...]:
    """The content stems of each negated condition of the question: "what if it doesn't divide
    evenly?" is answered by what happens then ("an error is raised"), and contradicted only by
    a sentence stating the condition unnegated ("The array divides evenly ...")."""
    if _PREMISED.match(question):
        return ()
    return tuple(frozenset(tokenize(m.group(0))) - NEGATED_AUXILIARIES
                 for m in _CONDITION.finditer(question) if negations(m.group(0)))


def query_terms(query: str) -> tuple[Term, ...]:
    """Entities, then remaining content words, of a query; question phrasing left out."""
    terms: list[Term] = []
    entity_stems: set[str] = set()
    for entity in extract_entities(query):
        words = entity.split()
        while words and (words[0] in QUESTION_WORDS or words[0] in STOPWORDS):
            words = words[1:]  # "What TCP" is a mention of TCP
        entity_tokens = tuple(tokenize(" ".join(words)))
        if not entity_tokens or entity_stems.issuperset(entity_tokens):
            continue
        terms.append(Term(surface(" ".join(words), query), entity_tokens, True))
        entity_stems.update(entity_tokens)
    seen = set(entity_stems)
    for word in WORD.findall(query):
        lowered = word.lower()
        if (lowered in STOPWORDS or lowered in _FILLER or lowered in NEGATED_AUXILIARIES or len(lowered) < 2
                or (len(lowered) < 3 and word.islower())):
            continue  # "re" of re-validated; "J2", "T1", "IP" stay
        stem = tokenize(lowered)
        if stem and stem[0] not in seen:
            seen.add(stem[0])
            terms.append(Term(word, (stem[0],), False))
    if asks_negated(query):
        terms.append(Term("not", (), False, negation=True))
    return tuple(terms)


def covers(term: Term, text: str, text_stems: frozenset[str]) -> bool:
    if term.negation:
        return is_negated(text)
    if term.entity and mentions(text, term.surface):
        return True
    return all(s in text_stems or related_in(s, text_stems) for s in term.stems)


def coverage(terms: Sequence[Term], text: str) -> float:
    """Share of the query's terms the text mentions (1.0 when the query has none)."""
    if not terms:
        return 1.0
    text_stems = stems(text)
    return sum(covers(t, text, text_stems) for t in terms) / len(terms)


def missing(terms: Sequence[Term], texts: Iterable[str]) -> list[str]:
    """Surfaces of the terms no text mentions."""
    pool = list(texts)
    pool_stems = [stems(t) for t in pool]
    return [t.surface for t in terms if not any(covers(t, x, s) for x, s in zip(pool, pool_stems, strict=True))]


def containment(part: frozenset[str], whole: frozenset[str]) -> float:
    return len(part & whole) / len(part) if part else 0.0


def quoted_list(items: Sequence[str]) -> str:
    return ", ".join(f"'{i}'" for i in items)
