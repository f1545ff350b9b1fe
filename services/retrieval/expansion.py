"""Query expansion by pseudo-relevance feedback: new terms from the top-ranked chunks.

It reads only retrieved text, so every answer backend gets the same terms; the pipeline
hands them to `AnswerBackend.refine_query` as `expansion_terms`.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from services.domain import Hit
from services.retrieval.entities import extract_entities
from services.retrieval.text import STOPWORDS, tokenize

PRF_DEPTH = 3  # the top chunks pseudo-relevance feedback trusts to be on topic
EXPANSION_TERMS = 5

_WORD = re.compile(r"[^\W_]+")
# Words a question is phrased with rather than about ("often", "type of", "the name of"):
# frequent in on-topic text, yet they find nothing new. The second group names the kind of
# answer wanted ("What type of", "In what year", "the name of", "an example of", "What is X
# called"): an answer gives the thing, not the word, so the offline judge does not ask an
# answer to repeat any of these either (services/judging/_lexical.py).
PHRASING_WORDS = frozenset(
    """often much many long mean means meaning take takes get gets getting need needs know tell
    explain describe happen happens use used using way also else exactly possible please make makes
    come comes keep keeps kept more most before after between because must done up any some all
    each other only just
    type types kind kinds sort sorts year years date century decade name names term terms called
    example examples percentage percent number amount whose along commonly typically""".split()
)


def expansion_terms(query: str, hits: Sequence[Hit], n: int = EXPANSION_TERMS) -> list[str]:
    """Up to `n` terms from the top `PRF_DEPTH` hits that the query does not already say."""
    return prf_terms(query, [h.text for h in hits[:PRF_DEPTH]], n)


def prf_terms(query: str, texts: Sequence[str], n: int = EXPANSION_TERMS) -> list[str]:
    """Terms weighted by rank-discounted frequency in the texts times an idf over them,
    leaving out what the query already says; surface words as first written. Codes with a
    digit ("SRVO-063") count as one term, and their parts are not repeated after them."""
    query_stems = frozenset(tokenize(query))
    per_text: list[Counter[tuple[str, ...]]] = []
    surfaces: dict[tuple[str, ...], str] = {}
    for text in texts:
        counts: Counter[tuple[str, ...]] = Counter()
        for entity in extract_entities(text):
            key = tuple(tokenize(entity))
            if len(key) > 1 and any(ch.isdigit() for ch in entity) and not query_stems.issuperset(key):
                counts[key] += len(re.findall(re.escape(entity), text, re.IGNORECASE))
                surfaces.setdefault(key, _surface(entity, text))
        for word in _WORD.findall(text):
            lowered = word.lower()
            if lowered in STOPWORDS or lowered in PHRASING_WORDS or len(lowered) < 3 or not lowered.isalpha():
                continue
            key = tuple(tokenize(lowered))
            if key and key[0] not in query_stems:
                counts[key] += 1
                surfaces.setdefault(key, lowered if not word.isupper() else word)
        per_text.append(counts)
    document_frequency = Counter(key for counts in per_text for key in counts)
    scores: dict[tuple[str, ...], float] = defaultdict(float)
    for rank, counts in enumerate(per_text):
        for key, tf in counts.items():
            scores[key] += tf / (rank + 1) * math.log(1 + len(per_text) / document_frequency[key])
    chosen: list[tuple[str, ...]] = []
    for key, _score in sorted(scores.items(), key=lambda kv: (-kv[1], surfaces[kv[0]])):
        if any(set(key) <= set(c) for c in chosen):
            continue  # "srvo" adds nothing once "SRVO-063" is in
        chosen.append(key)
        if len(chosen) == n:
            break
    return [surfaces[key] for key in chosen]


def _surface(entity: str, text: str) -> str:
    """The entity as the text writes it (case and spacing)."""
    match = re.search(r"\s+".join(map(re.escape, entity.split())), text, re.IGNORECASE)
    return match.group(0) if match else entity
