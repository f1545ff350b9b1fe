"""Re-scoring stored runs: the vectorized blend against the pipeline's, levels, triage,
level changes, profile comparison, and loading the run matrix from the real store."""

from __future__ import annotations

import math

import numpy as np
import pytest

from services.scoring.blend import blended_confidence
from services.scoring.confidence import overall
from services.scoring.tuning import RunMatrix, compare_profiles, level_changes, levels, load_run_matrix, rescore, triage
from services.scoring.weights import COMPONENTS, DEFAULT_PROFILE, DEFAULT_WEIGHTS, LEVELS, WeightsProfile

OTHER_PROFILE = WeightsProfile(name="other", weights={**DEFAULT_WEIGHTS, "top_score": 0.05, "consensus": 0.6,
                                                      "entity_support": 0.0}, high=0.8, medium=0.6, low=0.4)


def _objects(values):
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def _matrix(components, *, signals=None, has_answer=None, crag_correct=None, reflection_approved=None,
            labels=None) -> RunMatrix:
    """A RunMatrix the way load_run_matrix builds one: blend inputs read from `signals`."""
    components = np.asarray(components, dtype=np.float64)
    n = len(components)
    signals = signals if signals is not None else [{} for _ in range(n)]

    def signal(name):
        return np.array([s.get(name, math.nan) for s in signals], dtype=np.float64)

    def flags(values, default):
        return np.array(values if values is not None else [default] * n, dtype=bool)

    return RunMatrix(
        run_ids=np.arange(1, n + 1, dtype=np.int64), components=components, reflection=signal("reflection"),
        grade_norm=signal("grade"), heuristic=signal("heuristic"), has_answer=flags(has_answer, True),
        crag_correct=flags(crag_correct, True), reflection_approved=flags(reflection_approved, True),
        statuses=_objects(["pending"] * n), labels=np.array(labels if labels is not None else [-1] * n, dtype=np.int8),
        current_levels=_objects(["LOW"] * n),
        stored_confidence=np.zeros(n), presets=_objects(["balanced"] * n),
    )


def _pipeline_run(rng, profile):
    """One run's blend exactly as services.answering.pipeline._iterate computes it."""
    components = rng.random(len(COMPONENTS))
    answered = rng.random() < 0.8
    minimal = rng.random() < 0.25  # the minimal preset: no reflection, no grading
    reflection = float(rng.random()) if answered and not minimal and rng.random() < 0.8 else None
    grade = int(rng.integers(1, 6)) if answered and not minimal and rng.random() < 0.7 else None
    heuristic = float(rng.random())
    retrieval = overall(components, profile)
    blended, signals = blended_confidence(retrieval=retrieval, reflection=reflection, grade=grade, heuristic=heuristic)
    if not answered:
        blended = min(blended, retrieval)
    signals["heuristic_value"] = heuristic
    return components, signals, answered, blended, reflection, grade


@pytest.mark.parametrize("profile", [DEFAULT_PROFILE, OTHER_PROFILE])
def test_rescore_equals_the_pipeline_blend_run_by_run(profile):
    rng = np.random.default_rng(7)
    runs = [_pipeline_run(rng, profile) for _ in range(2000)]
    matrix = _matrix([r[0] for r in runs], signals=[r[1] for r in runs], has_answer=[r[2] for r in runs])
    expected = np.array([r[3] for r in runs])
    # every case is exercised: heuristic stand-in, reflection only, grade only, both, no answer
    assert (~np.isnan(matrix.heuristic)).any() and (~matrix.has_answer).any()
    assert (np.isnan(matrix.reflection) & ~np.isnan(matrix.grade_norm)).any()
    assert (~np.isnan(matrix.reflection) & np.isnan(matrix.grade_norm)).any()
    np.testing.assert_allclose(rescore(matrix, profile), expected, rtol=0, atol=1e-12)


def test_no_answer_caps_at_retrieval():
    # retrieval 0.2, heuristic 0.9: the blend would be 0.55, but nothing was answered
    matrix = _matrix([[0.2] * 7], signals=[{"retrieval": 0.2, "heuristic": 0.9}], has_answer=[False])
    assert rescore(matrix, DEFAULT_PROFILE)[0] == pytest.approx(0.2)
    answered = _matrix([[0.2] * 7], signals=[{"retrieval": 0.2, "heuristic": 0.9}], has_answer=[True])
    assert rescore(answered, DEFAULT_PROFILE)[0] == pytest.approx(0.55)


def _top_score_runs() -> RunMatrix:
    """Four retrieval-only runs: top_score t, the other six components all c."""
    rows = [(1.0, 0.8), (1.0, 0.7), (0.5, 0.9), (0.2, 0.5)]
    return _matrix([[t] + [c] * 6 for t, c in rows])


