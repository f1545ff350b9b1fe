"""Multi-part questions split into self-contained sub-questions, for the DECOMPOSE route."""

from __future__ import annotations

import re

from services.judging._lexicon import (
    CLAUSE_VERBS,
    COMPARISON_WORDS,
    ENUMERATION_COPULAS,
    ENUMERATION_QUESTION_WORDS,
    STEM_AUXILIARIES,
    STEM_QUESTION_WORDS,
    STEM_SUBJECTS,
    alternation,
)
from services.judging._words import AUXILIARIES, QUESTION_WORDS, WORD, surface
from services.retrieval.entities import extract_entities

# A clause joined by "and" is a question of its own only when both sides have a verb (or a
# question word): "mean and how do I clear it" splits, "the motor and cable" does not.
_VERBS = AUXILIARIES | CLAUSE_VERBS
_STEM = re.compile(rf"^((?:{alternation(STEM_QUESTION_WORDS)})\s+(?:{alternation(STEM_AUXILIARIES)})"
                   rf"\s+(?:{alternation(STEM_SUBJECTS)}))\s", re.IGNORECASE)
_ENUMERATION = re.compile(rf"^((?:{alternation(ENUMERATION_QUESTION_WORDS)})\s+(?:{alternation(ENUMERATION_COPULAS)}))"
                          r"\s+(.+)$", re.IGNORECASE)
_COMPARISON = re.compile(rf"\b({alternation(COMPARISON_WORDS)})\b", re.IGNORECASE)
_JOINER = re.compile(r"\s*(?:;|,?\s+and\s+also\s+|,?\s+and\s+)\s*")


def decompose(query: str, max_parts: int = 6) -> list[str]:
    """Self-contained sub-questions of a multi-part question; [query] when it has one part.

    Statements around the questions ("My program stops with MOTN-023.") are context: an
    object "it" in a sub-question is replaced by the entity they, or earlier parts, name.
    """
    text = " ".join(query.split())
    if not text:
        return []
    context: list[str] = []
    parts: list[str] = []
    for sentence in re.split(r"(?<=[?.!])\s+(?=[A-Z0-9\"'])", text):
        if not (sentence.endswith("?") or _first_word(sentence) in QUESTION_WORDS | AUXILIARIES):
            context.append(sentence)
            continue
        for clause in _split_clauses(sentence.rstrip("?.! ")):
            parts.append(_resolve_it(clause, " ".join(context)))
            context.append(clause)
    if len(parts) < 2:
        return [query]
    return list(dict.fromkeys(p[0].upper() + p[1:] + "?" for p in parts))[:max_parts]


def _first_word(text: str) -> str:
    words = WORD.findall(text.lower())
    return words[0] if words else ""


def _has_verb(text: str) -> bool:
    return any(w in _VERBS or w in QUESTION_WORDS for w in WORD.findall(text.lower()))


def _split_clauses(question: str) -> list[str]:
    for joiner in _JOINER.finditer(question):
        left, right = question[:joiner.start()].strip(), question[joiner.end():].strip()
        if not left or not right or not _has_verb(left) or not _has_verb(right):
            continue
        if _first_word(right) in QUESTION_WORDS | AUXILIARIES:
            return [*_enumerate(left), *_split_clauses(right)]
        if (stem := _STEM.match(left)) and _first_word(right) not in QUESTION_WORDS:
            return [left, *_split_clauses(f"{stem.group(1)} {right}")]
    return _enumerate(question)


def _enumerate(question: str) -> list[str]:
    """"What is X, Y and Z" -> one question per item, when the items are plain noun phrases."""
    match = _ENUMERATION.match(question)
    if not match or _COMPARISON.search(question):
        return [question]
    stem, rest = match.groups()
    items = [i.strip() for i in re.split(r",\s*(?:and\s+|or\s+)?|\s+and\s+", rest) if i.strip()]
    plain = all(len(i.split()) <= 6 and not _has_verb(i) for i in items)
    if len(items) < 2 or not plain or ("," not in rest and not all(extract_entities(i) for i in items)):
        return [question]
    singular = re.sub(r"\bare\b", "is", stem)
    return [f"{stem if item.endswith('s') else singular} {item}" for item in items]


def _resolve_it(clause: str, context: str) -> str:
    """Replace an object "it" (clear it, avoid it) by the first entity of the context; a
    subject "it" (does it, can it) is too often something else and is left alone."""
    mentioned = [e for e in extract_entities(context) if e.split()[0] not in QUESTION_WORDS]
    if not mentioned:
        return clause
    antecedent = surface(min(mentioned, key=lambda e: context.lower().find(e)), context)

    def replace(match: re.Match[str]) -> str:
        before = match.group(1)
        return match.group(0) if before.lower() in AUXILIARIES | QUESTION_WORDS else f"{before} {antecedent}"

    return re.sub(r"\b(\w+)\s+it\b", replace, clause)
