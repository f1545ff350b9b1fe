"""Re-scoring stored runs under other weights: the run matrix, the vectorized blend, triage.

Every stored run keeps its seven components and the blend's other inputs (`signals`), so
a weights profile re-scores the whole store with one matrix-vector product and a few
array operations - no retrieval, no Python loop over runs. The result equals what the
pipeline would have stored for the run's best iteration under that profile (which
iteration is "best" is not re-decided: that would need the other iterations' answers).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from services.scoring.blend import BLEND_WEIGHTS, REFLECTION_MIN_SCORE
from services.scoring.calibration import CalibrationReport, calibration_metrics
from services.scoring.weights import COMPONENTS, LEVELS, WeightsProfile
from services.store import transaction

VERDICT_LABELS = {"approved": 1, "flagged": 0, "corrected": 0}  # everything else: -1, unreviewed


@dataclass(frozen=True, eq=False)  # eq=False: arrays have no single truth value; identity is enough
class RunMatrix:
    """Stored runs as parallel arrays, one row per run (COMPONENTS order for `components`)."""

    run_ids: np.ndarray  # int64
    components: np.ndarray  # (n, 7) float64
    reflection: np.ndarray  # float64, NaN when reflection did not run or failed
    grade_norm: np.ndarray  # (grade - 1) / 4, NaN when not graded
    heuristic: np.ndarray  # NaN unless the heuristic stood in for reflection and grade
    has_answer: np.ndarray  # bool
    crag_correct: np.ndarray  # bool: CRAG verdict CORRECT
    reflection_approved: np.ndarray  # bool: reflection >= the run's reflection_min_score (REFLECTION_MIN_SCORE)
    statuses: np.ndarray  # object
    labels: np.ndarray  # int8: 1 approved, 0 flagged/corrected, -1 unreviewed
    queries: np.ndarray  # object
    current_levels: np.ndarray  # object: the level stored with the run
    stored_confidence: np.ndarray  # float64: the final confidence stored with the run
    presets: np.ndarray  # object

    def __len__(self) -> int:
        return len(self.run_ids)

    @property
    def reviewed(self) -> np.ndarray:
        """Mask of runs with a reviewer verdict."""
        return self.labels >= 0


# One pass over runs, newest first (a backward scan of the primary key, no sort); the blend
# inputs come from `signals` (exactly what was blended), the auto-accept inputs from the
# columns the pipeline decided on. psycopg placeholders: the query runs on the driver's
# cursor (see load_run_matrix).
_RUN_MATRIX_SQL = """
SELECT id, query, status, final_level, final_confidence, preset, components,
       CAST(signals->>'reflection' AS float8) AS reflection,
       CAST(signals->>'grade' AS float8) AS grade_norm,
       CAST(signals->>'heuristic' AS float8) AS heuristic,
       final_answer <> '' AS has_answer,
       crag_verdict IS NOT DISTINCT FROM 'CORRECT' AS crag_correct,
       coalesce(reflection_score >= coalesce(CAST(config->>'reflection_min_score' AS float8), %(reflection_min)s),
                false) AS reflection_approved
FROM runs
ORDER BY id DESC
LIMIT CAST(%(limit)s AS bigint)
"""


def load_run_matrix(*, session: Session | None = None, limit: int | None = None) -> RunMatrix:
    """All stored runs (or the latest `limit`), oldest first, in one query."""
    if session is None:
        with transaction() as own:
            return load_run_matrix(session=own, limit=limit)
    params = {"limit": limit, "reflection_min": REFLECTION_MIN_SCORE}  # for runs stored without their threshold
    # Binary results on the session's own connection (same transaction): psycopg decodes
    # float8[] and numbers without text parsing, about half the time of a text() query at
    # 10k runs, and this load is what the Tuning page waits for.
    driver = session.connection().connection.driver_connection
    assert driver is not None  # a checked-out connection always has its DBAPI connection
    with driver.cursor(binary=True) as cursor:
        cursor.execute(_RUN_MATRIX_SQL, params)
        rows = cursor.fetchall()
    return _matrix_from_rows(rows[::-1])


def _matrix_from_rows(rows: Any) -> RunMatrix:
    n = len(rows)
    columns = list(zip(*rows)) if n else [()] * 13
    (ids, queries, statuses, levels_, confidence, presets, components, reflection, grade_norm, heuristic,
     has_answer, crag_correct, reflection_approved) = columns

    def floats(values: Any) -> np.ndarray:
        return np.array(values, dtype=np.float64)  # None -> NaN

    def objects(values: Any) -> np.ndarray:
        out = np.empty(n, dtype=object)
        out[:] = values
        return out

    status_array = objects(statuses)
    labels = np.full(n, -1, dtype=np.int8)
    for status, label in VERDICT_LABELS.items():
        labels[status_array == status] = label
    return RunMatrix(
        run_ids=np.array(ids, dtype=np.int64),
        components=np.fromiter(chain.from_iterable(components), np.float64, count=n * len(COMPONENTS))
        .reshape(n, len(COMPONENTS)),
        reflection=floats(reflection), grade_norm=floats(grade_norm), heuristic=floats(heuristic),
        has_answer=np.array(has_answer, dtype=bool), crag_correct=np.array(crag_correct, dtype=bool),
        reflection_approved=np.array(reflection_approved, dtype=bool), statuses=status_array,
        labels=labels, queries=objects(queries), current_levels=objects(levels_),
        stored_confidence=floats(confidence), presets=objects(presets),
    )


# --- scoring ------------------------------------------------------------------------------

def rescore(matrix: RunMatrix, profile: WeightsProfile) -> np.ndarray:
    """Final confidence of every run under `profile`: services.scoring.blend.blended_confidence,
    vectorized (absent signals drop out and the rest renormalize; the heuristic stands in
    only where reflection and grade are both absent), capped at retrieval where nothing
    was answered, as the pipeline does."""
    retrieval = matrix.components @ profile.weight_vector()
    has_reflection = ~np.isnan(matrix.reflection)
    has_grade = ~np.isnan(matrix.grade_norm)
    uses_heuristic = ~np.isnan(matrix.heuristic) & ~has_reflection & ~has_grade
    # Summed in blended_confidence's order (retrieval, reflection, grade, heuristic) so the
    # floats match the pipeline's.
    numerator = BLEND_WEIGHTS["retrieval"] * retrieval
    numerator = numerator + np.where(has_reflection, BLEND_WEIGHTS["reflection"] * np.nan_to_num(matrix.reflection), 0.0)
    numerator = numerator + np.where(has_grade, BLEND_WEIGHTS["grade"] * np.nan_to_num(matrix.grade_norm), 0.0)
    numerator = numerator + np.where(uses_heuristic, BLEND_WEIGHTS["heuristic"] * np.nan_to_num(matrix.heuristic), 0.0)
    total_weight = (BLEND_WEIGHTS["retrieval"] + np.where(has_reflection, BLEND_WEIGHTS["reflection"], 0.0)
                    + np.where(has_grade, BLEND_WEIGHTS["grade"], 0.0)
                    + np.where(uses_heuristic, BLEND_WEIGHTS["heuristic"], 0.0))
    blended = numerator / total_weight
    return np.where(matrix.has_answer, blended, np.minimum(blended, retrieval))


def level_indexes(scores: np.ndarray, profile: WeightsProfile) -> np.ndarray:
    """Index into LEVELS (0 HIGH ... 3 VERY LOW) of each score, by WeightsProfile.level's rule."""
    scores = np.asarray(scores, dtype=np.float64)
    return np.select([scores >= profile.high, scores >= profile.medium, scores >= profile.low], [0, 1, 2], default=3)


