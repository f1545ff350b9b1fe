"""Review load: N simulated reviewers race approve/flag/correct on a pool of shared runs for
a fixed time, then every outcome is checked against the append-only history.

    python bench/load.py [--reviewers 20] [--seconds 30] [--processes] [--runs 50]

Each action reads the run's review version, thinks 0-20 ms, and saves over that version
(services.review.queue, optimistic locking): it lands or gets a ConflictError. Reviewers are
threads of this process, or with --processes one process each, against one database (a
fresh embedded data dir, or DATABASE_URL).

Last stdout line: {"actions", "landed", "conflicts", "errors", "lost", "inconsistent",
"actions_per_s", "p95_ms", ...}. `lost` counts landed actions missing from the history;
`inconsistent` counts runs whose current state differs from their last history row or
whose versions are not 1..n; `overwrote` counts saves that landed over a version their
reviewer had not read. All three must be 0.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import describe, emit, log, machine, percentile, phase, prepare_store, rounded, shutdown_store, today  # noqa: E402

_HISTORY = """
SELECT run_id, version, action, reviewer, comment, new_status, flag_reason
FROM review_history WHERE run_id = ANY(:ids) ORDER BY run_id, version
"""
_CURRENT = "SELECT id, status, review_version, reviewer, review_comment, flag_reason FROM runs WHERE id = ANY(:ids)"


def _shared_run(i: int):  # type: ignore[no-untyped-def]
    """A stored-run shape as the pipeline leaves it, minus iterations (reviews never read them)."""
    from services.answering.runs import Run

    return Run(
        query=f"Load question {i}: how often are the pump seals inspected?", preset="balanced", collection="default",
        source="bench", backend="offline", model="extractive-v1", status="pending", final_answer="Every month [1].",
        citations=(), final_confidence=0.5, final_level="LOW", retrieval_confidence=0.5,
        components=(0.5,) * 7, reflection_score=0.5, grade=3, crag_verdict="AMBIGUOUS",
        signals={"retrieval": 0.5, "reflection": 0.5}, route=("ACCEPT_BEST",), best_iteration=1,
        weights_profile="default v1", weights_profile_id=None, config={"preset": "balanced"}, outcome_note="",
        latency_ms=0.0, iterations=(), events=(),
    )


def _act(rng: random.Random, reviewer: str, seq: int, run_ids: list[int], think_s: float) -> dict[str, Any]:
    from services.errors import ConflictError
    from services.review.queue import FLAG_REASONS, current_review_state, submit_review

    run_id = rng.choice(run_ids)
    action = rng.choice(("approve", "flag", "correct"))
    extra: dict[str, Any] = {}
    if action == "flag":
        extra["flag_reason"] = rng.choice(FLAG_REASONS)
    elif action == "correct":
        extra["corrected_answer"] = f"corrected by {reviewer}#{seq}"
    record: dict[str, Any] = {"run": run_id, "reviewer": reviewer, "comment": f"{reviewer}#{seq}", "action": action}
    think = rng.uniform(0, think_s)
    started = time.perf_counter()
    try:
        record["seen_status"], record["seen_version"] = current_review_state(run_id)
        time.sleep(think)
        review = submit_review(run_id, expected_version=record["seen_version"], action=action, reviewer=reviewer,
                               comment=record["comment"], **extra)
        record.update(outcome="landed", version=review.version, previous_status=review.previous_status)
    except ConflictError:
        record["outcome"] = "conflict"
    except Exception as exc:  # counted and shown: anything but a conflict is a finding
        record.update(outcome="error", error=f"{type(exc).__name__}: {exc}")
    record["ms"] = (time.perf_counter() - started - think) * 1000  # the store's time, not the thinking
    return record


def _review_until(reviewer: str, seed: int, run_ids: list[int], seconds: float, think_s: float,
                  start: Any = None) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    if start is not None:
        start.wait()
    deadline = time.monotonic() + seconds
    outcomes, seq = [], 0
    while time.monotonic() < deadline:
        outcomes.append(_act(rng, reviewer, seq, run_ids, think_s))
        seq += 1
    return outcomes


def _process_reviewer(reviewer: str, seed: int, run_ids: list[int], seconds: float, think_s: float,
                      start: Any, results: Any) -> None:
    """One reviewer in its own process (spawned: a fresh interpreter, its own engine)."""
    from services.store import dispose_engines, get_engine

    get_engine()  # join the store before the start, so start-up is not timed
    results.put(_review_until(reviewer, seed, run_ids, seconds, think_s, start))
    dispose_engines()


def _run_threads(names: list[str], run_ids: list[int], seconds: float, think_s: float, seed: int) -> list[dict[str, Any]]:
    outcomes: list[dict[str, Any]] = []
    lock = threading.Lock()
    start = threading.Barrier(len(names))

    def reviewer(index: int, name: str) -> None:
        mine = _review_until(name, seed + index, run_ids, seconds, think_s, start)
        with lock:
            outcomes.extend(mine)

    threads = [threading.Thread(target=reviewer, args=(i, n)) for i, n in enumerate(names)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def _run_processes(names: list[str], run_ids: list[int], seconds: float, think_s: float, seed: int) -> list[dict[str, Any]]:
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(len(names))
    results = context.Queue()
    processes = [context.Process(target=_process_reviewer, args=(n, seed + i, run_ids, seconds, think_s, start, results))
                 for i, n in enumerate(names)]
    for process in processes:
        process.start()
    try:
        outcomes: list[dict[str, Any]] = []
        for _ in processes:  # read before joining: a child cannot exit with a full pipe
            outcomes.extend(results.get(timeout=seconds + 600))
        for process in processes:
            process.join(60)
        return outcomes
    finally:
        for process in processes:
            if process.is_alive():
                process.kill()


def check(outcomes: list[dict[str, Any]], run_ids: list[int]) -> dict[str, int]:
    """Compare what every reviewer was told with the history and the current state."""
    from sqlalchemy import text

    from services.store import transaction

    with transaction() as session:
        history = session.execute(text(_HISTORY), {"ids": run_ids}).mappings().all()
        current = {r["id"]: r for r in session.execute(text(_CURRENT), {"ids": run_ids}).mappings()}
    landed = [o for o in outcomes if o["outcome"] == "landed"]
    key = ("run", "version", "reviewer", "comment", "action")
    told = {tuple(o[k] for k in key) for o in landed}
    recorded = {(h["run_id"], h["version"], h["reviewer"], h["comment"], h["action"]) for h in history}
    inconsistent = 0
    for run_id in run_ids:
        rows = [h for h in history if h["run_id"] == run_id]
        now = current[run_id]
        contiguous = [h["version"] for h in rows] == list(range(1, len(rows) + 1))
        matches = now["review_version"] == len(rows) and (not rows or (
            (now["status"], now["reviewer"], now["review_comment"], now["flag_reason"])
            == (rows[-1]["new_status"], rows[-1]["reviewer"], rows[-1]["comment"], rows[-1]["flag_reason"])))
        inconsistent += not (contiguous and matches)
    return {
        "lost": len(told - recorded),
        "phantom": len(recorded - told),  # history rows no reviewer was told had landed
        "overwrote": sum(o["version"] != o["seen_version"] + 1 or o["previous_status"] != o["seen_status"] for o in landed),
        "inconsistent": inconsistent,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reviewers", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--runs", type=int, default=50, help="shared runs the reviewers work on")
    parser.add_argument("--processes", action="store_true", help="one process per reviewer instead of threads")
    parser.add_argument("--think-ms", type=float, default=20.0, help="think time per action: uniform 0..this")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the data dir")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()

    data_dir, created, settings = prepare_store(args.data_dir)  # reviewer processes inherit the store
    from services.answering.runs import save_run
    from services.store import get_engine, transaction

    timings: dict[str, float] = {}
    try:
        with phase(f"store: {describe(settings)}", timings):
            get_engine(settings)
        with phase(f"create {args.runs} shared runs", timings):
            with transaction(settings) as session:
                run_ids = [save_run(_shared_run(i), session=session) for i in range(args.runs)]
        names = [f"reviewer-{i:02d}" for i in range(args.reviewers)]
        runner = _run_processes if args.processes else _run_threads
        kind = "processes" if args.processes else "threads"
        with phase(f"{args.reviewers} reviewers ({kind}) for {args.seconds:.0f} s", timings):
            outcomes = runner(names, run_ids, args.seconds, args.think_ms / 1000, args.seed)
        with phase("consistency check against the history", timings):
            found = check(outcomes, run_ids)
        errors = [o for o in outcomes if o["outcome"] == "error"]
        for error in errors[:5]:
            log(f"error: {error['error']}")
        latencies = [o["ms"] for o in outcomes]
        result = {
            "actions": len(outcomes),
            "landed": sum(o["outcome"] == "landed" for o in outcomes),
            "conflicts": sum(o["outcome"] == "conflict" for o in outcomes),
            "errors": len(errors),
            **found,
            "actions_per_s": rounded(len(outcomes) / args.seconds, 1),
            "p50_ms": rounded(percentile(latencies, 50), 1),
            "p95_ms": rounded(percentile(latencies, 95), 1),
            "reviewers": args.reviewers,
            "mode": kind,
            "runs": args.runs,
            "think_ms": args.think_ms,
            "seconds": args.seconds,
            "store": "embedded" if settings.embedded else "external",
            "load_average_1min": rounded(os.getloadavg()[0], 1),
            "machine": machine(),
            "date": today(),
        }
    finally:
        shutdown_store(settings, data_dir, remove=created and not args.keep)
    emit(result)


if __name__ == "__main__":
    main()
