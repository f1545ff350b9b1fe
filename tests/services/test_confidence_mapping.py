"""Confidence mappings (weighted score and QPP signals -> probability), the profiles that keep
them, and the breakdown a mapped profile gives."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from services.domain import Hit
from services.errors import InputError
from services.scoring.calibration import calibration_metrics
from services.scoring.confidence import breakdown_from_raw, components_from_raw, overall, raw_metrics
from services.scoring.mapping import MIN_PSEUDO_QUERIES, WEIGHTED, ConfidenceMapping, fit_mapping
from services.scoring.qpp import SIGNALS, signals
from services.scoring.weights import COMPONENTS, DEFAULT_PROFILE, WeightsProfile

GRID = np.linspace(0.0, 1.0, 41)


def _synthetic(n: int, seed: int, *, signal_effect: float = 3.0) -> tuple[list[float], list[dict[str, float]], list[int]]:
    """Weighted scores, a signal that carries information the weighted score lacks, and labels
    drawn from P(found) = sigmoid(4 (w - 0.5) + signal_effect * s)."""
    rng = np.random.default_rng(seed)
    weighted = rng.uniform(0.0, 1.0, n)
    signal = rng.normal(0.0, 1.0, n)
    p = 1.0 / (1.0 + np.exp(-(4.0 * (weighted - 0.5) + signal_effect * signal)))
    labels = (rng.uniform(0.0, 1.0, n) < p).astype(int)
    return weighted.tolist(), [{"nqc_bm25": float(s)} for s in signal], labels.tolist()


def _auroc(scores, labels) -> float:  # type: ignore[no-untyped-def]
    auroc = calibration_metrics(np.asarray(scores), np.asarray(labels)).auroc
    assert auroc is not None
    return auroc


# --- logistic ---------------------------------------------------------------------------

def test_logistic_mapping_is_a_probability_increasing_in_the_weighted_score():
    weighted, rows, labels = _synthetic(400, seed=1)
    mapping = fit_mapping(weighted, rows, labels, features=("nqc_bm25",))
    assert mapping.method == "logistic" and mapping.features == (WEIGHTED, "nqc_bm25")
    assert mapping.n_fitted == 400 and mapping.positives == sum(labels)
    for signal in (-2.0, 0.0, 2.0):
        outputs = [mapping(float(w), {"nqc_bm25": signal}) for w in GRID]
        assert all(0.0 <= p <= 1.0 for p in outputs)
        assert all(b > a for a, b in zip(outputs, outputs[1:])), signal  # labels rise with w: so does P
    # and rises with the signal, which the labels also rise with
    assert mapping(0.5, {"nqc_bm25": 1.0}) > mapping(0.5, {"nqc_bm25": 0.0}) > mapping(0.5, {"nqc_bm25": -1.0})


def test_logistic_mapping_applies_its_stored_parameters():
    mapping = ConfidenceMapping("logistic", features=(WEIGHTED, "nqc_bm25"), center=(0.5, 0.3), scale=(0.2, 0.1),
                                coef=(2.0, -1.0), intercept=0.25)
    # z = 0.25 + 2 (0.7 - 0.5) / 0.2 - 1 (0.5 - 0.3) / 0.1 = 0.25 + 2 - 2 = 0.25
    assert mapping(0.7, {"nqc_bm25": 0.5}) == pytest.approx(1.0 / (1.0 + math.exp(-0.25)))
    # a signal the mapping was not fitted on is ignored
    assert mapping(0.7, {"nqc_bm25": 0.5, "wig_bm25": 99.0}) == mapping(0.7, {"nqc_bm25": 0.5})


def test_a_separating_signal_ranks_better_than_the_weighted_score_alone():
    weighted, rows, labels = _synthetic(600, seed=2)
    mapping = fit_mapping(weighted[:300], rows[:300], labels[:300], features=("nqc_bm25",))
    # measured on the 300 it was not fitted on
    before = _auroc(weighted[300:], labels[300:])
    after = _auroc([mapping(float(w), r) for w, r in zip(weighted[300:], rows[300:])], labels[300:])
    assert after > before + 0.1, (before, after)


def test_a_feature_no_row_has_is_left_out():
    weighted, rows, labels = _synthetic(200, seed=3)
    mapping = fit_mapping(weighted, rows, labels, features=("nqc_bm25", "nqc_dense"))
    assert mapping.features == (WEIGHTED, "nqc_bm25")
    assert len(mapping.center) == len(mapping.scale) == len(mapping.coef) == 2
    assert all(math.isfinite(v) for v in (*mapping.center, *mapping.scale, *mapping.coef, mapping.intercept))


def test_a_missing_signal_gets_the_fitted_center():
    weighted, rows, labels = _synthetic(200, seed=4)
    # some rows lack the signal (runs stored before signals were kept): the fit imputes them
    rows = [{} if i % 5 == 0 else r for i, r in enumerate(rows)]
    mapping = fit_mapping(weighted, rows, labels, features=("nqc_bm25",))
    assert all(math.isfinite(v) for v in (*mapping.center, *mapping.scale, *mapping.coef))
    center = mapping.center[mapping.features.index("nqc_bm25")]
    for w in (0.1, 0.5, 0.9):
        assert mapping(w, {}) == mapping(w, {"nqc_bm25": center})
        assert mapping(w, {}) != mapping(w, {"nqc_bm25": center + 1.0})


def test_a_constant_feature_stays_finite():
    weighted, _rows, labels = _synthetic(100, seed=5)
    mapping = fit_mapping(weighted, [{"nqc_bm25": 0.4}] * 100, labels, features=("nqc_bm25",))
    assert mapping.scale[1] == 1.0
    assert all(0.0 <= mapping(float(w), {"nqc_bm25": 0.4}) <= 1.0 for w in GRID)


# --- isotonic ---------------------------------------------------------------------------

def test_isotonic_mapping_is_monotone_and_a_probability():
    weighted, rows, labels = _synthetic(300, seed=6)
    mapping = fit_mapping(weighted, rows, labels, features=("nqc_bm25",), method="isotonic")
    assert mapping.method == "isotonic" and mapping.x and len(mapping.x) == len(mapping.y)
    # it reads the weighted score only: the signal changes nothing
    outputs = [mapping(float(w), {"nqc_bm25": 5.0}) for w in GRID]
    assert outputs == [mapping(float(w), {}) for w in GRID]
    assert all(0.0 <= p <= 1.0 for p in outputs)
    assert all(b >= a for a, b in zip(outputs, outputs[1:]))
    assert outputs[-1] > outputs[0]
    # outside the fitted range it clips to the end knots
    assert mapping(-5.0, {}) == mapping.y[0] and mapping(5.0, {}) == mapping.y[-1]


# --- what a fit refuses -----------------------------------------------------------------

@pytest.mark.parametrize("method", ["logistic", "isotonic"])
def test_too_few_or_one_class_labels_are_input_errors(method: str):
    weighted, rows, labels = _synthetic(200, seed=7)
    few = MIN_PSEUDO_QUERIES - 1
    with pytest.raises(InputError, match=rf"at least {MIN_PSEUDO_QUERIES} pseudo-questions.*there were {few}"):
        fit_mapping(weighted[:few], rows[:few], labels[:few], features=("nqc_bm25",), method=method)
    with pytest.raises(InputError, match=r"some found and some missed; there were 200 \(200 found\)"):
        fit_mapping(weighted, rows, [1] * 200, features=("nqc_bm25",), method=method)
    with pytest.raises(InputError, match=r"there were 200 \(0 found\)"):
        fit_mapping(weighted, rows, [0] * 200, features=("nqc_bm25",), method=method)


def test_unknown_method_is_an_input_error():
    weighted, rows, labels = _synthetic(100, seed=8)
    with pytest.raises(InputError, match="unknown mapping method 'spline'"):
        fit_mapping(weighted, rows, labels, features=(), method="spline")
    with pytest.raises(InputError, match="unknown mapping method"):
        ConfidenceMapping("spline")


# --- storing a mapping ------------------------------------------------------------------

@pytest.mark.parametrize("method", ["logistic", "isotonic"])
def test_to_dict_from_dict_round_trip_gives_identical_outputs(method: str):
    weighted, rows, labels = _synthetic(200, seed=9)
    mapping = fit_mapping(weighted, rows, labels, features=("nqc_bm25",), method=method)
    stored = json.loads(json.dumps(mapping.to_dict()))  # as the profile row's JSONB keeps it
    restored = ConfidenceMapping.from_dict(stored)
    assert restored == mapping
    for w in GRID:
        for row in ({}, {"nqc_bm25": -1.5}, {"nqc_bm25": 0.7}):
            assert restored(float(w), row) == mapping(float(w), row)


@pytest.mark.parametrize("junk", [
    {},  # no method
    {"method": "cubic"},
    {"method": "logistic", "features": ["weighted"]},  # no center, scale or coefficient
    {"method": "logistic", "features": ["weighted"], "center": ["a"], "scale": [1.0], "coef": [1.0]},
    {"method": "logistic", "features": ["weighted"], "center": 5, "scale": [1.0], "coef": [1.0]},
    {"method": "isotonic", "x": [0.0, 1.0], "y": [0.5]},
    {"method": "isotonic", "x": [0.0], "y": [0.5], "n_fitted": "many"},
])
def test_from_dict_of_junk_is_an_input_error(junk):  # type: ignore[no-untyped-def]
    with pytest.raises(InputError):
        ConfidenceMapping.from_dict(junk)


# A stored value that is not a JSON object at all must be an InputError too: profile_for_run
# falls back from an unreadable stored copy on WorkbenchError, not on AttributeError.
@pytest.mark.parametrize("junk", [[1, 2], "junk", None])
def test_from_dict_of_a_non_object_is_an_input_error(junk):  # type: ignore[no-untyped-def]
    with pytest.raises(InputError):
        ConfidenceMapping.from_dict(junk)

# --- profiles with mappings --------------------------------------------------------------

LOGISTIC = ConfidenceMapping("logistic", features=(WEIGHTED, "nqc_bm25"), center=(0.5, 0.3), scale=(0.2, 0.1),
                             coef=(2.0, 1.0), intercept=0.1, n_fitted=120, positives=80)
ISOTONIC = ConfidenceMapping("isotonic", x=(0.2, 0.6), y=(0.1, 0.9), n_fitted=120, positives=80)
MAPPED = WeightsProfile(name="mapped", version=3, mappings={"docs": {"hybrid": LOGISTIC, "bm25": ISOTONIC},
                                                            "other": {"dense": ISOTONIC}})


def test_profile_with_mappings_round_trips():
    data = json.loads(json.dumps(MAPPED.to_dict()))
    assert set(data["mappings"]) == {"docs", "other"} and set(data["mappings"]["docs"]) == {"hybrid", "bm25"}
    assert WeightsProfile.from_dict(data) == MAPPED


def test_mapping_for_looks_up_collection_then_mode():
    assert MAPPED.mapping_for("docs", "hybrid") == LOGISTIC
    assert MAPPED.mapping_for("docs", "bm25") == ISOTONIC
    assert MAPPED.mapping_for("docs", "dense") is None
    assert MAPPED.mapping_for("elsewhere", "hybrid") is None
    assert MAPPED.mapping_for(None, "hybrid") is None and MAPPED.mapping_for("docs", None) is None


def test_a_profile_without_mappings_serializes_as_before():
    assert DEFAULT_PROFILE.to_dict() == {"name": "default", "version": 1, "weights": dict(DEFAULT_PROFILE.weights),
                                         "high": 0.85, "medium": 0.70, "low": 0.50}
    assert WeightsProfile.from_dict(DEFAULT_PROFILE.to_dict()) == DEFAULT_PROFILE
    assert DEFAULT_PROFILE.mapping_for("docs", "hybrid") is None


# --- the breakdown under a mapping ------------------------------------------------------

def _hit(rank: int, doc: int, *, dense: float, idf: float) -> Hit:
    return Hit(chunk_id=rank, document_id=doc, external_id=f"d{doc}", title=f"Doc {doc}", text="", rank=rank,
               fused_score=1.0 / (60 + rank), bm25_score=5.0, bm25_rank=rank, dense_similarity=dense,
               dense_rank=rank, matched_idf_share=idf)


HITS = (_hit(1, 1, dense=0.62, idf=0.9), _hit(2, 2, dense=0.50, idf=0.6), _hit(3, 2, dense=0.31, idf=0.2))
LEGS = {"bm25": (9.0, 6.5, 3.0, 2.0, 1.5), "dense": (0.62, 0.50, 0.31, 0.30)}


def _raw(collection: str | None, mode: str = "hybrid") -> dict:  # type: ignore[type-arg]
    return raw_metrics(HITS, mode=mode, collection=collection, query="why does magma rise", leg_scores=LEGS,
                       query_idf=4.2)


def test_raw_metrics_say_where_the_retrieval_ran_and_carry_its_signals():
    raw = _raw("docs")
    assert raw["mode"] == "hybrid" and raw["collection"] == "docs"
    assert set(raw["qpp"]) == set(SIGNALS)
    assert raw["qpp"] == signals(LEGS, query_terms=2, query_idf=4.2)  # "why", "does": stop words
    bm25_only = raw_metrics(HITS, mode="bm25", leg_scores={"bm25": LEGS["bm25"]}, query_idf=4.2)["qpp"]
    assert set(bm25_only) == {s for s in SIGNALS if not s.endswith("_dense")}
    assert raw_metrics(HITS)["qpp"] == {} and raw_metrics(HITS)["collection"] is None


def test_breakdown_with_a_mapping_is_the_mapping_of_the_weighted_sum():
    raw = _raw("docs")
    breakdown = breakdown_from_raw(raw, MAPPED)
    plain = overall(components_from_raw(raw), MAPPED)
    assert breakdown.weighted == pytest.approx(plain, abs=1e-15)
    assert breakdown.overall == LOGISTIC(breakdown.weighted, raw["qpp"])
    assert breakdown.overall != pytest.approx(breakdown.weighted)
    assert sum(breakdown.contributions.values()) == pytest.approx(breakdown.overall)
    # the contributions keep their proportions: each is weight x component, scaled
    ratio = breakdown.overall / breakdown.weighted
    for name, weight in zip(COMPONENTS, MAPPED.weight_vector()):
        assert breakdown.contributions[name] == pytest.approx(weight * breakdown.components[name] * ratio)
    assert breakdown.level == MAPPED.level(breakdown.overall)
    assert breakdown.to_dict()["weighted_confidence"] == breakdown.weighted


def test_breakdown_without_a_mapping_is_the_weighted_sum():
    for profile, raw in ((DEFAULT_PROFILE, _raw("docs")), (MAPPED, _raw("elsewhere")), (MAPPED, _raw("docs", "dense"))):
        breakdown = breakdown_from_raw(raw, profile)
        assert breakdown.overall == breakdown.weighted == pytest.approx(overall(components_from_raw(raw), profile))
        assert sum(breakdown.contributions.values()) == pytest.approx(breakdown.overall)


def test_breakdown_of_no_hits_under_a_mapping_spreads_the_total_evenly():
    raw = raw_metrics((), mode="hybrid", collection="docs")
    breakdown = breakdown_from_raw(raw, MAPPED)
    assert breakdown.weighted == 0.0
    assert breakdown.overall == LOGISTIC(0.0, {}) > 0.0
    assert sum(breakdown.contributions.values()) == pytest.approx(breakdown.overall)
    assert len(set(breakdown.contributions.values())) == 1
