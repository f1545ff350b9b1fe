"""Re-scoring stored runs under other weights: the run matrix, the vectorized blend, triage.

Every stored run keeps its seven components and the blend's other inputs (`signals`), so
a weights profile re-scores the whole store with one matrix-vector product and a few
array operations - no retrieval, no Python loop over runs. The result equals what the
pipeline would have stored for the run's best iteration under that profile (which
iteration is "best" is not re-decided: that would need the other iterations' answers).
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from services.scoring.blend import BLEND_WEIGHTS
from services.scoring.calibration import CalibrationReport, calibration_metrics
from services.scoring.run_matrix import VERDICT_LABELS, RunMatrix, load_run_matrix, question_texts
from services.scoring.weights import LEVELS, WeightsProfile

__all__ = ["VERDICT_LABELS", "RunMatrix", "compare_profiles", "level_changes", "level_indexes", "levels",
           "load_run_matrix", "question_texts", "rescore", "triage", "auto_accepted"]

# --- scoring ------------------------------------------------------------------------------

def rescore(matrix: RunMatrix, profile: WeightsProfile) -> np.ndarray:
    """Final confidence of every run under `profile`: services.scoring.blend.blended_confidence,
    vectorized (absent signals drop out and the rest renormalize; the heuristic stands in
    only where reflection and grade are both absent), capped at retrieval where nothing
    was answered, as the pipeline does."""
    retrieval = matrix.components @ profile.weight_vector()
    rest, total_weight = _blend_rest(matrix)
    blended = (BLEND_WEIGHTS["retrieval"] * retrieval + rest) / total_weight
    return np.where(matrix.has_answer, blended, np.minimum(blended, retrieval))


_BLEND_PARTS: weakref.WeakKeyDictionary[RunMatrix, tuple[np.ndarray, np.ndarray]] = weakref.WeakKeyDictionary()


def _blend_rest(matrix: RunMatrix) -> tuple[np.ndarray, np.ndarray]:
    """The blend's terms that do not depend on the weights (reflection, grade, heuristic, and the
    weight they renormalize by), worked out once per matrix: a slider move then costs one
    matrix-vector product and three array operations (a million runs: bench/volume.py). The sum
    is grouped differently from blended_confidence's, so scores agree with the pipeline's to a
    few units in the last place, not bit for bit."""
    parts = _BLEND_PARTS.get(matrix)
    if parts is None:
        has_reflection = ~np.isnan(matrix.reflection)
        has_grade = ~np.isnan(matrix.grade_norm)
        uses_heuristic = ~np.isnan(matrix.heuristic) & ~has_reflection & ~has_grade
        rest = np.where(has_reflection, BLEND_WEIGHTS["reflection"] * np.nan_to_num(matrix.reflection), 0.0)
        rest = rest + np.where(has_grade, BLEND_WEIGHTS["grade"] * np.nan_to_num(matrix.grade_norm), 0.0)
        rest = rest + np.where(uses_heuristic, BLEND_WEIGHTS["heuristic"] * np.nan_to_num(matrix.heuristic), 0.0)
        total_weight = (BLEND_WEIGHTS["retrieval"] + np.where(has_reflection, BLEND_WEIGHTS["reflection"], 0.0)
                        + np.where(has_grade, BLEND_WEIGHTS["grade"], 0.0)
                        + np.where(uses_heuristic, BLEND_WEIGHTS["heuristic"], 0.0))
        parts = _BLEND_PARTS[matrix] = (rest, total_weight)
    return parts


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


def auto_accepted(matrix: RunMatrix, indexes: np.ndarray) -> np.ndarray:
    """Mask of the runs the pipeline's rule auto-accepts at these level indexes: HIGH, CRAG
    correct, reflection approved, an answer."""
    return (indexes == 0) & matrix.crag_correct & matrix.reflection_approved & matrix.has_answer


def triage(matrix: RunMatrix, scores: np.ndarray, profile: WeightsProfile) -> dict[str, Any]:
    """What the pipeline's rule would do with every run at these scores: auto-accept
    (HIGH, CRAG correct, reflection approved, an answer) or send to review."""
    indexes = level_indexes(scores, profile)
    auto = auto_accepted(matrix, indexes)
    by_level = _level_counts(indexes)
    n_auto = int(auto.sum())
    return {"total": len(matrix), "auto_accepted": n_auto, "review": len(matrix) - n_auto,
            "flagged_very_low": by_level["VERY LOW"], "by_level": by_level}


def level_changes(matrix: RunMatrix, old_scores: np.ndarray, new_scores: np.ndarray, old_profile: WeightsProfile,
                  new_profile: WeightsProfile, *, limit: int | None = None) -> list[dict[str, Any]]:
    """Runs whose level differs between the two scorings, largest score change first; their
    questions are not in the matrix (question_texts reads the few shown)."""
    old_scores = np.asarray(old_scores, dtype=np.float64)
    new_scores = np.asarray(new_scores, dtype=np.float64)
    old_index = level_indexes(old_scores, old_profile)
    new_index = level_indexes(new_scores, new_profile)
    changed = np.flatnonzero(old_index != new_index)
    delta = new_scores[changed] - old_scores[changed]
    order = changed[np.argsort(-np.abs(delta), kind="stable")][:limit]
    return [
        {"run_id": int(matrix.run_ids[i]), "old_level": LEVELS[old_index[i]],
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
