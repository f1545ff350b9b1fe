"""The Tuning page's shared state: slider keys, cached getters, and the pure helpers that move
profiles on and off the sliders (tested without Streamlit)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import streamlit as st

from app_pages.common import as_plain, cached_active_profile_label
from services.errors import InputError
from services.scoring.profiles import ScoringProfile, active_profile, list_profiles
from services.scoring.run_matrix import run_store_epoch
from services.scoring.tuning import RunMatrix, load_run_matrix
from services.scoring.weights import COMPONENTS, WeightsProfile

WEIGHT_KEYS = {c: f"tuning.w.{c}" for c in COMPONENTS}
THRESHOLD_KEYS = {"high": "tuning.t.high", "medium": "tuning.t.medium", "low": "tuning.t.low"}
LAST_VALID_KEY = "tuning.last_valid"  # the profile drawn while the sliders are invalid


# --- cached getters ----------------------------------------------------------------------------

# A resource, not data: st.cache_data would pickle and copy the arrays on every rerun (at a
# million runs that copy, not the re-score, is what a slider move waits for). The matrix is
# read-only (load_run_matrix sets it so), so every session may share the one copy.
MATRIX_TTL_S = 300


@st.cache_resource(ttl=MATRIX_TTL_S, show_spinner="Loading stored runs…", max_entries=2)
def _kept_run_matrix(store_epoch: str) -> RunMatrix:
    return load_run_matrix()


def cached_run_matrix() -> RunMatrix:
    """The stored runs' matrix, loaded at most MATRIX_TTL_S ago from this store (run_store_epoch)."""
    return _kept_run_matrix(run_store_epoch())


cached_run_matrix.clear = _kept_run_matrix.clear  # type: ignore[attr-defined]  # the Reload runs button


@st.cache_data(ttl=10, show_spinner=False)
def cached_active() -> ScoringProfile:
    return active_profile()


@st.cache_data(ttl=30, show_spinner=False)
def cached_profiles() -> list[tuple[int, WeightsProfile, bool]]:
    return list_profiles()


def profiles_changed() -> None:
    cached_active.clear()
    cached_profiles.clear()
    cached_active_profile_label.clear()


# --- pure helpers ------------------------------------------------------------------------------

def slider_values(profile: WeightsProfile) -> dict[str, float]:
    """Session values that put `profile` on the sliders (weights scaled into [0, 1], ratios kept)."""
    scale = max(1.0, *profile.weights.values())
    values = {WEIGHT_KEYS[c]: float(profile.weights[c]) / scale for c in COMPONENTS}
    return values | {key: float(getattr(profile, name)) for name, key in THRESHOLD_KEYS.items()}


def fitted_slider_values(weights: Mapping[str, float]) -> dict[str, float]:
    """Fitted shares (summing to 1) as slider positions, on the sliders' 0.01 grid."""
    return {WEIGHT_KEYS[c]: round(float(weights[c]), 2) for c in COMPONENTS}


def ceil_to_step(value: float, step: float = 0.01) -> float:
    """Round a threshold up onto the slider grid: accepting score >= it keeps at least the precision."""
    return min(1.0, math.ceil(round(value / step, 6)) * step)


def profile_from_sliders(values: Mapping[str, Any], base: WeightsProfile) -> WeightsProfile:
    """The profile on the sliders, or InputError naming the rule it breaks. It keeps `base`'s
    confidence mappings: a tuned profile must not silently drop a self-calibration."""
    weights = {c: float(values[WEIGHT_KEYS[c]]) for c in COMPONENTS}
    high, medium, low = (float(values[THRESHOLD_KEYS[name]]) for name in ("high", "medium", "low"))
    if not low <= medium <= high:
        raise InputError(f"Thresholds must satisfy low ≤ medium ≤ high; now low {low:.2f}, medium {medium:.2f}, "
                         f"high {high:.2f}.")
    if sum(weights.values()) <= 0:
        raise InputError("At least one weight must be above zero.")
    return WeightsProfile(name=base.name, version=base.version, weights=weights, high=high, medium=medium, low=low,
                          mappings=base.mappings)


# --- callbacks and shared widgets ------------------------------------------------------------------

def set_sliders(values: Mapping[str, float]) -> None:
    for key, value in values.items():
        st.session_state[key] = value


def show_result(key: str) -> None:
    """A callback's outcome, once; it names profiles, so it is shown as plain text."""
    result = st.session_state.pop(key, None)
    if result is not None:
        (st.success if result[0] == "success" else st.error)(as_plain(result[1]))

