"""Query-performance prediction signals on score lists small enough to work out by hand."""

from __future__ import annotations

import math

import pytest

from services.scoring.qpp import QPP_K, SIGNALS, all_signals, nqc, query_length, signals, smv, wig

# The running example: the best two of [4, 2, 2, 0] are [4, 2].
#   mean of all  mu_c = (4 + 2 + 2 + 0) / 4 = 2
#   mean of top  mu_k = (4 + 2) / 2         = 3
#   std of top          = sqrt(((4-3)^2 + (2-3)^2) / 2) = 1
SCORES = [4.0, 2.0, 2.0, 0.0]


def test_nqc_is_the_std_of_the_top_over_the_mean_of_all():
    assert nqc(SCORES, k=2) == pytest.approx(1.0 / 2.0)
    # k = 4, the whole list: std of [4, 2, 2, 0] = sqrt((4 + 0 + 0 + 4) / 4) = sqrt(2)
    assert nqc(SCORES, k=4) == pytest.approx(math.sqrt(2.0) / 2.0)


def test_wig_is_the_top_mean_above_the_mean_of_all_per_root_of_query_terms():
    assert wig(SCORES, k=2) == pytest.approx(3.0 - 2.0)
    assert wig(SCORES, k=2, query_terms=4) == pytest.approx((3.0 - 2.0) / 2.0)
    assert wig(SCORES, k=2, query_terms=9) == pytest.approx(1.0 / 3.0)
    # a query with no terms is not a division by zero: it counts as one term
    assert wig(SCORES, k=2, query_terms=0) == pytest.approx(1.0)


def test_smv_is_magnitude_times_log_deviation_over_the_mean_of_all():
    # top [4, 2], mu_k = 3, mu_c = 2: mean(4 |ln(4/3)|, 2 |ln(2/3)|) / 2
    expected = (4 * math.log(4 / 3) + 2 * math.log(3 / 2)) / 2 / 2
    assert smv(SCORES, k=2) == pytest.approx(expected)
    assert smv(SCORES, k=2) == pytest.approx(0.490415, abs=1e-6)


def test_only_the_best_k_count_as_the_top():
    # twelve scores, default k = 10: the last two only move the mean of all
    scores = [10.0] * QPP_K + [0.0, 0.0]
    mean_all = 100.0 / 12
    assert nqc(scores) == 0.0  # the top ten are all equal: no spread
    assert wig(scores) == pytest.approx(10.0 - mean_all)
    assert smv(scores) == 0.0  # every top score equals the top mean: ln(1) = 0


def test_one_score_gives_zero_for_every_signal():
    for signal in (nqc, wig, smv):
        assert signal([7.5]) == 0.0, signal.__name__
        assert signal([]) == 0.0, signal.__name__


def test_zero_mean_gives_zero_instead_of_dividing_by_it():
    assert nqc([0.0, 0.0, 0.0]) == 0.0
    assert nqc([1.0, -1.0]) == 0.0  # a spread, but nothing to divide it by
    assert smv([1.0, -1.0]) == 0.0
    assert wig([0.0, 0.0]) == 0.0  # wig does not divide by the mean: no spread, no gain


def test_smv_counts_non_positive_scores_as_nothing():
    # top [2, 0] of [2, 0, 0, 0]: mu_k = 1, mu_c = 0.5; the 0 has no log, contributes 0
    assert smv([2.0, 0.0, 0.0, 0.0], k=2) == pytest.approx((2 * math.log(2) + 0.0) / 2 / 0.5)
    # top [3, -1] of [3, -1, 1, 1]: mu_k = 1, mu_c = 1; the -1 contributes 0
    assert smv([3.0, -1.0, 1.0, 1.0], k=2) == pytest.approx(3 * math.log(3) / 2)
    # a top mean at or below zero (cosines of nothing alike) gives 0
    assert smv([0.0, -0.2, -0.4], k=2) == 0.0
    # a mean of all at or below zero gives 0 too
    assert smv([1.0, -5.0], k=1) == 0.0


def test_query_length_is_the_log_of_one_plus_the_content_terms():
    assert query_length(0) == 0.0  # stop words only
    assert query_length(1) == pytest.approx(math.log(2))
    assert query_length(7) == pytest.approx(math.log(8))
    assert query_length(-3) == 0.0  # never a log of a negative count


def test_query_idf_is_the_log_of_one_plus_the_summed_idf_when_a_leg_ran():
    measured = all_signals({"bm25": SCORES}, query_terms=3, query_idf=6.0)
    assert measured["query_idf"] == pytest.approx(math.log(7.0))
    assert "query_idf" not in all_signals({"bm25": SCORES}, query_terms=3)  # no BM25 leg's idf: unknown, not 0
    assert all_signals({}, query_terms=3, query_idf=6.0) == {}  # not searched here: no signals at all
    assert all_signals({"dense": SCORES}, query_terms=3, query_idf=-1.0)["query_idf"] == 0.0


def test_all_signals_names_each_signal_by_leg_and_divides_only_bm25_by_query_terms():
    measured = all_signals({"bm25": SCORES, "dense": SCORES}, query_terms=4)
    assert set(measured) == {f"{s}_{leg}" for s in ("nqc", "wig", "smv") for leg in ("bm25", "dense")} | {"query_length"}
    assert measured["query_length"] == pytest.approx(math.log(5))  # one per search, not per leg
    # the default k (10) covers the whole list: mu_k = mu_c = 2, so wig is 0 on both legs
    assert measured["wig_bm25"] == measured["wig_dense"] == 0.0
    top_heavy = [9.0] + [1.0] * 11  # mu_k = (9 + 9) / 10 = 1.8, mu_c = (9 + 11) / 12 = 5/3
    measured = all_signals({"bm25": top_heavy, "dense": top_heavy}, query_terms=4)
    assert measured["wig_dense"] == pytest.approx(1.8 - 5 / 3)
    assert measured["wig_bm25"] == pytest.approx((1.8 - 5 / 3) / 2)  # sqrt(4) query terms
    assert measured["nqc_bm25"] == measured["nqc_dense"] == pytest.approx(nqc(top_heavy))
    assert measured["smv_bm25"] == measured["smv_dense"] == pytest.approx(smv(top_heavy))


def test_a_leg_that_did_not_run_has_no_signals():
    only_bm25 = all_signals({"bm25": SCORES}, query_terms=2)
    assert set(only_bm25) == {"nqc_bm25", "wig_bm25", "smv_bm25", "query_length"}
    # an empty or missing list is a leg that did not run, as is one a caller marks None
    assert all_signals({"bm25": SCORES, "dense": ()}, query_terms=2) == only_bm25
    assert all_signals({"bm25": SCORES, "dense": None}, query_terms=2) == only_bm25  # type: ignore[dict-item]
    assert all_signals({}, query_terms=2) == {}  # nothing was searched: not even the query's length


def test_signals_keeps_only_the_chosen_signals_of_legs_that_ran():
    both = signals({"bm25": SCORES, "dense": [0.8, 0.5, 0.4]}, query_terms=3, query_idf=6.0)
    assert set(both) == set(SIGNALS)
    full = all_signals({"bm25": SCORES, "dense": [0.8, 0.5, 0.4]}, query_terms=3, query_idf=6.0)
    assert both == {name: full[name] for name in SIGNALS}
    dense_only = signals({"dense": [0.8, 0.5, 0.4]}, query_terms=3)  # no BM25 leg: no idf either
    assert set(dense_only) == {name for name in SIGNALS if not name.endswith("_bm25") and name != "query_idf"}
    assert signals({}, query_terms=3) == {}
