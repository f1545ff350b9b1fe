"""Tuning: weights and thresholds on sliders, every stored run re-scored live, calibration
against reviewer verdicts, fits from verdicts, versioned profiles (save, activate, compare), and
self-calibration of a collection (pages/_self_calibration.py)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _demo as demo
from app_pages import _self_calibration as self_calibration
from app_pages.common import (
    as_plain,
    cached_active_profile_label,
    current_user,
    empty_state,
    ensure_store,
    require_sign_in,
    show_error,
)
from services.auth import CurrentUser, require_admin
from services.charts import tuning as charts
from services.charts.confidence import COMPONENT_LABELS
from services.errors import InputError, WorkbenchError
from services.scoring.calibration import METHODS, CalibrationReport, calibration_metrics, fit_calibrator, fit_weights, recommend_threshold
from services.scoring.profiles import ScoringProfile, activate_profile, active_profile, list_profiles, save_profile
from services.scoring.tuning import RunMatrix, compare_profiles, level_changes, level_indexes, load_run_matrix, rescore, triage
from services.scoring.weights import COMPONENTS, WeightsProfile

WEIGHT_KEYS = {c: f"tuning.w.{c}" for c in COMPONENTS}
THRESHOLD_KEYS = {"high": "tuning.t.high", "medium": "tuning.t.medium", "low": "tuning.t.low"}
LAST_VALID_KEY = "tuning.last_valid"  # the profile drawn while the sliders are invalid
FITTED_KEY = "tuning.fit.result"  # ("ok", weights, verdicts) or ("error", message)
SAVE_NAME_KEY, SAVE_NOTES_KEY, SAVE_ACTIVATE_KEY = "tuning.save.name", "tuning.save.notes", "tuning.save.activate"
SAVE_RESULT_KEY, ACTIVATE_RESULT_KEY = "tuning.save.result", "tuning.activate.result"
ACTIVATE_PICK_KEY = "tuning.activate.pick"
COMPARE_KEYS = ("tuning.compare.a", "tuning.compare.b")
METHOD_KEY, TARGET_KEY = "tuning.fit.method", "tuning.fit.target"
TAB_KEY = "tuning.tab"
EFFECT_TAB, CALIBRATION_TAB, FIT_TAB, PROFILES_TAB, COMPARE_TAB, SELF_CALIBRATION_TAB = (
    "Effect on runs", "Calibration", "Fit from verdicts", "Profiles", "Compare profiles", "Self-calibrate")
TABS = (EFFECT_TAB, CALIBRATION_TAB, FIT_TAB, PROFILES_TAB, COMPARE_TAB, SELF_CALIBRATION_TAB)
# Widgets inside tabs: only the open tab draws its widgets, so these are kept as plain state.
TAB_WIDGET_KEYS = (METHOD_KEY, TARGET_KEY, SAVE_NAME_KEY, SAVE_NOTES_KEY, SAVE_ACTIVATE_KEY, ACTIVATE_PICK_KEY,
                   *COMPARE_KEYS, *self_calibration.WIDGET_KEYS)
CHANGES_LIMIT = 200  # the largest moves; the count above the table says how many there are
SLIDERS, ACTIVE = "sliders", "active"  # compare options besides stored profiles ("profile:<id>")


# --- cached getters ----------------------------------------------------------------------------

@st.cache_data(ttl=30, show_spinner="Loading stored runs…")
def cached_run_matrix() -> RunMatrix:
    return load_run_matrix()


@st.cache_data(ttl=10, show_spinner=False)
def _cached_active() -> ScoringProfile:
    return active_profile()


@st.cache_data(ttl=30, show_spinner=False)
def _cached_profiles() -> list[tuple[int, WeightsProfile, bool]]:
    return list_profiles()


def _profiles_changed() -> None:
    _cached_active.clear()
    _cached_profiles.clear()
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


def changes_frame(changes: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    columns = ["run id", "question", "from", "to", "before", "after", "change"]
    rows = [[c["run_id"], c["query"], c["old_level"], c["new_level"], c["old_score"], c["new_score"], c["delta"]]
            for c in changes]
    return pd.DataFrame(rows, columns=columns)


def compare_frame(result: Mapping[str, Any]) -> pd.DataFrame:
    """Triage and (with verdicts) calibration of each side of compare_profiles, one row per side."""
    rows = []
    for side in ("a", "b"):
        data, calibration = result[side], result[side]["calibration"]
        row = {"side": side.upper(), "profile": data["profile"], "auto-accepted": data["triage"]["auto_accepted"],
               "review": data["triage"]["review"], "VERY LOW": data["triage"]["flagged_very_low"]}
        if calibration is not None:
            row |= {"ECE": calibration.ece, "Brier": calibration.brier, "AUROC": calibration.auroc, "reviewed": calibration.n}
        rows.append(row)
    return pd.DataFrame(rows)


def _signed(value: float | None, reference: float | None) -> str | None:
    return None if value is None or reference is None else f"{value - reference:+.3f}"


# --- callbacks (run before the script, so they may set widget keys) ------------------------------

def _set_sliders(values: Mapping[str, float]) -> None:
    for key, value in values.items():
        st.session_state[key] = value


def _save_clicked(base: dict[str, Any]) -> None:
    state, user = st.session_state, current_user()  # who clicks, not who the page was drawn for
    activate = bool(state.get(SAVE_ACTIVATE_KEY))
    try:
        if not user.name:
            raise InputError("Set your reviewer name in the sidebar first: every saved profile records who made it.")
        name = str(state.get(SAVE_NAME_KEY, "")).strip()
        if not name:
            raise InputError("Give the profile a name.")
        if activate:
            require_admin(user, "change the active weights profile")
        profile = dataclasses.replace(profile_from_sliders(state, WeightsProfile.from_dict(base)), name=name)
        _, saved = save_profile(profile, created_by=user.name, notes=str(state.get(SAVE_NOTES_KEY, "")).strip(),
                                activate=activate)
    except WorkbenchError as exc:
        state[SAVE_RESULT_KEY] = ("error", str(exc))
        return
    _profiles_changed()
    state[SAVE_RESULT_KEY] = ("success", f"Saved {saved.label}" + (" and made it the active profile." if activate else "."))


def _activate_clicked(labels: Mapping[int, str]) -> None:
    user = current_user()  # who clicks, not who the page was drawn for
    profile_id = st.session_state.get(ACTIVATE_PICK_KEY)
    try:
        require_admin(user, "change the active weights profile")
        if profile_id is None:
            raise InputError("Pick a profile to activate.")
        activate_profile(int(profile_id))
    except WorkbenchError as exc:
        st.session_state[ACTIVATE_RESULT_KEY] = ("error", str(exc))
        return
    _profiles_changed()
    st.session_state[ACTIVATE_RESULT_KEY] = ("success", f"{labels.get(profile_id, profile_id)} is now the active profile.")


# --- the page ----------------------------------------------------------------------------------

def main() -> None:
    user = require_sign_in()
    st.title("Tune confidence weights")
    try:
        ensure_store()
        active = _cached_active().weights
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
    left, right = st.columns([4, 1], vertical_alignment="center")
    left.caption(f"{len(matrix):,} stored runs, re-scored from their stored components (loaded at most 30 s ago). "
                 f"Deltas compare with the active profile, {as_plain(active.label)}.")
    right.button("Reload runs", key="tuning.reload", on_click=cached_run_matrix.clear)
    # Lazy tabs: only the open tab's content runs, so a slider move pays for one tab, not six.
    tabs = st.tabs(TABS, key=TAB_KEY, on_change="rerun")
    opened = next((label for label, tab in zip(TABS, tabs) if tab.open), TABS[0])
    with tabs[TABS.index(opened)]:
        if opened == PROFILES_TAB:
            _render_save(user, profile, valid, active)
            _render_activate(user)
        elif opened == SELF_CALIBRATION_TAB:  # needs a corpus, not stored runs
            self_calibration.render_self_calibration(user, active, _profiles_changed)
        elif len(matrix) == 0:
            empty_state("No stored runs yet: the sliders re-score stored runs, and calibration compares them with "
                        "verdicts. Ask questions (or load the demo runs on the Start here page), then press Reload "
                        "runs.", "app_pages/home.py", "Start here: load the demo runs", ":material/waving_hand:")
        else:
            _render_analysis(opened, matrix, active, profile)


def _render_analysis(tab: str, matrix: RunMatrix, active: WeightsProfile, profile: WeightsProfile) -> None:
    active_scores, scores = rescore(matrix, active), rescore(matrix, profile)
    if tab == EFFECT_TAB:
        _render_effect(matrix, active, profile, active_scores, scores)
    elif tab == CALIBRATION_TAB:
        _render_calibration(matrix, active, active_scores, scores)
    elif tab == FIT_TAB:
        _render_fits(matrix, scores)
    else:
        _render_compare(matrix, active, profile)


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
    st.button("Reset to active profile", key="tuning.reset", on_click=_set_sliders, args=(slider_values(active),))
    try:
        profile = profile_from_sliders(st.session_state, active)
    except InputError as exc:
        last = st.session_state.get(LAST_VALID_KEY)
        show_error(f"{exc} The runs below are scored with the last valid profile until this is fixed.")
        return (WeightsProfile.from_dict(last) if last else active), False
    st.session_state[LAST_VALID_KEY] = profile.to_dict()
    return profile, True


def _render_effect(matrix: RunMatrix, active: WeightsProfile, profile: WeightsProfile, active_scores: np.ndarray,
                   scores: np.ndarray) -> None:
    before, after = triage(matrix, active_scores, active), triage(matrix, scores, profile)
    changed = int((level_indexes(active_scores, active) != level_indexes(scores, profile)).sum())
    cols = st.columns(4)
    cols[0].metric("Auto-accepted", after["auto_accepted"], delta=after["auto_accepted"] - before["auto_accepted"])
    cols[1].metric("Sent to review", after["review"], delta=after["review"] - before["review"], delta_color="inverse")
    cols[2].metric("VERY LOW", after["flagged_very_low"], delta=after["flagged_very_low"] - before["flagged_very_low"],
                   delta_color="inverse", help="expert review required")
    cols[3].metric("Runs changing level", changed)
    left, right = st.columns(2)
    left.plotly_chart(charts.score_histogram_figure(scores, profile), key="tuning.histogram")
    right.plotly_chart(charts.level_counts_figure(before["by_level"], after["by_level"],
                                                  before_name=f"active ({active.label})"), key="tuning.level_counts")
    if not changed:
        st.caption("No run changes level.")
        return
    changes = level_changes(matrix, active_scores, scores, active, profile, limit=CHANGES_LIMIT)
    st.caption(f"{changed:,} runs change level" + (f"; the {len(changes)} largest moves:" if changed > len(changes) else ":"))
    st.dataframe(changes_frame(changes), hide_index=True)


def _render_metrics(report: CalibrationReport, reference: CalibrationReport) -> None:
    cols = st.columns(4)
    cols[0].metric("ECE", f"{report.ece:.3f}", delta=_signed(report.ece, reference.ece), delta_color="inverse")
    cols[1].metric("Brier score", f"{report.brier:.3f}", delta=_signed(report.brier, reference.brier), delta_color="inverse")
    cols[2].metric("AUROC", "n/a" if report.auroc is None else f"{report.auroc:.3f}",
                   delta=_signed(report.auroc, reference.auroc))
    cols[3].metric("Reviewed runs", report.n, help=f"{report.positives} approved, {report.n - report.positives} "
                                                  "flagged or corrected")


def _render_calibration(matrix: RunMatrix, active: WeightsProfile, active_scores: np.ndarray, scores: np.ndarray) -> None:
    reviewed = matrix.reviewed
    if not reviewed.any():
        st.info(f"Calibration needs reviewed runs: none of the {len(matrix):,} stored runs has a verdict yet. "
                "Approve, flag or correct runs in the Review queue, then press Reload runs.")
        return
    labels = matrix.labels[reviewed]
    current = calibration_metrics(scores[reviewed], labels)
    reference = calibration_metrics(active_scores[reviewed], labels)
    _render_metrics(current, reference)
    st.plotly_chart(charts.reliability_figure(current, reference=reference, reference_name=f"active ({active.label})"),
                    key="tuning.reliability")
    st.caption("Each point is a bin of reviewed runs: its mean confidence (x) against the share of them approved (y). "
               "On the diagonal, a confidence of 0.8 means 80% of such answers were approved.")
    keyed = demo.cached_demo_status().answer_key_verdicts
    if keyed:
        st.caption(f"{keyed:,} of these verdicts are answer-key verdicts of the demo runs. {demo.ANSWER_KEY_NOTE}")


def _render_fits(matrix: RunMatrix, scores: np.ndarray) -> None:
    reviewed = matrix.reviewed
    if not reviewed.any():
        st.info(f"Fitting needs reviewed runs: none of the {len(matrix):,} stored runs has a verdict yet. "
                "Review some runs in the Review queue first.")
        return
    labels, reviewed_scores = matrix.labels[reviewed], scores[reviewed]
    st.subheader("Calibrate the score")
    method = st.radio("Method", METHODS, horizontal=True, key=METHOD_KEY)
    try:
        calibrator = fit_calibrator(reviewed_scores, labels, method)
        raw = calibration_metrics(reviewed_scores, labels)
        calibrated = calibration_metrics(calibrator(reviewed_scores), labels)
    except InputError as exc:
        st.warning(as_plain(str(exc)))
    else:
        _render_metrics(calibrated, raw)
        st.plotly_chart(charts.reliability_figure(calibrated, name=f"{method} calibrated", reference=raw,
                                                  reference_name="sliders, raw score"), key="tuning.calibrated")
        st.caption("Measured on the verdicts the calibrator was fitted to (in-sample), so it flatters the fit.")
    _render_fit_weights(matrix)
    _render_threshold(reviewed_scores, labels)


def _render_fit_weights(matrix: RunMatrix) -> None:
    st.subheader("Fit weights to verdicts")
    if st.button("Fit non-negative weights", key="tuning.fit.weights"):
        reviewed = matrix.reviewed
        try:
            st.session_state[FITTED_KEY] = ("ok", fit_weights(matrix.components[reviewed], matrix.labels[reviewed]),
                                            int(reviewed.sum()))
        except InputError as exc:
            st.session_state[FITTED_KEY] = ("error", str(exc))
    result = st.session_state.get(FITTED_KEY)
    if result is None:
        return
    if result[0] == "error":
        st.warning(as_plain(result[1]))
        return
    _, weights, n = result
    st.dataframe(pd.DataFrame({"component": [COMPONENT_LABELS[c] for c in COMPONENTS],
                               "fitted share": [weights[c] for c in COMPONENTS]}), hide_index=True)
    st.caption(f"Non-negative least squares on {n} verdicts.")
    st.button("Load fitted weights into the sliders", key="tuning.fit.load", on_click=_set_sliders,
              args=(fitted_slider_values(weights),))


def _render_threshold(reviewed_scores: np.ndarray, labels: np.ndarray) -> None:
    st.subheader("HIGH threshold for a target precision")
    st.session_state.setdefault(TARGET_KEY, 0.9)
    target = st.number_input("Target precision of auto-accepted runs", min_value=0.01, max_value=1.0, step=0.01,
                             key=TARGET_KEY)
    try:
        recommendation = recommend_threshold(reviewed_scores, labels, target)
    except InputError as exc:
        st.warning(as_plain(str(exc)))
        return
    if not recommendation.reachable:
        st.warning(as_plain(recommendation.reason))
        return
    assert recommendation.threshold is not None and recommendation.precision is not None
    cols = st.columns(3)
    cols[0].metric("Threshold", f"{recommendation.threshold:.3f}")
    cols[1].metric("Precision", f"{recommendation.precision:.1%}")
    cols[2].metric("Recall", f"{recommendation.recall or 0:.1%}")
    st.caption(as_plain(recommendation.reason))
    high = ceil_to_step(recommendation.threshold)
    st.button(f"Set HIGH to {high:.2f}", key="tuning.fit.set_high", on_click=_set_sliders,
              args=({THRESHOLD_KEYS["high"]: high},))


def _render_save(user: CurrentUser, profile: WeightsProfile, valid: bool, active: WeightsProfile) -> None:
    st.subheader("Save the sliders as a new version")
    st.session_state.setdefault(SAVE_NAME_KEY, active.name)
    st.text_input("Profile name", key=SAVE_NAME_KEY, help="Saving under an existing name adds its next version.")
    st.text_area("Notes", key=SAVE_NOTES_KEY, placeholder="why these weights")
    st.checkbox("Make it the active profile", key=SAVE_ACTIVATE_KEY, disabled=not user.is_admin)
    st.button("Save profile", key="tuning.save", type="primary", disabled=not valid or not user.name,
              on_click=_save_clicked, args=(profile.to_dict(),))
    if not valid:
        st.caption("Fix the sliders before saving.")
    elif not user.name:
        st.caption("Set your reviewer name in the sidebar to save: every profile records who made it.")
    if profile.mappings:
        st.caption(as_plain(f"The saved profile keeps the confidence mappings of {active.label} "
                            f"({', '.join(sorted(profile.mappings))}). They were fitted on its weights: after "
                            "changing weights, self-calibrate those collections again."))
    _show_result(SAVE_RESULT_KEY)


def _render_activate(user: CurrentUser) -> None:
    st.subheader("Activate a profile")
    profiles = _cached_profiles()
    if not profiles:
        st.caption("No stored profiles yet: save one above to activate it.")
        return
    labels = {pid: p.label + (" (active)" if is_active else "") for pid, p, is_active in profiles}
    st.selectbox("Profile", list(labels), format_func=labels.__getitem__, key=ACTIVATE_PICK_KEY)
    st.button("Activate", key="tuning.activate", disabled=not user.is_admin, on_click=_activate_clicked,
              args=(labels,))
    if not user.is_admin:
        st.caption("Only administrators can change the active profile; ask an admin to add you to the admin list.")
    _show_result(ACTIVATE_RESULT_KEY)


def _show_result(key: str) -> None:
    """A callback's outcome, once; it names profiles, so it is shown as plain text."""
    result = st.session_state.pop(key, None)
    if result is not None:
        (st.success if result[0] == "success" else st.error)(as_plain(result[1]))


