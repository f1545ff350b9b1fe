"""Tuning figures as pure functions, on constructed scores, reports and comparisons."""

from __future__ import annotations

import numpy as np
import pytest

from services.charts import tuning as charts
from services.charts.confidence import LEVEL_COLORS
from services.scoring.calibration import calibration_metrics
from services.scoring.weights import COMPONENTS, DEFAULT_PROFILE, DEFAULT_WEIGHTS, LEVELS, WeightsProfile


def _y(trace) -> list[float]:  # type: ignore[no-untyped-def]
    return np.asarray(trace.y, dtype=float).tolist()


def test_weights_figure_shows_normalized_shares_in_components_order():
    fig = charts.weights_figure({**DEFAULT_WEIGHTS, "top_score": 0.9, "entity_support": 0.0})
    shares = np.asarray(fig.data[0].x)
    assert shares.sum() == pytest.approx(1.0) and len(shares) == len(COMPONENTS)
    assert shares[0] == pytest.approx(0.9 / 1.55) and shares[COMPONENTS.index("entity_support")] == 0
    assert fig.data[0].y[0] == "Top score"
    zero = charts.weights_figure(dict.fromkeys(COMPONENTS, 0.0))  # invalid sliders still draw
    assert np.asarray(zero.data[0].x).sum() == 0


def test_score_histogram_stacks_runs_by_level_with_threshold_lines():
    scores = np.array([0.95, 0.9, 0.86, 0.75, 0.72, 0.6, 0.3, 0.1, 0.85])
    fig = charts.score_histogram_figure(scores, DEFAULT_PROFILE, bins=20)
    assert fig.layout.barmode == "stack"
    counts = {trace.name: sum(_y(trace)) for trace in fig.data}
    assert counts == {"HIGH": 4, "MEDIUM": 2, "LOW": 1, "VERY LOW": 2}  # 0.85 is HIGH (>=)
    assert [trace.marker.color for trace in fig.data] == [LEVEL_COLORS[level] for level in LEVELS]
    assert len(fig.data[0].x) == 20 and fig.data[0].width == pytest.approx(0.05)
    lines = sorted(shape.x0 for shape in fig.layout.shapes)
    assert lines == [DEFAULT_PROFILE.low, DEFAULT_PROFILE.medium, DEFAULT_PROFILE.high]
    # the same scores under a stricter profile: fewer HIGH, the lines move
    strict = WeightsProfile(high=0.92, medium=0.8, low=0.5)
    strict_counts = {t.name: sum(_y(t)) for t in charts.score_histogram_figure(scores, strict, bins=20).data}
    assert strict_counts == {"HIGH": 1, "MEDIUM": 3, "LOW": 3, "VERY LOW": 2}


def test_score_histogram_keeps_out_of_range_scores_and_handles_no_runs():
    fig = charts.score_histogram_figure(np.array([1.0000000001, -1e-12]), DEFAULT_PROFILE)
    assert sum(sum(_y(t)) for t in fig.data) == 2  # clipped into the first and last bins
    empty = charts.score_histogram_figure(np.array([]), DEFAULT_PROFILE)
    assert sum(sum(_y(t)) for t in empty.data) == 0 and empty.layout.annotations[-1].text == "no stored runs yet"


def test_level_counts_figure_groups_before_and_after_in_levels_order():
    fig = charts.level_counts_figure({"HIGH": 3, "LOW": 1}, {"HIGH": 1, "MEDIUM": 2, "VERY LOW": 1},
                                     before_name="active", after_name="sliders")
    assert fig.layout.barmode == "group" and [t.name for t in fig.data] == ["active", "sliders"]
    assert list(fig.data[0].x) == list(LEVELS)
    assert _y(fig.data[0]) == [3, 0, 1, 0] and _y(fig.data[1]) == [1, 2, 0, 1]


def test_reliability_figure_has_the_diagonal_bin_counts_and_both_curves():
    scores = np.array([0.05, 0.15, 0.15, 0.55, 0.85, 0.95, 0.95, 0.95])
    labels = np.array([0, 0, 1, 1, 1, 1, 1, 0])
    report = calibration_metrics(scores, labels)
    reference = calibration_metrics(np.full(8, 0.5), labels)
    fig = charts.reliability_figure(report, reference=reference, reference_name="active")
    names = [t.name for t in fig.data]
    assert charts.DIAGONAL_NAME in names
    bars = next(t for t in fig.data if t.type == "bar")
    assert _y(bars) == list(report.counts) and sum(_y(bars)) == 8 and bars.yaxis == "y2"
    current = fig.data[-1]
    assert current.name.startswith("sliders (ECE")
    # empty bins are left out; marker size follows the bin count
    filled = [i for i, c in enumerate(report.counts) if c]
    assert list(current.x) == pytest.approx([report.mean_predicted[i] for i in filled])
    assert list(current.y) == pytest.approx([report.observed[i] for i in filled])
    assert list(current.customdata) == [report.counts[i] for i in filled]
    sizes = dict(zip(current.customdata, current.marker.size))
    assert sizes[3] > sizes[1]
    assert any(t.name.startswith("active (ECE") for t in fig.data)
    alone = charts.reliability_figure(report)
    assert len(alone.data) == 3  # counts, diagonal, the one curve


def _comparison() -> dict:
    return {
        "levels": LEVELS,
        "a": {"profile": "default v1", "counts": {"HIGH": 2, "MEDIUM": 1, "LOW": 1, "VERY LOW": 0}},
        "b": {"profile": "strict v2", "counts": {"HIGH": 1, "MEDIUM": 1, "LOW": 1, "VERY LOW": 1}},
        "confusion": [[1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0, 0, 0, 0]],
        "changed": 3, "mean_abs_delta": 0.1, "reviewed": 0,
    }


def test_compare_figure_puts_both_profiles_side_by_side():
    fig = charts.compare_figure(_comparison())
    assert [t.name for t in fig.data] == ["A: default v1", "B: strict v2"]
    assert _y(fig.data[0]) == [2, 1, 1, 0] and _y(fig.data[1]) == [1, 1, 1, 1]


def test_confusion_figure_is_a_heatmap_rows_a_columns_b():
    fig = charts.confusion_figure(_comparison())
    heatmap = fig.data[0]
    assert heatmap.type == "heatmap" and list(heatmap.x) == list(LEVELS) and list(heatmap.y) == list(LEVELS)
    assert np.asarray(heatmap.z).tolist() == _comparison()["confusion"]
    assert heatmap.texttemplate == "%{z}"
    assert fig.layout.yaxis.title.text == "A: default v1" and fig.layout.xaxis.title.text == "B: strict v2"


def test_figures_serialize_to_json():
    report = calibration_metrics([0.2, 0.8], [0, 1])
    for fig in (charts.weights_figure(DEFAULT_WEIGHTS), charts.score_histogram_figure([0.5], DEFAULT_PROFILE),
                charts.reliability_figure(report), charts.compare_figure(_comparison()),
                charts.confusion_figure(_comparison())):
        assert fig.to_json()


def test_profile_names_are_shown_literally_not_as_plotly_markup():
    result = _comparison()
    result["a"]["profile"] = "<a href='https://x.org'>evil</a> v1"
    bars = charts.compare_figure(result)
    assert bars.data[0].name == "A: &lt;a href='https://x.org'&gt;evil&lt;/a&gt; v1"
    assert "<a" not in charts.confusion_figure(result).layout.yaxis.title.text
    report = calibration_metrics([0.2, 0.8], [0, 1])
    assert all("<b>" not in t.name for t in charts.reliability_figure(report, name="<b>x</b>").data)
