"""Calibration against verdicts: metrics on a hand-computed example, calibrators, weight
fits, threshold recommendation, and the review queue's cached calibrator on the real store."""

from __future__ import annotations

import json

import numpy as np
import pytest

from services.errors import InputError
from services.scoring.calibration import (
    ISOTONIC_PSEUDO_VERDICTS,
    MIN_VERDICTS,
    QUEUE_MIN_VERDICTS,
    Calibrator,
    calibration_metrics,
    calibrator_for_queue,
    fit_calibrator,
    fit_weights,
    recommend_threshold,
)
from services.scoring.isotonic import isotonic_knots
from services.scoring.weights import COMPONENTS


def _bernoulli(n, seed, probability=lambda s: s):
    rng = np.random.default_rng(seed)
    scores = rng.random(n)
    return scores, (rng.random(n) < probability(scores)).astype(int)


def test_metrics_on_a_hand_computed_example():
    scores = [0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9]
    labels = [0, 1, 0, 0, 1, 0, 1, 1]
    report = calibration_metrics(scores, labels, n_bins=4)
    # Four equal-width bins, two runs each (weight 2/8 = 1/4):
    #   [0, .25)   0.1, 0.2  mean predicted 0.15  observed 1/2  |diff| 0.35
    #   [.25, .5)  0.3, 0.4  mean predicted 0.35  observed 0    |diff| 0.35
    #   [.5, .75)  0.6, 0.7  mean predicted 0.65  observed 1/2  |diff| 0.15
    #   [.75, 1]   0.8, 0.9  mean predicted 0.85  observed 1    |diff| 0.15
    #   ECE = (0.35 + 0.35 + 0.15 + 0.15) / 4 = 0.25
    # Brier = mean((s - y)^2) = (.01 + .64 + .09 + .16 + .16 + .49 + .04 + .01) / 8 = 1.6 / 8 = 0.2
    # AUROC: positives {.2, .6, .8, .9} beat negatives {.1, .3, .4, .7} in 1 + 3 + 4 + 4 = 12 of 16 pairs = 0.75
    assert report.ece == pytest.approx(0.25)
    assert report.brier == pytest.approx(0.2)
    assert report.auroc == pytest.approx(0.75)
    assert report.n == 8 and report.positives == 4
    assert report.counts == (2, 2, 2, 2)
    assert report.bin_centers == pytest.approx((0.125, 0.375, 0.625, 0.875))
    assert report.mean_predicted == pytest.approx((0.15, 0.35, 0.65, 0.85))
    assert report.observed == pytest.approx((0.5, 0.0, 0.5, 1.0))
    json.dumps(report.to_dict())  # storable / sendable as is


def test_reliability_bins_agree_with_sklearn_and_empty_bins_are_none():
    from sklearn.calibration import calibration_curve

    scores, labels = _bernoulli(500, 1, lambda s: s**2)
    scores = scores * 0.7  # nothing above 0.7: the top bins stay empty
    report = calibration_metrics(scores, labels, n_bins=10)
    observed, predicted = calibration_curve(labels, scores, n_bins=10)
    filled = [i for i, c in enumerate(report.counts) if c]
    assert np.allclose([report.observed[i] for i in filled], observed)
    assert np.allclose([report.mean_predicted[i] for i in filled], predicted)
    assert report.counts[-1] == 0 and report.observed[-1] is None and report.mean_predicted[-1] is None
    assert sum(report.counts) == 500


def test_perfectly_calibrated_scores_have_ece_near_zero():
    scores, labels = _bernoulli(200_000, 2)
    assert calibration_metrics(scores, labels).ece < 0.01


def test_one_class_has_no_auroc_and_bad_labels_are_rejected():
    assert calibration_metrics([0.2, 0.9], [1, 1]).auroc is None
    with pytest.raises(InputError, match="1 \\(approved\\) or 0"):
        calibration_metrics([0.2, 0.9], [1, -1])
    with pytest.raises(InputError, match="review some runs"):
        calibration_metrics([], [])