def _render_compare(matrix: RunMatrix, active: WeightsProfile, sliders: WeightsProfile) -> None:
    stored = {f"profile:{pid}": p for pid, p, _ in _cached_profiles()}
    unsaved = dataclasses.replace(sliders, name="sliders", version=0)  # labelled "sliders v0" in the charts
    choices: dict[str, WeightsProfile] = {ACTIVE: active, SLIDERS: unsaved, **stored}
    names = {ACTIVE: f"Active profile ({active.label})", SLIDERS: "Current sliders"} | {k: p.label for k, p in stored.items()}
    left, right = st.columns(2)
    st.session_state.setdefault(COMPARE_KEYS[1], SLIDERS)  # A defaults to the first option, the active profile
    a = left.selectbox("Profile A", list(choices), format_func=names.__getitem__, key=COMPARE_KEYS[0])
    b = right.selectbox("Profile B", list(choices), format_func=names.__getitem__, key=COMPARE_KEYS[1])
    result = compare_profiles(matrix, choices[a], choices[b])
    cols = st.columns(2)
    cols[0].metric("Runs changing level", result["changed"])
    cols[1].metric("Mean |Δ confidence|", f"{result['mean_abs_delta']:.3f}")
    left, right = st.columns(2)
    left.plotly_chart(charts.compare_figure(result), key="tuning.compare.counts")
    right.plotly_chart(charts.confusion_figure(result), key="tuning.compare.confusion")
    st.dataframe(compare_frame(result), hide_index=True)


if __name__ == "__main__":  # Streamlit runs pages as __main__; tests import the pure helpers
    main()
