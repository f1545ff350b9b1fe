"""Entity mentions (codes, parameters, proper names, numbers with units) that link a query to its evidence."""

from __future__ import annotations

import functools
import re

# Alarm/error codes (SRVO-062), parameters ($MCR.$GENOVERRIDE), model numbers (KR-C5),
# capitalised multi-word names, and quantities with units.
_PATTERNS = (
    re.compile(r"\b[A-Z]{2,6}-\d{1,5}\b"),
    re.compile(r"\$[A-Z_][A-Z0-9_]*(?:\.\$?[A-Z_][A-Z0-9_]*)*"),
    re.compile(r"\b[A-Z][A-Za-z]*-[A-Z0-9]+\b"),
    re.compile(r"\b(?:[A-Z][a-z]+|[A-Z]{2,})(?:\s+(?:of\s+|the\s+)?(?:[A-Z][a-z]+|[A-Z]{2,}))+\b"),
    re.compile(r"\b\d+(?:\.\d+)?\s?(?:mm|ms|kg|Nm|V|A|Hz|h|hours|%|°C)\b"),
    re.compile(r"\b[A-Z]{2,}[A-Z0-9]*\b"),
)
_NOT_ENTITIES = frozenset({"I", "A", "OK", "THE", "AND", "OR", "NOT", "WHAT", "HOW", "WHY"})


def extract_entities(text: str) -> tuple[str, ...]:
    """Distinct entity mentions in order of appearance, normalised to lower case."""
    seen: dict[str, None] = {}
    spans: list[tuple[int, int]] = []
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(s <= start and end <= e for s, e in spans):
                continue  # already covered by a longer, more specific mention
            value = match.group(0).strip()
            if value.upper() in _NOT_ENTITIES or len(value) < 2:
                continue
            spans.append((start, end))
            seen.setdefault(value.lower(), None)
    return tuple(seen)


def mentions(text: str, entity: str) -> bool:
    """Whether `text` mentions `entity` (case-insensitive, on word boundaries)."""
    start = 0
    if _lowered_offsets_match(text, entity):
        # A cheap necessary condition first: most (entity, text) pairs fail it, and the
        # case-insensitive regex scans a paragraph in tens of microseconds.
        start = text.lower().find(entity.lower())
        if start < 0:
            return False
    # The lookbehind still sees text[start - 1] when the search starts at `start`.
    return _mention_pattern(entity).search(text, start) is not None


# The only non-ASCII characters `re` matches to ASCII letters under IGNORECASE
# (İ ı ~ i, ſ ~ s, K ~ k); İ is also the only one whose lower() is two characters.
_ASCII_CASE_LOOKALIKES = ("\u0130", "\u0131", "\u017f", "\u212a")


def _lowered_offsets_match(text: str, entity: str) -> bool:
    """Whether each regex match of `entity` in `text` is `entity.lower()` at the same offset of `text.lower()`."""
    return entity.isascii() and (text.isascii() or not any(c in text for c in _ASCII_CASE_LOOKALIKES))


@functools.lru_cache(maxsize=1024)
def _mention_pattern(entity: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(entity)}(?!\w)", re.IGNORECASE)