def test_isotonic_calibrator_is_monotone_and_round_trips_through_json():
    scores, labels = _bernoulli(800, 3, lambda s: s**2)
    calibrator = fit_calibrator(scores, labels, "isotonic")
    grid = np.linspace(-0.2, 1.2, 141)
    probabilities = calibrator(grid)
    assert np.all(np.diff(probabilities) >= 0) and probabilities.min() >= 0 and probabilities.max() <= 1
    restored = Calibrator.from_dict(json.loads(json.dumps(calibrator.to_dict())))
    assert restored == calibrator and np.array_equal(restored(grid), probabilities)
    x, y = isotonic_knots(scores, labels, pseudo_verdicts=ISOTONIC_PSEUDO_VERDICTS)
    np.testing.assert_allclose(probabilities, np.interp(grid, x, y), atol=1e-12)
    # it learned the squared relation, roughly, and claims no certainty its verdicts cannot give
    assert calibrator([0.3])[0] < 0.25 and calibrator([0.9])[0] > 0.6
    assert 0 < probabilities.min() and probabilities.max() < 1


def test_isotonic_calibrator_on_few_verdicts_says_how_few():
    """Ten flagged runs below ten approved: the plain fit says 0 and 1; ten verdicts a side say
    1/12 and 11/12 (Laplace's rule), and the ranking is the plain fit's."""
    scores = np.linspace(0.05, 0.95, 20)
    labels = np.array([0] * 10 + [1] * 10)
    calibrator = fit_calibrator(scores, labels, "isotonic")
    np.testing.assert_allclose(calibrator([0.1, 0.9]), [1 / 12, 11 / 12])
    _, plain_y = isotonic_knots(scores, labels)
    assert set(plain_y) == {0.0, 1.0}


def test_logistic_calibrator_increases_and_round_trips():
    scores, labels = _bernoulli(800, 4)
    calibrator = fit_calibrator(scores, labels, "logistic")
    assert calibrator.coef > 0 and np.all(np.diff(calibrator(np.linspace(0, 1, 11))) > 0)
    assert Calibrator.from_dict(json.loads(json.dumps(calibrator.to_dict()))) == calibrator
    with pytest.raises(InputError, match="not a stored calibrator"):
        Calibrator.from_dict({"method": "logistic"})
    with pytest.raises(InputError, match="unknown calibration method"):
        fit_calibrator(scores, labels, "platt")


def test_too_few_verdicts_say_how_many_are_needed():
    with pytest.raises(InputError, match=f"at least {MIN_VERDICTS} reviewed runs.*there are 6 \\(3 approved"):
        fit_calibrator([0.1, 0.2, 0.3, 0.7, 0.8, 0.9], [0, 0, 0, 1, 1, 1])
    with pytest.raises(InputError, match="some approved and some flagged.*there are 12 \\(12 approved, 0 flagged"):
        fit_calibrator(np.linspace(0, 1, 12), np.ones(12, dtype=int))
    with pytest.raises(InputError, match="there are 4"):
        fit_weights(np.random.default_rng(0).random((4, 7)), [0, 1, 0, 1])
    with pytest.raises(InputError, match="there are 3"):
        recommend_threshold([0.1, 0.5, 0.9], [0, 1, 1])


def test_fit_weights_finds_the_component_the_verdicts_follow():
    rng = np.random.default_rng(5)
    components = rng.random((3000, len(COMPONENTS)))
    labels = (rng.random(3000) < components[:, 3]).astype(int)  # verdicts follow bm25_dense_agreement only
    weights = fit_weights(components, labels)
    assert list(weights) == list(COMPONENTS)
    assert sum(weights.values()) == pytest.approx(1.0) and min(weights.values()) >= 0
    assert max(weights, key=weights.get) == "bm25_dense_agreement" and weights["bm25_dense_agreement"] > 0.8


def test_fit_weights_refuses_verdicts_that_carry_no_signal():
    rng = np.random.default_rng(6)
    quality = rng.random(200)
    components = np.clip(quality[:, None] + rng.normal(0, 0.05, (200, 7)), 0, 1)
    labels = (quality < 0.5).astype(int)  # every component is *lower* on approved runs
    with pytest.raises(InputError, match="carry no signal"):
        fit_weights(components, labels)


def test_recommended_threshold_is_the_lowest_meeting_the_target():
    scores, labels = _bernoulli(2000, 8)
    result = recommend_threshold(scores, labels, target_precision=0.9)
    assert result.reachable
    accepted = scores >= result.threshold
    assert labels[accepted].mean() >= 0.9 and accepted.sum() == result.n_auto_accepted
    assert result.precision == pytest.approx(labels[accepted].mean())
    assert result.recall == pytest.approx(labels[accepted].sum() / labels.sum())
    # the next lower score would break the target
    lower = scores[scores < result.threshold].max()
    assert labels[scores >= lower].mean() < 0.9
    assert "auto-accepting" in result.reason


