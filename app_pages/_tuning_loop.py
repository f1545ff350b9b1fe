"""The Tuning page's answering-loop thresholds, beside the weights: the reflection minimum, the
retry cap, CRAG's upper and lower thresholds, the consensus threshold and the adaptive cut-off.
They are saved with the profile (Profiles tab) and, once it is active, every next run uses them
over its preset (services.answering.presets.configured). A threshold left unticked stays each
preset's own, so as-written keeps the notes' values unless the team says otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st

from services.answering.presets import FeatureConfig, configured
from services.errors import InputError
from services.scoring.weights import MAX_RETRY_CAP, WeightsProfile, check_loop
from services.settings import get_settings

REFERENCE_PRESET = "balanced"  # whose values an unticked control shows
# group -> (label, help); a group is ticked to set it, and CRAG's two thresholds are one group
GROUPS = {
    "reflection": ("Reflection minimum", "Seed 004: a reflection score at or above it approves the answer."),
    "retry": ("Retry cap", "Refinements after the first iteration (seed 004 asks 2, seed 000 3)."),
    "crag": ("CRAG lower and upper thresholds", "Seed 002: INCORRECT at or below the lower, CORRECT at or above "
             "the upper, AMBIGUOUS between."),
    "consensus": ("Consensus threshold", "Seed 003: a hit whose relevance reaches it agrees with the top hit."),
    "adaptive_k": ("Adaptive cut-off (adaptive_k)", "Seed 001: the answer reads only as many chunks as the "
                   "question's kind needs; each iteration says where it stopped and why."),
}
SET_KEYS = {group: f"tuning.loop.set.{group}" for group in GROUPS}
VALUE_KEYS = {group: f"tuning.loop.{group}" for group in GROUPS}


# --- pure helpers --------------------------------------------------------------------------------

def loop_state(loop: Mapping[str, Any], reference: FeatureConfig) -> dict[str, Any]:
    """Session values that put a profile's loop thresholds on the controls; an unset one shows
    `reference`'s value, unticked."""
    values: dict[str, Any] = {
        "reflection": loop.get("reflection_min_score", reference.reflection_min_score),
        "retry": loop.get("max_refinement_attempts", reference.max_refinement_attempts),
        "crag": (loop.get("crag_incorrect_threshold", reference.crag.incorrect_threshold),
                 loop.get("crag_correct_threshold", reference.crag.correct_threshold)),
        "consensus": loop.get("consensus_threshold", reference.consensus_threshold),
        "adaptive_k": loop.get("adaptive_k", reference.adaptive_k),
    }
    keys = {"reflection": ("reflection_min_score",), "retry": ("max_refinement_attempts",),
            "crag": ("crag_incorrect_threshold",), "consensus": ("consensus_threshold",), "adaptive_k": ("adaptive_k",)}
    state = {VALUE_KEYS[g]: v for g, v in values.items()}
    return state | {SET_KEYS[g]: any(k in loop for k in keys[g]) for g in GROUPS}


def loop_from_state(values: Mapping[str, Any]) -> dict[str, float | int | bool]:
    """The loop thresholds the ticked controls set, or InputError naming the rule one breaks."""
    ticked = {g for g in GROUPS if values.get(SET_KEYS[g])}
    loop: dict[str, float | int | bool] = {}
    if "reflection" in ticked:
        loop["reflection_min_score"] = float(values[VALUE_KEYS["reflection"]])
    if "retry" in ticked:
        loop["max_refinement_attempts"] = int(values[VALUE_KEYS["retry"]])
    if "crag" in ticked:
        lower, upper = values[VALUE_KEYS["crag"]]
        loop |= {"crag_incorrect_threshold": float(lower), "crag_correct_threshold": float(upper)}
    if "consensus" in ticked:
        loop["consensus_threshold"] = float(values[VALUE_KEYS["consensus"]])
    if "adaptive_k" in ticked:
        loop["adaptive_k"] = bool(values[VALUE_KEYS["adaptive_k"]])
    check_loop(loop)
    return loop


def loop_summary(loop: Mapping[str, Any]) -> str:
    if not loop:
        return "every preset's own loop thresholds"
    return ", ".join(f"{name} {value}" for name, value in sorted(loop.items()))


# --- the controls ----------------------------------------------------------------------------------

def _reset(values: Mapping[str, Any]) -> None:
    for key, value in values.items():
        st.session_state[key] = value


def render_loop_controls(active: WeightsProfile) -> None:
    """The controls, seeded once from the active profile; what they set is read by the
    Profiles tab's save (loop_from_state) and shown here."""
    reference = configured(REFERENCE_PRESET, get_settings())
    seeded = loop_state(active.loop, reference)
    for key, value in seeded.items():
        st.session_state.setdefault(key, value)
    st.subheader("Answering loop")
    st.caption(f"Saved with the profile (Profiles tab); once it is the active profile, the next run of every preset "
               f"uses the ticked values over the preset's, and a `workbench ask` option over both. An unticked "
               f"threshold stays each preset's own (shown: {REFERENCE_PRESET}'s, with the environment's settings).")
    state = st.session_state
    for group, (label, help_text) in GROUPS.items():
        tick, control = st.columns([1, 4], vertical_alignment="center")
        tick.checkbox("Set", key=SET_KEYS[group], help=f"Set the {label.lower()} in this profile")
        disabled = not state.get(SET_KEYS[group])
        if group == "retry":
            control.slider(label, 0, MAX_RETRY_CAP, step=1, key=VALUE_KEYS[group], help=help_text, disabled=disabled)
        elif group == "adaptive_k":
            control.toggle(label, key=VALUE_KEYS[group], help=help_text, disabled=disabled)
        else:  # CRAG's pair is one range slider, so its lower end never passes its upper
            control.slider(label, 0.0, 1.0, step=0.01, key=VALUE_KEYS[group], help=help_text, disabled=disabled)
    st.button("Reset the loop to the active profile", key="tuning.loop.reset", on_click=_reset, args=(seeded,))
    try:
        loop = loop_from_state(state)
    except InputError as exc:
        st.error(str(exc))
        return
    st.caption(f"The active profile, {active.label}, sets {loop_summary(active.loop)}; saving now would set "
               f"{loop_summary(loop)}.")
