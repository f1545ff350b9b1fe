"""The Tuning page's "Calibration" and "Fit from verdicts" tabs: the sliders' scores against
reviewer verdicts, calibrators and weights fitted to them, and a HIGH threshold for a precision."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from app_pages import _demo as demo
from app_pages._tuning_state import THRESHOLD_KEYS, ceil_to_step, fitted_slider_values, set_sliders
from app_pages.common import as_plain
from services.charts import tuning as charts
from services.charts.confidence import COMPONENT_LABELS
from services.errors import InputError
from services.scoring.calibration import (
    METHODS,
    MIN_VERDICTS,
    CalibrationReport,
    calibration_metrics,
    fit_calibrator,
    fit_weights,
    recommend_threshold,
)
from services.scoring.tuning import RunMatrix
from services.scoring.weights import COMPONENTS, WeightsProfile

FITTED_KEY = "tuning.fit.result"  # ("ok", weights, verdicts) or ("error", message)
METHOD_KEY, TARGET_KEY = "tuning.fit.method", "tuning.fit.target"
WIDGET_KEYS = (METHOD_KEY, TARGET_KEY)


def _signed(value: float | None, reference: float | None) -> str | None:
    return None if value is None or reference is None else f"{value - reference:+.3f}"



def _render_metrics(report: CalibrationReport, reference: CalibrationReport) -> None:
    cols = st.columns(4)
    cols[0].metric("ECE", f"{report.ece:.3f}", delta=_signed(report.ece, reference.ece), delta_color="inverse")
    cols[1].metric("Brier score", f"{report.brier:.3f}", delta=_signed(report.brier, reference.brier), delta_color="inverse")
    cols[2].metric("AUROC", "n/a" if report.auroc is None else f"{report.auroc:.3f}",
                   delta=_signed(report.auroc, reference.auroc))
    cols[3].metric("Reviewed runs", report.n, help=f"{report.positives} approved, {report.n - report.positives} "
                                                  "flagged or corrected")


def render_calibration(matrix: RunMatrix, active: WeightsProfile, active_scores: np.ndarray, scores: np.ndarray) -> None:
    reviewed = matrix.reviewed
    if not reviewed.any():
        st.info(f"Calibration needs reviewed runs: none of the {len(matrix):,} stored runs has a verdict yet. "
                "Approve, flag or correct runs in the Review queue, then press Reload runs.")
        return
    if (n := int(reviewed.sum())) < MIN_VERDICTS:
        # Below the fits' minimum the metrics swing with each verdict: their deltas would be noise in red and green.
        st.info(f"Calibration needs at least {MIN_VERDICTS} reviewed runs, as the fits do: {n:,} of the "
                f"{len(matrix):,} stored runs have a verdict. ECE, Brier score and AUROC are shown from "
                f"{MIN_VERDICTS} on; review more runs in the Review queue, then press Reload runs.")
        _render_answer_key_note()
        return
    labels = matrix.labels[reviewed]
    current = calibration_metrics(scores[reviewed], labels)
    reference = calibration_metrics(active_scores[reviewed], labels)
    _render_metrics(current, reference)
    st.plotly_chart(charts.reliability_figure(current, reference=reference, reference_name=f"active ({active.label})"),
                    key="tuning.reliability")
    st.caption("Each point is a bin of reviewed runs: its mean confidence (x) against the share of them approved (y). "
               "On the diagonal, a confidence of 0.8 means 80% of such answers were approved.")
    _render_answer_key_note()


def _render_answer_key_note() -> None:
    keyed = demo.cached_demo_status().answer_key_verdicts
    if keyed:
        st.caption(f"{keyed:,} of these verdicts are answer-key verdicts of the demo runs. {demo.ANSWER_KEY_NOTE}")


def render_fits(matrix: RunMatrix, scores: np.ndarray) -> None:
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
    st.button("Load fitted weights into the sliders", key="tuning.fit.load", on_click=set_sliders,
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
    st.button(f"Set HIGH to {high:.2f}", key="tuning.fit.set_high", on_click=set_sliders,
              args=({THRESHOLD_KEYS["high"]: high},))

