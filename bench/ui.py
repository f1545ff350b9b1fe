"""Tuning benchmark: re-scoring 10,000 stored runs, loading them, and the Tuning page's rerun.

    python bench/ui.py                   # 10,000 synthetic runs, ~1,000 verdicts
    python bench/ui.py --runs 50000      # a bigger store

A fresh embedded store in a new /tmp dir (deleted at the end unless --keep) is filled
with synthetic runs by one INSERT ... SELECT FROM unnest(...): realistic components,
blend signals computed by services.scoring.blend.blended_confidence (as the pipeline does),
levels, auto-accept statuses and reviewer verdicts. Then it times load_run_matrix,
services.scoring.tuning.rescore (median of 50, target < 20 ms), one slider move's service work,
and the Tuning page under streamlit's AppTest (a slider change + rerun, median of 5).
Progress goes to stderr; the last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(REPO))

from bench._common import emit_timed, log, machine, median, phase, prepare_store, rounded, shutdown_store, today  # noqa: E402

SEED = 20240611
RESCORE_TARGET_MS = 20.0
RESCORE_CALLS = 50
RERUNS = 5
TUNING_PAGE = "app_pages/tuning.py"


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    wall = time.perf_counter()
    # Always a fresh embedded store, chosen before any service (or the app under AppTest)
    # builds its settings.
    os.environ.pop("DATABASE_URL", None)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    data_dir, _created, settings = prepare_store(None)
    timings: dict[str, float] = {}
    result: dict[str, Any] = {"bench": "ui", "date": today(), "machine": machine(), "store": str(data_dir)}
    try:
        result.update(run(args, timings))
    finally:
        shutdown_store(settings, data_dir, remove=not args.keep)
    result["load_avg_1m"] = round(os.getloadavg()[0], 1)  # other work on the machine inflates every timing
    emit_timed(result, started=wall, timings=timings)
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000, help="synthetic runs to store (default 10000)")
    parser.add_argument("--verdicts", type=int, default=1_000, help="of which reviewed (default 1000)")
    parser.add_argument("--keep", action="store_true", help="keep the data dir")
    args = parser.parse_args(argv)
    if args.runs < 100 or not 0 <= args.verdicts <= args.runs:
        parser.error("--runs must be at least 100 and --verdicts between 0 and --runs")
    return args


def run(args: argparse.Namespace, timings: dict[str, float]) -> dict[str, Any]:
    from services.store import get_engine

    with phase("start store and migrate", timings):
        get_engine()
    with phase(f"generate {args.runs:,} synthetic runs", timings):
        columns = synthetic_runs(args.runs, args.verdicts, seed=SEED)
    with phase("insert runs (one INSERT ... FROM unnest) + ANALYZE", timings):
        insert_runs(columns)
    out: dict[str, Any] = {"runs": args.runs, "verdicts": args.verdicts}
    out.update(time_services())
    out.update(time_tuning_page())
    return out


# --- synthetic runs -------------------------------------------------------------------------

def synthetic_runs(n: int, n_verdicts: int, *, seed: int) -> dict[str, list[Any]]:
    """Runs shaped like the pipeline's: one latent answer quality drives the components,
    reflection, grade, CRAG verdict and the reviewers' verdicts, each with its own noise."""
    from services.scoring.blend import blended_confidence
    from services.scoring.confidence import overall
    from services.scoring.weights import DEFAULT_PROFILE

    rng = np.random.default_rng(seed)
    quality = rng.beta(2.2, 1.6, n)

    def noisy(scale: float) -> np.ndarray:
        return np.clip(quality + rng.normal(0, scale, n), 0, 1)

    entities = rng.integers(0, 4, n)  # a query naming no entities gets entity_support 0
    components = np.column_stack([
        noisy(0.10),  # top_score
        np.clip(quality * rng.random(n) * 1.6, 0, 1),  # score_gap
        np.clip(np.round(quality * 3 + rng.normal(0, 0.7, n)), 0, 3) / 3,  # consensus
        rng.binomial(8, quality) / 8,  # bm25_dense_agreement
        np.clip(1 - np.abs(rng.normal(0, 0.3, n)), 0, 1),  # low_spread
        np.where(entities > 0, rng.binomial(np.maximum(entities, 1), quality) / np.maximum(entities, 1), 0.0),
        (8 - rng.integers(1, 9, n)) / 7,  # low_diversity from 1-8 distinct documents of 8 hits
    ])
    presets = rng.choice(["minimal", "balanced", "research"], n, p=[0.2, 0.5, 0.3])
    answered = rng.random(n) < np.where(quality < 0.15, 0.5, 0.97)
    full = (presets != "minimal") & answered
    reflection = np.where(full & (rng.random(n) < 0.95), noisy(0.15), np.nan)
    grade = np.where(full & (rng.random(n) < 0.92), np.clip(np.round(1 + 4 * quality + rng.normal(0, 0.8, n)), 1, 5), np.nan)
    heuristic = np.clip(0.3 + 0.5 * quality + rng.normal(0, 0.1, n), 0, 1)
    crag = np.where(presets == "minimal", None,
                    np.where(components[:, 0] >= 0.6, "CORRECT", np.where(components[:, 0] >= 0.35, "AMBIGUOUS", "INCORRECT")))

    final, retrieval_conf, levels, statuses, signals = [], [], [], [], []
    for i in range(n):
        retrieval = overall(components[i], DEFAULT_PROFILE)
        blended, blend_inputs = blended_confidence(
            retrieval=retrieval, reflection=None if np.isnan(reflection[i]) else float(reflection[i]),
            grade=None if np.isnan(grade[i]) else int(grade[i]), heuristic=float(heuristic[i]))
        if not answered[i]:
            blended = min(blended, retrieval)
        blend_inputs["heuristic_value"] = float(heuristic[i])
        level = DEFAULT_PROFILE.level(blended)
        approved = not np.isnan(reflection[i]) and reflection[i] >= 0.8
        auto = level == "HIGH" and crag[i] == "CORRECT" and approved and answered[i]
        final.append(blended)
        retrieval_conf.append(retrieval)
        levels.append(level)
        statuses.append("auto_accepted" if auto else "pending")
        signals.append(json.dumps(blend_inputs))

    reviewed = rng.choice(n, n_verdicts, replace=False)
    approve = rng.random(n_verdicts) < np.clip(0.1 + 0.85 * quality[reviewed], 0, 1)
    now = datetime.now(UTC)
    reviewer: list[str | None] = [None] * n
    reviewed_at: list[datetime | None] = [None] * n
    flag_reason: list[str | None] = [None] * n
    versions = [0] * n
    for j, i in enumerate(reviewed):
        if approve[j]:
            statuses[i] = "approved"
        else:
            statuses[i] = "flagged" if rng.random() < 0.6 else "corrected"
            flag_reason[i] = "wrong answer" if statuses[i] == "flagged" else None
        reviewer[i], versions[i] = f"reviewer{j % 4}", 1
        reviewed_at[i] = now - timedelta(minutes=int(n_verdicts - j))

    columns: dict[str, list[Any]] = {
        "query": [f"synthetic question {i}: what does parameter P{i % 997} control?" for i in range(n)],
        "preset": presets.tolist(),
        "status": statuses,
        "answer": ["An extractive answer quoting the cited passage [1]." if a else "" for a in answered],
        "final_confidence": final,
        "final_level": levels,
        "retrieval_confidence": retrieval_conf,
        "reflection": [None if np.isnan(r) else float(r) for r in reflection],
        "grade": [None if np.isnan(g) else int(g) for g in grade],
        "crag": crag.tolist(),
        "signals": signals,
        "config": [json.dumps({"preset": p, "reflection_min_score": 0.8}) for p in presets],
        "review_version": versions,
        "reviewer": reviewer,
        "reviewed_at": reviewed_at,
        "flag_reason": flag_reason,
    }
    for k in range(components.shape[1]):
        columns[f"c{k}"] = components[:, k].tolist()
    return columns