def test_unreachable_precision_target_is_reported_with_a_reason():
    scores, labels = _bernoulli(200, 9)
    labels[np.argmax(scores)] = 0  # the top-scored run was flagged: precision 1.0 is out of reach
    result = recommend_threshold(scores, labels, target_precision=1.0)
    assert not result.reachable and result.threshold is None and result.n_auto_accepted == 0
    assert "no threshold reaches precision 100%" in result.reason
    none_approved = recommend_threshold(scores, np.zeros(200, dtype=int), target_precision=0.5)
    assert not none_approved.reachable


# --- the review queue's calibrator on the real store --------------------------------------------

_INSERT_RUNS = """
INSERT INTO runs (query, preset, backend, model, status, final_confidence, final_level, retrieval_confidence,
                  components, weights_profile, config)
SELECT 'question ' || c, 'balanced', 'offline', 'extractive', 'pending', c, 'LOW', c,
       ARRAY[c, c, c, c, c, c, c], 'default v1', '{}'
FROM unnest(CAST(:confidences AS float8[])) AS c
RETURNING id
"""


def _insert_runs(confidences) -> list[int]:
    from sqlalchemy import text

    from services.store import transaction

    with transaction() as session:
        return list(session.execute(text(_INSERT_RUNS), {"confidences": list(confidences)}).scalars())


def _review(run_ids, action):
    from services.review.queue import submit_review

    for run_id in run_ids:
        submit_review(run_id, expected_version=0, action=action, reviewer="tester",
                      flag_reason="wrong answer" if action == "flag" else None)


def test_queue_calibrator_appears_with_enough_verdicts_and_refits_only_when_they_change(clean_db):
    confidences = np.linspace(0.05, 0.95, 30)
    run_ids = _insert_runs(confidences)
    _review(run_ids[:5], "flag")
    _review(run_ids[20:25], "approve")
    assert calibrator_for_queue() is None  # 10 verdicts < QUEUE_MIN_VERDICTS
    _review(run_ids[5:10], "flag")
    _review(run_ids[25:], "approve")
    assert QUEUE_MIN_VERDICTS == 20
    fitted = calibrator_for_queue()
    assert isinstance(fitted, Calibrator) and fitted.method == "isotonic" and fitted.n_fitted == 20
    assert fitted([0.1])[0] == pytest.approx(1 / 12) and fitted([0.9])[0] == pytest.approx(11 / 12)  # ten verdicts a side
    assert calibrator_for_queue() is fitted  # nothing changed: the cached fit
    _review(run_ids[10:11], "approve")  # a new verdict: refit
    refitted = calibrator_for_queue()
    assert refitted is not fitted and refitted.n_fitted == 21


def test_queue_calibrator_needs_both_kinds_of_verdict(clean_db):
    run_ids = _insert_runs(np.linspace(0.1, 0.9, 25))
    _review(run_ids, "approve")
    assert calibrator_for_queue() is None


def test_queue_calibrator_refits_on_an_emptied_store_whose_verdicts_count_the_same(clean_db):
    """TRUNCATE ... RESTART IDENTITY gives the same verdict count and the same latest review id:
    only the runs' tables' new files tell the store changed (runs has none of its own since 0016)."""
    from sqlalchemy import text

    from services.store import transaction

    def reviewed(confidences) -> None:
        run_ids = _insert_runs(confidences)
        _review(run_ids[:10], "flag")
        _review(run_ids[10:], "approve")

    reviewed(np.linspace(0.05, 0.95, 20))  # low confidence flagged: calibrated high at the top
    before = calibrator_for_queue()
    assert before is not None and before([0.9])[0] == pytest.approx(11 / 12)  # ten approved, and the pseudo-verdicts
    with transaction() as session:
        session.execute(text("TRUNCATE runs, review_history RESTART IDENTITY CASCADE"))
    reviewed(np.linspace(0.95, 0.05, 20))  # now the high-confidence runs were the flagged ones
    after = calibrator_for_queue()
    assert after is not before and after([0.9])[0] == pytest.approx(0.5)  # isotonic: flat at the mean
