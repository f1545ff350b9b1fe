"""The Tuning page's "Profiles" and "Compare profiles" tabs: save the sliders as a new version,
activate a stored profile (administrators), and compare two profiles on the same runs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pandas as pd
import streamlit as st

from app_pages._tuning_effect import auto_accepted_by_status, would_auto_accept
from app_pages._tuning_loop import loop_from_state
from app_pages._tuning_state import cached_profiles, profile_from_sliders, profiles_changed, show_result
from app_pages.common import as_plain, current_user
from services.auth import CurrentUser, require_admin
from services.charts import tuning as charts
from services.errors import InputError, WorkbenchError
from services.scoring.profiles import activate_profile, save_profile
from services.scoring.tuning import RunMatrix, compare_profiles, rescore
from services.scoring.weights import WeightsProfile

SAVE_NAME_KEY, SAVE_NOTES_KEY, SAVE_ACTIVATE_KEY = "tuning.save.name", "tuning.save.notes", "tuning.save.activate"
SAVE_RESULT_KEY, ACTIVATE_RESULT_KEY = "tuning.save.result", "tuning.activate.result"
ACTIVATE_PICK_KEY = "tuning.activate.pick"
COMPARE_KEYS = ("tuning.compare.a", "tuning.compare.b")
SLIDERS, ACTIVE = "sliders", "active"  # compare options besides stored profiles ("profile:<id>")
WIDGET_KEYS = (SAVE_NAME_KEY, SAVE_NOTES_KEY, SAVE_ACTIVATE_KEY, ACTIVATE_PICK_KEY, *COMPARE_KEYS)


def compare_frame(result: Mapping[str, Any], accepted: Mapping[str, int] | None = None) -> pd.DataFrame:
    """Triage and (with verdicts) calibration of each side of compare_profiles, one row per side;
    `accepted` ("a", "b" -> count) replaces the triage's auto-accept counts (Effect on runs' rule:
    runs a reviewer flagged or corrected are not counted)."""
    rows = []
    for side in ("a", "b"):
        data, calibration = result[side], result[side]["calibration"]
        auto = accepted[side] if accepted is not None else data["triage"]["auto_accepted"]
        row = {"side": side.upper(), "profile": data["profile"], "would auto-accept": auto,
               "would go to review": data["triage"]["total"] - auto, "VERY LOW": data["triage"]["flagged_very_low"]}
        if calibration is not None:
            row |= {"ECE": calibration.ece, "Brier": calibration.brier, "AUROC": calibration.auroc, "reviewed": calibration.n}
        rows.append(row)
    return pd.DataFrame(rows)



# --- callbacks (run before the script, so they may set widget keys) ------------------------------

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
        # The loop thresholds ticked beside the weights are saved in the same version.
        profile = dataclasses.replace(profile_from_sliders(state, WeightsProfile.from_dict(base)), name=name,
                                      loop=loop_from_state(state))
        _, saved = save_profile(profile, created_by=user.name, notes=str(state.get(SAVE_NOTES_KEY, "")).strip(),
                                activate=activate)
    except WorkbenchError as exc:
        state[SAVE_RESULT_KEY] = ("error", str(exc))
        return
    profiles_changed()
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
    profiles_changed()
    st.session_state[ACTIVATE_RESULT_KEY] = ("success", f"{labels.get(profile_id, profile_id)} is now the active profile.")



# --- the tabs ----------------------------------------------------------------------------------

def render_save(user: CurrentUser, profile: WeightsProfile, valid: bool, active: WeightsProfile) -> None:
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
    show_result(SAVE_RESULT_KEY)


def render_activate(user: CurrentUser) -> None:
    st.subheader("Activate a profile")
    profiles = cached_profiles()
    if not profiles:
        st.caption("No stored profiles yet: save one above to activate it.")
        return
    labels = {pid: p.label + (" (active)" if is_active else "") for pid, p, is_active in profiles}
    st.selectbox("Profile", list(labels), format_func=labels.__getitem__, key=ACTIVATE_PICK_KEY)
    st.button("Activate", key="tuning.activate", disabled=not user.is_admin, on_click=_activate_clicked,
              args=(labels,))
    if not user.is_admin:
        st.caption("Only administrators can change the active profile; ask an admin to add you to the admin list.")
    show_result(ACTIVATE_RESULT_KEY)


def render_compare(matrix: RunMatrix, active: WeightsProfile, sliders: WeightsProfile) -> None:
    stored = {f"profile:{pid}": p for pid, p, _ in cached_profiles()}
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
    accepted = {side: would_auto_accept(auto_accepted_by_status(matrix, rescore(matrix, choices[key]), choices[key]))
                for side, key in (("a", a), ("b", b))}
    st.dataframe(compare_frame(result, accepted), hide_index=True)

