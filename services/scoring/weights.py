"""Weights profiles: how much each confidence component counts, and where the levels start.

A profile is data (versioned and stored by services.scoring.profiles, edited on the Tuning
page); services.scoring.confidence measures the components it weights.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from services.errors import InputError
from services.scoring.mapping import ConfidenceMapping

COMPONENTS = (
    "top_score",
    "score_gap",
    "consensus",
    "bm25_dense_agreement",
    "low_spread",
    "entity_support",
    "low_diversity",
)
DEFAULT_WEIGHTS = {
    "top_score": 0.30,
    "score_gap": 0.20,
    "consensus": 0.15,
    "bm25_dense_agreement": 0.15,
    "low_spread": 0.10,
    "entity_support": 0.05,
    "low_diversity": 0.05,
}
LEVELS = ("HIGH", "MEDIUM", "LOW", "VERY LOW")
# The answering loop's thresholds a profile may set over every preset (seed 000/002/003/004;
# services.answering.presets.configured applies them): a share in [0, 1], the retry cap, and
# seed 001's adaptive cut-off. A profile without one leaves the preset's value.
LOOP_SHARES = ("reflection_min_score", "crag_correct_threshold", "crag_incorrect_threshold", "consensus_threshold")
LOOP_KEYS = (*LOOP_SHARES, "max_refinement_attempts", "adaptive_k")
MAX_RETRY_CAP = 10
INTERPRETATIONS = {
    "HIGH": "HIGH - Strong retrieval confidence",
    "MEDIUM": "MEDIUM - Moderate confidence, review recommended",
    "LOW": "LOW - Weak retrieval, mandatory review",
    "VERY LOW": "VERY LOW - Poor retrieval, expert review required",
}


@dataclass(frozen=True)
class WeightsProfile:
    """Weights and level thresholds: data, versioned, editable on the Tuning page."""

    name: str = "default"
    version: int = 1
    weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    high: float = 0.85
    medium: float = 0.70
    low: float = 0.50
    # collection -> retrieval mode -> the mapping self-calibration fitted there (empty: scores
    # are the weighted sums everywhere)
    mappings: Mapping[str, Mapping[str, ConfidenceMapping]] = field(default_factory=dict)
    # The loop thresholds this profile sets (LOOP_KEYS -> value); empty: every preset's own.
    loop: Mapping[str, float | int | bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_loop(self.loop)
        if set(self.weights) != set(COMPONENTS):
            raise InputError(f"weights must name exactly these components: {', '.join(COMPONENTS)}")
        if any(w < 0 for w in self.weights.values()) or sum(self.weights.values()) <= 0:
            raise InputError("weights must be non-negative and not all zero")
        if not 0 <= self.low <= self.medium <= self.high <= 1:
            raise InputError("thresholds must satisfy 0 <= low <= medium <= high <= 1")

    @property
    def label(self) -> str:
        return f"{self.name} v{self.version}"

    def weight_vector(self) -> np.ndarray:
        """Weights in COMPONENTS order, normalized to sum to 1 (so totals stay in [0, 1])."""
        vector = np.array([self.weights[c] for c in COMPONENTS], dtype=np.float64)
        return vector / vector.sum()

    def level(self, score: float) -> str:
        if score >= self.high:
            return "HIGH"
        if score >= self.medium:
            return "MEDIUM"
        if score >= self.low:
            return "LOW"
        return "VERY LOW"

    def mapping_for(self, collection: str | None, mode: str | None) -> ConfidenceMapping | None:
        return self.mappings.get(collection or "", {}).get(mode or "")

    def mappings_dict(self) -> dict[str, dict[str, dict[str, Any]]]:
        return {c: {m: mapping.to_dict() for m, mapping in by_mode.items()} for c, by_mode in self.mappings.items()}

    def to_dict(self) -> dict[str, Any]:
        data = {"name": self.name, "version": self.version, "weights": dict(self.weights),
                "high": self.high, "medium": self.medium, "low": self.low}
        if self.mappings:
            data["mappings"] = self.mappings_dict()
        return data | {"loop": dict(self.loop)} if self.loop else data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WeightsProfile:
        return cls(name=data["name"], version=int(data["version"]), weights=dict(data["weights"]),
                   high=float(data["high"]), medium=float(data["medium"]), low=float(data["low"]),
                   mappings=mappings_from_dict(data.get("mappings") or {}), loop=dict(data.get("loop") or {}))


def check_loop(loop: Mapping[str, Any]) -> None:
    """InputError naming the first loop value a profile cannot hold."""
    unknown = sorted(set(loop) - set(LOOP_KEYS))
    if unknown:
        raise InputError(f"unknown loop thresholds {', '.join(unknown)} (known: {', '.join(LOOP_KEYS)})")
    for name in LOOP_SHARES:
        value = loop.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1):
            raise InputError(f"the loop threshold {name} must be a number between 0 and 1, not {value!r}")
    cap = loop.get("max_refinement_attempts")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or not 0 <= cap <= MAX_RETRY_CAP):
        raise InputError(f"the retry cap must be a whole number of refinements from 0 to {MAX_RETRY_CAP}, not {cap!r}")
    if "adaptive_k" in loop and not isinstance(loop["adaptive_k"], bool):
        raise InputError(f"adaptive_k must be true or false, not {loop['adaptive_k']!r}")
    upper, lower = loop.get("crag_correct_threshold"), loop.get("crag_incorrect_threshold")
    # Set as a pair: one alone could cross the other bound of some preset and stop its runs.
    if (upper is None) != (lower is None):
        raise InputError("set CRAG's upper and lower thresholds together, or neither")
    if upper is not None and lower is not None and lower > upper:
        raise InputError(f"the CRAG lower threshold {lower} is above the upper one {upper}")


def mappings_from_dict(data: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, dict[str, ConfidenceMapping]]:
    if not isinstance(data, Mapping) or not all(isinstance(by_mode, Mapping) for by_mode in data.values()):
        raise InputError("stored mappings must be an object of collections, each an object of retrieval modes")
    return {c: {m: ConfidenceMapping.from_dict(d) for m, d in by_mode.items()} for c, by_mode in data.items()}


DEFAULT_PROFILE = WeightsProfile()