_INSERT_RUNS = """
INSERT INTO runs (query, preset, backend, model, status, final_answer, final_confidence, final_level,
                  retrieval_confidence, components, reflection_score, grade, crag_verdict, signals, route,
                  best_iteration, iterations_count, weights_profile, config, review_version, reviewer, reviewed_at,
                  flag_reason)
SELECT query, preset, 'offline', 'extractive', status, answer, final_confidence, final_level,
       retrieval_confidence, ARRAY[c0, c1, c2, c3, c4, c5, c6], reflection, grade, crag, CAST(signals AS jsonb),
       ARRAY['COMPLETE'], 1, 1, 'default v1', CAST(config AS jsonb), review_version, reviewer, reviewed_at,
       flag_reason
FROM unnest(CAST(:query AS text[]), CAST(:preset AS text[]), CAST(:status AS text[]), CAST(:answer AS text[]),
            CAST(:final_confidence AS float8[]), CAST(:final_level AS text[]), CAST(:retrieval_confidence AS float8[]),
            CAST(:c0 AS float8[]), CAST(:c1 AS float8[]), CAST(:c2 AS float8[]), CAST(:c3 AS float8[]),
            CAST(:c4 AS float8[]), CAST(:c5 AS float8[]), CAST(:c6 AS float8[]),
            CAST(:reflection AS float8[]), CAST(:grade AS int[]), CAST(:crag AS text[]), CAST(:signals AS text[]),
            CAST(:config AS text[]), CAST(:review_version AS int[]), CAST(:reviewer AS text[]),
            CAST(:reviewed_at AS timestamptz[]), CAST(:flag_reason AS text[]))
     AS t(query, preset, status, answer, final_confidence, final_level, retrieval_confidence,
          c0, c1, c2, c3, c4, c5, c6, reflection, grade, crag, signals, config, review_version, reviewer,
          reviewed_at, flag_reason)
"""