def test_raising_one_slider_moves_runs_between_levels():
    matrix = _top_score_runs()
    # default: top_score weight 0.30 -> 0.3 t + 0.7 c = 0.86, 0.79, 0.78, 0.41
    before = rescore(matrix, DEFAULT_PROFILE)
    np.testing.assert_allclose(before, [0.86, 0.79, 0.78, 0.41])
    assert triage(matrix, before, DEFAULT_PROFILE)["by_level"] == {"HIGH": 1, "MEDIUM": 2, "LOW": 0, "VERY LOW": 1}
    # slider top_score 0.30 -> 1.0 (others unchanged): normalized 1/1.7, rest 0.7/1.7
    raised = WeightsProfile(weights={**DEFAULT_WEIGHTS, "top_score": 1.0})
    after = rescore(matrix, raised)
    np.testing.assert_allclose(after, [(t + 0.7 * c) / 1.7 for t, c in [(1.0, 0.8), (1.0, 0.7), (0.5, 0.9), (0.2, 0.5)]])
    counts = triage(matrix, after, raised)
    assert counts["by_level"] == {"HIGH": 2, "MEDIUM": 0, "LOW": 1, "VERY LOW": 1}
    assert counts["auto_accepted"] == 2 and counts["review"] == 2 and counts["flagged_very_low"] == 1
    changes = level_changes(matrix, before, after, DEFAULT_PROFILE, raised)
    assert [(c["run_id"], c["old_level"], c["new_level"]) for c in changes] == [(3, "MEDIUM", "LOW"), (2, "MEDIUM", "HIGH")]
    assert abs(changes[0]["delta"]) >= abs(changes[1]["delta"])
    assert changes[0]["new_score"] == pytest.approx(after[2])


def test_levels_follow_the_profile_thresholds_at_the_boundaries():
    scores = np.array([1.0, 0.85, 0.8499, 0.70, 0.5, 0.4999, 0.0])
    assert levels(scores, DEFAULT_PROFILE).tolist() == ["HIGH", "HIGH", "MEDIUM", "MEDIUM", "LOW", "VERY LOW", "VERY LOW"]
    assert levels(scores, DEFAULT_PROFILE).tolist() == [DEFAULT_PROFILE.level(s) for s in scores]
    assert levels(scores, OTHER_PROFILE).tolist() == [OTHER_PROFILE.level(s) for s in scores]


def test_triage_applies_the_pipelines_auto_accept_rule():
    matrix = _matrix(np.zeros((6, 7)), crag_correct=[True, False, True, True, True, True],
                     reflection_approved=[True, True, False, True, True, True],
                     has_answer=[True, True, True, False, True, True])
    scores = np.array([0.9, 0.9, 0.9, 0.9, 0.75, 0.3])
    assert triage(matrix, scores, DEFAULT_PROFILE) == {
        "total": 6, "auto_accepted": 1, "review": 5, "flagged_very_low": 1,
        "by_level": {"HIGH": 4, "MEDIUM": 1, "LOW": 0, "VERY LOW": 1},
    }


def test_compare_profiles_counts_confusion_and_calibration():
    rng = np.random.default_rng(3)
    components = rng.random((400, 7))
    labels = np.where(rng.random(400) < 0.5, (rng.random(400) < components[:, 0]).astype(int), -1)
    matrix = _matrix(components, labels=labels)
    same = compare_profiles(matrix, DEFAULT_PROFILE, DEFAULT_PROFILE)
    assert same["changed"] == 0 and same["mean_abs_delta"] == 0.0
    assert np.array_equal(np.diag(same["confusion"]), [same["a"]["counts"][level] for level in LEVELS])
    result = compare_profiles(matrix, DEFAULT_PROFILE, OTHER_PROFILE)
    confusion = np.array(result["confusion"])
    assert confusion.sum() == 400
    assert confusion.sum(axis=1).tolist() == [result["a"]["counts"][level] for level in LEVELS]
    assert confusion.sum(axis=0).tolist() == [result["b"]["counts"][level] for level in LEVELS]
    assert result["changed"] == 400 - np.trace(confusion)
    assert result["a"]["calibration"].n == result["reviewed"] == int((labels >= 0).sum())
    assert compare_profiles(_matrix(components), DEFAULT_PROFILE, OTHER_PROFILE)["a"]["calibration"] is None


# --- the real store --------------------------------------------------------------------------

def _save(session, rng, profile, *, status="pending", crag="CORRECT", reflection_min=None):
    from services.answering.runs import Run, save_run

    components, signals, answered, blended, reflection, grade = _pipeline_run(rng, profile)
    config = {"preset": "balanced"} | ({"reflection_min_score": reflection_min} if reflection_min else {})
    run = Run(query=f"question {rng.integers(1_000_000)}", preset="balanced", collection="default", source="ask",
              backend="offline", model="extractive", status=status, final_answer="an answer" if answered else "",
              citations=(), final_confidence=blended, final_level=profile.level(blended),
              retrieval_confidence=overall(components, profile), components=tuple(components.tolist()),
              reflection_score=reflection, grade=grade, crag_verdict=crag, signals=signals, route=("COMPLETE",),
              best_iteration=1, weights_profile=profile.label, weights_profile_id=None, config=config,
              outcome_note="", latency_ms=1.0, iterations=(), events=())
    return save_run(run, session=session), run


