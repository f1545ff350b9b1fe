"""Tuning: weights and thresholds on sliders, every stored run re-scored live, calibration
against reviewer verdicts, fits from verdicts, versioned profiles (save, activate, compare), and
self-calibration of a collection. Each tab's view is its own module: _tuning_effect,
_tuning_calibration, _tuning_profiles and _self_calibration; _tuning_state holds what they share."""

from __future__ import annotations

import streamlit as st

from app_pages import _self_calibration as self_calibration
from app_pages import _tuning_calibration as calibration
from app_pages import _tuning_effect as effect
from app_pages import _tuning_loop as loop
from app_pages import _tuning_profiles as profiles
from app_pages._judge_refit import render_judge_refit
from app_pages._tuning_state import (
    LAST_VALID_KEY,
    MATRIX_TTL_S,
    THRESHOLD_KEYS,
    WEIGHT_KEYS,
    cached_active,
    cached_run_matrix,
    profile_from_sliders,
    profiles_changed,
    run_matrix_age_s,
    set_sliders,
    slider_values,
)
from app_pages.common import as_plain, empty_state, ensure_store, require_sign_in, show_error
from services.charts import tuning as charts
from services.charts.confidence import COMPONENT_LABELS
from services.errors import InputError, WorkbenchError
from services.scoring.tuning import RunMatrix, rescore
from services.scoring.weights import COMPONENTS, WeightsProfile

__all__ = ["main", "profile_from_sliders", "slider_values"]  # the pure helpers tests read from here

TAB_KEY = "tuning.tab"
EFFECT_TAB, CALIBRATION_TAB, FIT_TAB, PROFILES_TAB, COMPARE_TAB, SELF_CALIBRATION_TAB = (
    "Effect on runs", "Calibration", "Fit from verdicts", "Profiles", "Compare profiles", "Self-calibrate")
TABS = (EFFECT_TAB, CALIBRATION_TAB, FIT_TAB, PROFILES_TAB, COMPARE_TAB, SELF_CALIBRATION_TAB)
# Widgets inside tabs: only the open tab draws its widgets, so these are kept as plain state.
TAB_WIDGET_KEYS = (*calibration.WIDGET_KEYS, *profiles.WIDGET_KEYS, *self_calibration.WIDGET_KEYS)


# --- the page ----------------------------------------------------------------------------------

def main() -> None:
    user = require_sign_in()
    st.title("Tune confidence weights")
    try:
        ensure_store()
        active = cached_active().weights
        matrix = cached_run_matrix()
    except WorkbenchError as exc:
        show_error(exc)
        return
    for key in TAB_WIDGET_KEYS:  # re-set as plain state: a closed tab's widgets would lose theirs
        if key in st.session_state:
            st.session_state[key] = st.session_state[key]
    for key, value in slider_values(active).items():
        st.session_state.setdefault(key, value)
    profile, valid = _render_sliders(active)
    loop.render_loop_controls(active)
    left, right = st.columns([4, 1], vertical_alignment="center")
    age = run_matrix_age_s() or 0.0
    left.caption(f"{len(matrix):,} stored runs, re-scored from their stored components (loaded "
                 f"{'just now' if age < 60 else f'{age / 60:.0f} minutes ago'}; reloaded in the background every "
                 f"{MATRIX_TTL_S // 60} minutes, or press Reload runs for the latest now). "
                 f"Deltas compare with the active profile, {as_plain(active.label)}.")
    right.button("Reload runs", key="tuning.reload", on_click=cached_run_matrix.clear)
    # Lazy tabs: only the open tab's content runs, so a slider move pays for one tab, not six.
    tabs = st.tabs(TABS, key=TAB_KEY, on_change="rerun")
    opened = next((label for label, tab in zip(TABS, tabs) if tab.open), TABS[0])
    with tabs[TABS.index(opened)]:
        if opened == PROFILES_TAB:
            profiles.render_save(user, profile, valid, active)
            profiles.render_activate(user)
        elif opened == SELF_CALIBRATION_TAB:  # needs a corpus, not stored runs
            self_calibration.render_self_calibration(user, active, profiles_changed)
        elif len(matrix) == 0:
            empty_state("No stored runs yet: the sliders re-score stored runs, and calibration compares them with "
                        "verdicts. Ask questions (or load the demo runs on the Start here page), then press Reload "
                        "runs.", "app_pages/home.py", "Start here: load the demo runs", ":material/waving_hand:")
        else:
            _render_analysis(opened, matrix, active, profile)


def _render_analysis(tab: str, matrix: RunMatrix, active: WeightsProfile, profile: WeightsProfile) -> None:
    active_scores, scores = rescore(matrix, active), rescore(matrix, profile)
    if tab == EFFECT_TAB:
        effect.render_effect(matrix, active, profile, active_scores, scores)
    elif tab == CALIBRATION_TAB:
        calibration.render_calibration(matrix, active, active_scores, scores)
    elif tab == FIT_TAB:
        calibration.render_fits(matrix, scores)
        render_judge_refit()
    else:
        profiles.render_compare(matrix, active, profile)


def _render_sliders(active: WeightsProfile) -> tuple[WeightsProfile, bool]:
    st.subheader("Weights")
    left, right = st.columns([3, 2])
    with left:
        weights = {c: st.slider(COMPONENT_LABELS[c], 0.0, 1.0, step=0.01, key=WEIGHT_KEYS[c]) for c in COMPONENTS}
    right.plotly_chart(charts.weights_figure(weights), key="tuning.weights_chart")
    st.subheader("Level thresholds")
    columns = st.columns(3)
    for column, (name, key) in zip(columns, THRESHOLD_KEYS.items()):
        column.slider(f"{name.upper()} from", 0.0, 1.0, step=0.01, key=key)
    st.button("Reset to active profile", key="tuning.reset", on_click=set_sliders, args=(slider_values(active),))
    try:
        profile = profile_from_sliders(st.session_state, active)
    except InputError as exc:
        last = st.session_state.get(LAST_VALID_KEY)
        show_error(f"{exc} The runs below are scored with the last valid profile until this is fixed.")
        return (WeightsProfile.from_dict(last) if last else active), False
    st.session_state[LAST_VALID_KEY] = profile.to_dict()
    return profile, True


if __name__ == "__main__":  # Streamlit runs pages as __main__; tests import the pure helpers
    main()