def insert_runs(columns: dict[str, list[Any]]) -> None:
    from sqlalchemy import text

    from services.store import get_engine, transaction

    with transaction() as session:
        session.execute(text(_INSERT_RUNS), columns)
    with get_engine().connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM (ANALYZE) runs"))


# --- timings ------------------------------------------------------------------------------

def _median_ms(fn: Any, calls: int) -> float:
    fn()  # warm: first-call imports and caches are not what a slider move costs
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return median(samples)


def time_services() -> dict[str, Any]:
    from services.scoring.calibration import calibration_metrics, calibrator_for_queue
    from services.scoring.tuning import compare_profiles, level_changes, levels, load_run_matrix, rescore, triage
    from services.scoring.weights import DEFAULT_PROFILE, DEFAULT_WEIGHTS, WeightsProfile

    load_ms = _median_ms(load_run_matrix, 5)
    matrix = load_run_matrix()
    log(f"load_run_matrix: {load_ms:.1f} ms for {len(matrix):,} runs")
    rescore_ms = _median_ms(lambda: rescore(matrix, DEFAULT_PROFILE), RESCORE_CALLS)
    log(f"rescore: {rescore_ms:.2f} ms median of {RESCORE_CALLS} (target < {RESCORE_TARGET_MS:.0f} ms)")
    stored = rescore(matrix, DEFAULT_PROFILE)
    drift = float(np.abs(stored - matrix.stored_confidence).max())
    slider = WeightsProfile(weights={**DEFAULT_WEIGHTS, "top_score": 0.45})

    def slider_move() -> None:
        scores = rescore(matrix, slider)
        levels(scores, slider)
        triage(matrix, scores, slider)
        level_changes(matrix, stored, scores, DEFAULT_PROFILE, slider, limit=200)
        calibration_metrics(scores[matrix.reviewed], matrix.labels[matrix.reviewed])

    slider_ms = _median_ms(slider_move, 20)
    log(f"one slider move (rescore, levels, triage, level changes, calibration): {slider_ms:.1f} ms")
    compare_ms = _median_ms(lambda: compare_profiles(matrix, DEFAULT_PROFILE, slider), 10)
    started = time.perf_counter()
    calibrator = calibrator_for_queue()
    fit_ms = (time.perf_counter() - started) * 1000
    cached_ms = _median_ms(calibrator_for_queue, 10)
    return {
        "load_matrix_ms": rounded(load_ms, 1),
        "rescore_10k_ms": rounded(rescore_ms, 3),
        "rescore_target_ms": RESCORE_TARGET_MS,
        "rescore_meets_target": rescore_ms < RESCORE_TARGET_MS,
        "rescore_max_abs_diff_vs_stored": drift,
        "slider_move_services_ms": rounded(slider_ms, 1),
        "compare_profiles_ms": rounded(compare_ms, 1),
        "queue_calibrator_fit_ms": rounded(fit_ms, 1),
        "queue_calibrator_cached_ms": rounded(cached_ms, 2),
        "queue_calibrator": None if calibrator is None else calibrator.method,
    }


def time_tuning_page() -> dict[str, Any]:
    """Open the app, switch to the Tuning page, time a slider change + rerun (median of 5)."""
    from streamlit.testing.v1 import AppTest

    out: dict[str, Any] = {"tuning_rerun_s": None}
    if not (REPO / TUNING_PAGE).exists():
        out["note"] = f"{TUNING_PAGE} does not exist yet: the Tuning page rerun was not measured"
        return out
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
    started = time.perf_counter()
    at.run()
    out["app_first_run_s"] = rounded(time.perf_counter() - started, 2)
    try:
        at.switch_page(TUNING_PAGE)
    except ValueError as exc:
        out["note"] = f"{TUNING_PAGE} exists but the app does not route to it ({exc})"
        return out
    started = time.perf_counter()
    at.run()
    out["tuning_first_run_s"] = rounded(time.perf_counter() - started, 2)
    if at.exception:
        out["note"] = f"the Tuning page raised: {at.exception[0].message}"
        return out
    movable = [i for i, s in enumerate(at.slider) if not isinstance(s.value, tuple | list)]
    if not movable:
        out["note"] = "the Tuning page has no single-value slider to move"
        return out
    index = movable[0]
    slider = at.slider[index]
    original = slider.value
    step = slider.step or (slider.max - slider.min) / 20
    moved = original + step if original + step <= slider.max else original - step
    samples = []
    for i in range(RERUNS):  # back and forth, so every rerun sees a real change
        at.slider[index].set_value(moved if i % 2 == 0 else original)
        started = time.perf_counter()
        at.run()
        samples.append(time.perf_counter() - started)
        if at.exception:
            out["note"] = f"the Tuning page raised after a slider change: {at.exception[0].message}"
            return out
    out["tuning_rerun_s"] = rounded(median(samples), 3)
    out["tuning_slider"] = slider.label
    log(f"Tuning page rerun after a slider change: {out['tuning_rerun_s']} s median of {RERUNS}")
    return out


if __name__ == "__main__":
    sys.exit(main())
