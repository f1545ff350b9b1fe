"""The judge's verdict on one answer: P(supported), a label, the reason, and per-claim evidence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from services.domain import plain

SUPPORTED, UNCERTAIN, UNSUPPORTED, ABSTAINED, UNCHECKED = "supported", "uncertain", "unsupported", "abstained", "unchecked"
UNSUPPORTED_BELOW = 0.5  # P(supported) under this is labelled unsupported
# An answer is grounded when no name or number it adds is missing from the contexts, none of
# its words is turned around against its evidence (nor swapped in a sentence it otherwise
# quotes: services.judging._quotes), and the contexts hold this share of the
# other words it adds (a paraphrase may use a word or two of its own).
GROUNDED_WORD_SUPPORT = 0.75


@dataclass(frozen=True)
class ClaimCheck:
    """One claim of the answer as a reviewer reads it: what it adds, what no context holds,
    and the context sentence that supports it best."""

    text: str
    added: tuple[str, ...]  # words the claim adds to the question
    unsupported: tuple[str, ...]  # of those (names, numbers, words), the ones no context holds
    evidence: str  # the best-supporting context sentence ("" when there is none)
    context: int | None  # its context, 1-based
    support: float  # share of the claim's additions that sentence holds
    reversed: tuple[str, str] | None = None  # (claim word, the opposite the evidence says)

    def to_dict(self) -> dict[str, Any]:
        return plain(self)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class Verdict:
    p_supported: float
    label: str  # supported | uncertain | unsupported | abstained | unchecked
    reason: str  # always agrees with the label
    auto_accept: bool  # P(supported) at or above the model's accept_at
    claims: tuple[ClaimCheck, ...] = ()
    expected: str = "any"  # the kind of answer the question asks for
    features: dict[str, float] = field(default_factory=dict)
    model_version: str = ""

    @property
    def grounded(self) -> bool:
        return self.label not in (ABSTAINED, UNCHECKED) and grounded(self.features)

    @property
    def unsupported_words(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(w for c in self.claims for w in c.unsupported))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = plain(self)
        data["claims"] = list(data["claims"])
        return data


def grounded(features: dict[str, float]) -> bool:
    return (not features.get("unsupported_atom") and not features.get("reversal")
            and not features.get("quote_changed") and features.get("word_support", 0.0) >= GROUNDED_WORD_SUPPORT)


def reversal_text(reversed_: tuple[str, str], where: str = "its context") -> str:
    """How a reversal reads: "says 'raises' where context 2 says 'lowers'", or, for a negation
    one side lacks, "says 'cannot' where context 2 states it without"."""
    said, opposite = reversed_
    if not opposite:
        return f"says '{said}' where {where} states it without"
    if not said:
        return f"leaves out the '{opposite}' of {where}"
    return f"says '{said}' where {where} says '{opposite}'"
