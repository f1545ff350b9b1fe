"""The Tuning page's "Self-calibrate a collection" tab: fit a collection's confidence mapping on
questions it asks itself, store it as the next version of the active profile, and show how
well the scores predicted "found" before and after (services.scoring.self_calibration).

Only someone who may change the active profile runs it, since the stored version is made
active: a name (recorded as who made the profile) and the admin role, as when saving a
profile with "Make it the active profile" ticked."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pandas as pd
import streamlit as st

from app_pages.common import as_plain, current_user, show_error
from services.auth import CurrentUser, require_admin
from services.charts.self_calibration import before_after_figure
from services.errors import InputError, WorkbenchError
from services.scoring.mapping import METHODS, ConfidenceMapping
from services.scoring.pseudo_queries import DEFAULT_PSEUDO_QUERIES
from services.scoring.recalibration import CollectionSize, list_collections
from services.scoring.self_calibration import SelfCalibration, self_calibrate
from services.scoring.weights import WeightsProfile

COLLECTION_KEY, QUESTIONS_KEY, METHOD_KEY = "tuning.selfcal.collection", "tuning.selfcal.n", "tuning.selfcal.method"
RESULT_KEY = "tuning.selfcal.result"  # the last SelfCalibration, shown until the next one
WIDGET_KEYS = (COLLECTION_KEY, QUESTIONS_KEY, METHOD_KEY)  # kept as plain state while the tab is closed
MIN_QUESTIONS = 100  # half fits, half measures, and a fit needs 50 (services.scoring.mapping)
RESULT_COLUMNS = ["mode", "AUROC before", "AUROC after", "ECE before", "ECE after", "found", "method"]


# --- pure helpers (tested without Streamlit) --------------------------------------------------

def mapping_coverage(profile: WeightsProfile) -> dict[str, list[str]]:
    """Collection -> the retrieval modes `profile` holds a fitted mapping for."""
    return {collection: sorted(by_mode) for collection, by_mode in sorted(profile.mappings.items()) if by_mode}


def coverage_text(profile: WeightsProfile) -> str:
    coverage = mapping_coverage(profile)
    if not coverage:
        return (f"The active profile, {profile.label}, holds no confidence mappings: its scores are weighted sums "
                "of the components, not probabilities.")
    named = "; ".join(f"{collection} ({', '.join(modes)})" for collection, modes in coverage.items())
    return (f"The active profile, {profile.label}, maps scores to probabilities for: {named}. "
            "Other collections get weighted sums, not probabilities.")


def results_frame(result: SelfCalibration) -> pd.DataFrame:
    """Held-out AUROC and ECE of each mode, before (weighted sum) and after (mapping)."""
    rows = [[m.mode, m.before.auroc, m.after.auroc, m.before.ece, m.after.ece,
             f"{m.mapping.positives}/{m.mapping.n_fitted}", m.mapping.method] for m in result.modes]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def collection_label(collections: Sequence[CollectionSize]) -> Callable[[str], str]:
    sizes = {c.name: c for c in collections}
    return lambda name: f"{name} ({sizes[name].documents:,} documents, {sizes[name].chunks:,} chunks)"


def _mapped(mappings: Mapping[str, ConfidenceMapping]) -> str:
    return ", ".join(sorted(mappings))


# --- the tab ----------------------------------------------------------------------------------

@st.cache_data(ttl=30, show_spinner=False)
def _cached_collections() -> list[CollectionSize]:
    return list_collections()


def render_self_calibration(user: CurrentUser, active: WeightsProfile, on_profile_stored: Callable[[], None]) -> None:
    st.subheader("Self-calibrate a collection")
    st.caption("Cuts questions out of the collection's own chunks (a sentence minus its rarest word), searches "
               "each in every retrieval mode, and fits P(the chunk's document is in the top ten) from the "
               "confidence. The fit is stored as the next version of the active profile and made active. "
               "No reviewer verdicts are needed.")
    st.info(as_plain(coverage_text(active)))
    try:
        collections = [c for c in _cached_collections() if c.chunks > 0]
    except WorkbenchError as exc:
        show_error(exc)
        return
    if not collections:
        st.info("No collection holds any chunks yet: ingest documents on the Corpus page first.")
        return
    names = [c.name for c in collections]
    if st.session_state.get(COLLECTION_KEY) not in names:
        st.session_state[COLLECTION_KEY] = names[0]
    st.session_state.setdefault(QUESTIONS_KEY, DEFAULT_PSEUDO_QUERIES)
    left, middle, right = st.columns([2, 1, 1])
    left.selectbox("Collection", names, format_func=collection_label(collections), key=COLLECTION_KEY)
    middle.number_input("Pseudo-questions", min_value=MIN_QUESTIONS, max_value=20_000, step=100, key=QUESTIONS_KEY,
                        help="The questions of every other chunk fit the mapping, the rest measure it; chunks "
                             "without a usable sentence are skipped, and a small collection asks each chunk up to "
                             "four. About a minute per mode for 1,800 on two cores.")
    right.radio("Method", METHODS, key=METHOD_KEY, horizontal=True,
                help="logistic also learns from the retrieval's score signals; isotonic only rescales the score.")
    allowed = bool(user.name) and user.is_admin
    if st.button("Self-calibrate", key="tuning.selfcal.run", type="primary", disabled=not allowed):
        _run(on_profile_stored)
    if not user.name:
        st.caption("Set your reviewer name in the sidebar to self-calibrate: every profile records who made it.")
    elif not user.is_admin:
        st.caption("Only administrators can self-calibrate: the fitted profile becomes the active one.")
    result = st.session_state.get(RESULT_KEY)
    if isinstance(result, SelfCalibration):
        _render_result(result)


def _run(on_profile_stored: Callable[[], None]) -> None:
    """Runs in the script (not a callback) so the progress bar draws; checks who clicked."""
    state = st.session_state
    bar = st.progress(0.0, text="Sampling pseudo-questions…")

    def on_progress(done: int, total: int) -> None:
        bar.progress(min(done / total, 1.0), text=f"{done:,} of {total:,} searches")

    try:
        user = current_user()
        if not user.name:
            raise InputError("Set your reviewer name in the sidebar first: every stored profile records who made it.")
        require_admin(user, "change the active weights profile")
        result = self_calibrate(str(state[COLLECTION_KEY]), n=int(state[QUESTIONS_KEY]),
                                method=str(state.get(METHOD_KEY) or METHODS[0]), created_by=user.name,
                                on_progress=on_progress)
    except WorkbenchError as exc:
        bar.empty()
        show_error(exc)
        return
    state[RESULT_KEY] = result
    on_profile_stored()
    st.rerun()  # redraw with the new active profile (sliders' deltas, the sidebar label, coverage)


def _render_result(result: SelfCalibration) -> None:
    st.success(as_plain(f"Stored {result.profile.label} (now active) with mappings for '{result.collection}' "
                        f"({_mapped(result.profile.mappings.get(result.collection, {}))}), fitted on "
                        f"{result.pseudo_queries} pseudo-questions (seed {result.seed})."))
    st.caption("AUROC and ECE are measured on the half of the pseudo-questions each mapping was not fitted on. "
               "Before: the weighted sum of the components; after: the fitted mapping.")
    st.dataframe(results_frame(result), hide_index=True)
    for mode, reason in result.skipped.items():
        st.warning(as_plain(f"{mode}: not calibrated ({reason})"))
    for column, mode in zip(st.columns(len(result.modes)), result.modes):
        column.plotly_chart(before_after_figure(mode), key=f"tuning.selfcal.chart.{mode.mode}")
