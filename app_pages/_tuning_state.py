"""The Tuning page's shared state: slider keys, cached getters, and the pure helpers that move
profiles on and off the sliders (tested without Streamlit)."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
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

# Kept in the process, not st.cache_data: that would pickle and copy the arrays on every rerun (at
# a million runs the copy, not the re-score, is what a slider move waits for). The matrix is
# read-only (load_run_matrix sets it so), so every session shares one copy. Loading a million runs
# takes 9-12 s on a loaded 2-core machine (bench/volume.py), so once one is kept no page open waits
# for another: a matrix older than MATRIX_TTL_S is still served while a new one loads in a thread.
MATRIX_TTL_S = 300
_log = logging.getLogger(__name__)


class KeptMatrices:
    """One matrix per store epoch (at most `max_entries`): loaded on first use, then reloaded in the
    background when older than `ttl_s`, the old one served meanwhile. `load` and `clock` are
    injectable so the rule is tested without a store."""

    def __init__(self, load: Callable[[], RunMatrix], *, ttl_s: float, max_entries: int = 2,
                 clock: Callable[[], float] = time.monotonic,
                 start: Callable[[Callable[[], None]], None] | None = None) -> None:
        self._load, self._ttl_s, self._max_entries, self._clock = load, ttl_s, max_entries, clock
        self._start = start or (lambda work: threading.Thread(target=work, daemon=True,
                                                              name="tuning-matrix-reload").start())
        self._kept: dict[str, tuple[float, RunMatrix]] = {}
        self._reloading: set[str] = set()
        self._lock = threading.Lock()  # one first load at a time; sessions arriving meanwhile wait for it

    def get(self, epoch: str) -> RunMatrix:
        kept = self._kept.get(epoch)
        if kept is None:
            with self._lock:
                kept = self._kept.get(epoch)
                if kept is None:
                    kept = self._store(epoch, self._load())
        elif self._clock() - kept[0] > self._ttl_s and epoch not in self._reloading:
            self._reloading.add(epoch)
            self._start(lambda: self._reload(epoch))
        return kept[1]

    def preload(self, epoch: Callable[[], str]) -> None:
        """Load the matrix of the store `epoch()` names in the background, unless one is kept: a
        page opened meanwhile waits for this load (the first-load lock), not for one of its own."""
        def work() -> None:
            try:
                self.get(epoch())
            except Exception:  # no page to show it on: logged; the first open loads it then
                _log.exception("preloading the Tuning page's run matrix failed; the page will load it when opened")

        self._start(work)

    def age_s(self, epoch: str) -> float | None:
        kept = self._kept.get(epoch)
        return None if kept is None else self._clock() - kept[0]

    def clear(self) -> None:
        self._kept.clear()

    def _reload(self, epoch: str) -> None:
        try:
            self._store(epoch, self._load())
        except Exception:  # the thread has no page to show it on: logged, the kept matrix stays, retried later
            _log.exception("reloading the Tuning page's run matrix failed; the one loaded before is kept")
        finally:
            self._reloading.discard(epoch)

    def _store(self, epoch: str, matrix: RunMatrix) -> tuple[float, RunMatrix]:
        kept = self._kept[epoch] = (self._clock(), matrix)
        for stale in list(self._kept)[:-self._max_entries]:
            self._kept.pop(stale, None)
        return kept


_MATRICES = KeptMatrices(load_run_matrix, ttl_s=MATRIX_TTL_S)
_PRELOAD_ONCE = threading.Lock()
_preloaded = False


def preload_run_matrix() -> None:
    """Once per process (app.py, every session's first run calls it): the Tuning page's matrix loads
    in a background thread, so the first reviewer to open the page does not wait for it (at a
    million runs about 1 s of CPU and 124 MB; TUNING_PRELOAD=false turns it off)."""
    global _preloaded
    with _PRELOAD_ONCE:
        if _preloaded:
            return
        _preloaded = True
    _MATRICES.preload(run_store_epoch)


def cached_run_matrix() -> RunMatrix:
    """The stored runs' matrix of this store (run_store_epoch): loaded now the first time (with a
    spinner), afterwards the kept one, reloaded in the background once older than MATRIX_TTL_S."""
    epoch = run_store_epoch()
    if _MATRICES.age_s(epoch) is None:
        with st.spinner("Loading stored runs…"):
            return _MATRICES.get(epoch)
    return _MATRICES.get(epoch)


def run_matrix_age_s() -> float | None:
    """Seconds since the kept matrix of this store was loaded (None: none kept)."""
    return _MATRICES.age_s(run_store_epoch())


cached_run_matrix.clear = _MATRICES.clear  # type: ignore[attr-defined]  # the Reload runs button


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