def levels(scores: np.ndarray, profile: WeightsProfile) -> np.ndarray:
    """Level name of each score (object array of LEVELS strings)."""
    return np.array(LEVELS, dtype=object)[level_indexes(scores, profile)]


def _level_counts(indexes: np.ndarray) -> dict[str, int]:
    counts = np.bincount(indexes, minlength=len(LEVELS))
    return {level: int(count) for level, count in zip(LEVELS, counts)}


def triage(matrix: RunMatrix, scores: np.ndarray, profile: WeightsProfile) -> dict[str, Any]:
    """What the pipeline's rule would do with every run at these scores: auto-accept
    (HIGH, CRAG correct, reflection approved, an answer) or send to review."""
    indexes = level_indexes(scores, profile)
    auto = (indexes == 0) & matrix.crag_correct & matrix.reflection_approved & matrix.has_answer
    by_level = _level_counts(indexes)
    n_auto = int(auto.sum())
    return {"total": len(matrix), "auto_accepted": n_auto, "review": len(matrix) - n_auto,
            "flagged_very_low": by_level["VERY LOW"], "by_level": by_level}


def level_changes(matrix: RunMatrix, old_scores: np.ndarray, new_scores: np.ndarray, old_profile: WeightsProfile,
                  new_profile: WeightsProfile, *, limit: int | None = None) -> list[dict[str, Any]]:
    """Runs whose level differs between the two scorings, largest score change first."""
    old_scores = np.asarray(old_scores, dtype=np.float64)
    new_scores = np.asarray(new_scores, dtype=np.float64)
    old_index = level_indexes(old_scores, old_profile)
    new_index = level_indexes(new_scores, new_profile)
    changed = np.flatnonzero(old_index != new_index)
    delta = new_scores[changed] - old_scores[changed]
    order = changed[np.argsort(-np.abs(delta), kind="stable")][:limit]
    return [
        {"run_id": int(matrix.run_ids[i]), "query": matrix.queries[i], "old_level": LEVELS[old_index[i]],
         "new_level": LEVELS[new_index[i]], "old_score": float(old_scores[i]), "new_score": float(new_scores[i]),
         "delta": float(new_scores[i] - old_scores[i])}
        for i in order
    ]


def compare_profiles(matrix: RunMatrix, a: WeightsProfile, b: WeightsProfile) -> dict[str, Any]:
    """Two profiles on the same runs: level counts and triage for each, the level confusion
    matrix (rows a, columns b, LEVELS order), score movement, and calibration on verdicts."""
    scores_a, scores_b = rescore(matrix, a), rescore(matrix, b)
    index_a, index_b = level_indexes(scores_a, a), level_indexes(scores_b, b)
    confusion = np.bincount(index_a * len(LEVELS) + index_b, minlength=len(LEVELS) ** 2).reshape(len(LEVELS), -1)
    reviewed = matrix.reviewed

    def side(profile: WeightsProfile, scores: np.ndarray, indexes: np.ndarray) -> dict[str, Any]:
        calibration: CalibrationReport | None = None
        if reviewed.any():
            calibration = calibration_metrics(scores[reviewed], matrix.labels[reviewed])
        return {"profile": profile.label, "counts": _level_counts(indexes), "triage": triage(matrix, scores, profile),
                "calibration": calibration}

    return {
        "levels": LEVELS,
        "a": side(a, scores_a, index_a),
        "b": side(b, scores_b, index_b),
        "confusion": confusion.tolist(),
        "changed": int((index_a != index_b).sum()),
        "mean_abs_delta": float(np.abs(scores_b - scores_a).mean()) if len(matrix) else 0.0,
        "reviewed": int(reviewed.sum()),
    }