def test_load_run_matrix_reads_every_blend_input_and_rescoring_reproduces_stored_scores(clean_db):
    from services.store import transaction

    rng = np.random.default_rng(11)
    statuses = ["pending", "auto_accepted", "approved", "flagged", "corrected"]
    crags = ["CORRECT", "AMBIGUOUS", None]
    with transaction() as session:
        saved = [_save(session, rng, DEFAULT_PROFILE, status=statuses[i % 5], crag=crags[i % 3]) for i in range(60)]
        saved.append(_save(session, rng, DEFAULT_PROFILE, reflection_min=0.99))  # a stricter preset threshold
    matrix = load_run_matrix()
    assert len(matrix) == 61 and matrix.components.shape == (61, 7)
    assert matrix.run_ids.tolist() == [run_id for run_id, _ in saved]
    runs = [run for _, run in saved]
    np.testing.assert_allclose(rescore(matrix, DEFAULT_PROFILE), [r.final_confidence for r in runs], rtol=0, atol=1e-12)
    assert levels(rescore(matrix, DEFAULT_PROFILE), DEFAULT_PROFILE).tolist() == [r.final_level for r in runs]
    assert matrix.current_levels.tolist() == [r.final_level for r in runs]
    assert matrix.labels.tolist() == [{"approved": 1, "flagged": 0, "corrected": 0}.get(r.status, -1) for r in runs]
    assert matrix.has_answer.tolist() == [bool(r.final_answer) for r in runs]
    assert matrix.crag_correct.tolist() == [r.crag_verdict == "CORRECT" for r in runs]
    threshold = [0.8] * 60 + [0.99]
    assert matrix.reflection_approved.tolist() == [r.reflection_score is not None and r.reflection_score >= t
                                                   for r, t in zip(runs, threshold)]
    assert matrix.statuses.tolist() == [r.status for r in runs]
    assert matrix.presets.tolist() == ["balanced"] * 61
    # the latest N, still oldest first
    assert load_run_matrix(limit=5).run_ids.tolist() == [run_id for run_id, _ in saved[-5:]]


def test_load_run_matrix_on_an_empty_store(clean_db):
    matrix = load_run_matrix()
    assert len(matrix) == 0 and matrix.components.shape == (0, 7)
    assert rescore(matrix, DEFAULT_PROFILE).shape == (0,)
    assert triage(matrix, rescore(matrix, DEFAULT_PROFILE), DEFAULT_PROFILE)["total"] == 0


def test_the_run_matrix_holds_no_text_and_reads_questions_only_for_the_runs_shown(clean_db):
    """At a million runs the matrix is kept in memory between slider moves: it holds numbers and
    shared status, level and preset strings, never a question (question_texts reads the few shown)."""
    from sqlalchemy import text

    from services.scoring import run_matrix
    from services.store import transaction

    rng = np.random.default_rng(3)
    with transaction() as session:
        saved = [_save(session, rng, DEFAULT_PROFILE) for _ in range(4)]
    # it reads run_matrix_rows' records (0017): numbers and codes, laid out as the store says
    assert "SELECT string_agg(numbers, ''::bytea) FROM run_matrix_rows" in run_matrix._MATRIX_SQL
    assert {field.split(":")[1] for field in run_matrix._LAYOUT.split(",")} == {"i8", "i2", "f8", "b1"}
    with transaction() as session:
        assert session.scalar(text("SELECT run_matrix_record_layout()")) == run_matrix._LAYOUT
        types = set(session.scalars(text("SELECT data_type FROM information_schema.columns "
                                         "WHERE table_name = 'run_matrix_rows'")))
    assert types == {"bigint", "timestamp with time zone", "bytea"}
    assert not {"queries", "query", "answers"} & set(RunMatrix.__dataclass_fields__)
    matrix = load_run_matrix()
    assert all(not getattr(matrix, name).flags.writeable for name in RunMatrix.__dataclass_fields__)  # shared: read-only
    wanted = [saved[1][0], saved[3][0]]
    assert run_matrix.question_texts(wanted) == {run_id: run.query for run_id, run in (saved[1], saved[3])}
    assert run_matrix.question_texts([]) == {}


def test_a_preset_or_status_outside_the_coded_lists_is_read_back_by_name(clean_db):
    from sqlalchemy import text

    from services.store import transaction

    rng = np.random.default_rng(5)
    with transaction() as session:
        saved = [_save(session, rng, DEFAULT_PROFILE) for _ in range(3)]
        session.execute(text("UPDATE runs SET preset = 'team-custom', status = 'archived' WHERE id = :id"),
                        {"id": saved[1][0]})
    matrix = load_run_matrix()
    assert matrix.presets.tolist() == ["balanced", "team-custom", "balanced"]
    assert matrix.statuses.tolist() == ["pending", "archived", "pending"] and matrix.labels.tolist() == [-1, -1, -1]
