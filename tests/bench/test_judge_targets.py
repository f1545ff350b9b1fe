"""bench/judge.py reads its targets from the figures as measured, then prints them rounded."""

from __future__ import annotations

from bench.judge import auroc, print_rounded, targets_met


def test_a_target_is_met_by_the_measured_figure_not_the_printed_one() -> None:
    summary = {"auroc": {"judge": {"pooled": 0.9199, "by_kind": {"wrong_option": 0.7996, "same_passage_name": 0.8}},
                         "length": {"pooled": 0.5}},
               "judge_auto_accept": {"n": 66, "right": 64}}
    met = targets_met(summary)
    assert met["pooled"] is False and met["wrong_option"] is False  # 0.920 and 0.800 as printed
    assert met["same_passage_name"] is True and met["length"] is True
    assert met["auto_accept_precision"] is False  # 64 of 66: 0.9697, printed 0.970
    printed = print_rounded(summary)
    assert printed["auroc"]["judge"]["by_kind"]["wrong_option"] == 0.8 and printed["auroc"]["judge"]["pooled"] == 0.92


def test_auroc_is_kept_unrounded_until_printed() -> None:
    # One right answer above two of the three wrong ones: 2/3, printed 0.667.
    assert abs(auroc([0, 0, 0, 1], [0.1, 0.2, 0.9, 0.5]) - 2 / 3) < 1e-12  # type: ignore[operator]
