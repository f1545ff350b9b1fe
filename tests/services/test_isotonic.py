"""The numpy isotonic fit keeps scikit-learn's knots: the same curve without importing it on a page."""

import subprocess
import sys

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from services.scoring.isotonic import isotonic_knots


def _reference(scores, labels):
    fitted = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(scores, labels)
    return fitted.X_thresholds_, fitted.y_thresholds_


@pytest.mark.parametrize("seed", range(6))
def test_knots_equal_scikit_learns_on_noisy_verdicts_with_tied_scores(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 3000))
    # Rounded scores: many runs share one confidence, as stored confidences often do.
    scores = np.round(rng.random(n), int(rng.integers(1, 4)))
    labels = (rng.random(n) < scores**2).astype(int)
    x, y = isotonic_knots(scores, labels)
    expected_x, expected_y = _reference(scores, labels)
    np.testing.assert_array_equal(x, expected_x)
    np.testing.assert_allclose(y, expected_y, atol=1e-12)


@pytest.mark.parametrize(("scores", "labels"), [
    ([0.1, 0.2, 0.3, 0.4], [1, 1, 0, 0]),  # fully decreasing: one pooled block
    ([0.1, 0.2, 0.3, 0.4], [0, 0, 1, 1]),  # already increasing
    ([0.5, 0.5, 0.5], [0, 1, 1]),  # one distinct score
    ([0.9, 0.1, 0.5, 0.3, 0.7], [1, 0, 1, 1, 0]),  # unsorted input
])
def test_knots_equal_scikit_learns_on_edge_cases(scores, labels):
    x, y = isotonic_knots(np.array(scores), np.array(labels))
    expected_x, expected_y = _reference(np.array(scores), np.array(labels))
    np.testing.assert_array_equal(x, expected_x)
    np.testing.assert_allclose(y, expected_y, atol=1e-12)


def test_fitting_the_queue_calibrator_does_not_import_scikit_learn():
    code = ("import sys; from services.scoring.calibration import fit_calibrator; "
            "fit_calibrator([0.1, 0.2, 0.3, 0.7, 0.8, 0.9] * 5, [0, 1, 0, 1, 0, 1] * 5); "
            "print('sklearn' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_pseudo_verdicts_take_each_step_off_zero_and_one():
    """Three flagged below three approved: (0 + 1) / (3 + 2) and (3 + 1) / (3 + 2)."""
    x, y = isotonic_knots(np.array([0.1, 0.2, 0.3, 0.6, 0.7, 0.8]), np.array([0, 0, 0, 1, 1, 1]), pseudo_verdicts=2)
    np.testing.assert_allclose(np.interp([0.1, 0.3, 0.6, 0.8], x, y), [0.2, 0.2, 0.8, 0.8])


def test_pseudo_verdicts_pool_a_small_step_the_smoothing_turned_lower():
    """Twenty verdicts at 0.5, eighteen of them approved, then one approved alone at 0.9:
    smoothed, the lone step (2/3) falls below the large one (19/22), so the two are pooled again,
    weighted by their counts with the pseudo-verdicts: (18 + 1 + 1 + 1) / (20 + 2 + 1 + 2)."""
    scores = np.array([0.1] * 10 + [0.5] * 20 + [0.9])
    labels = np.array([0] * 10 + [1] * 18 + [0] * 2 + [1])
    x, y = isotonic_knots(scores, labels, pseudo_verdicts=2)
    assert np.all(np.diff(y) >= 0)
    np.testing.assert_allclose(np.interp([0.1, 0.5, 0.9], x, y), [1 / 12, 21 / 25, 21 / 25])
