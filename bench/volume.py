"""Production volume: a store of N runs (COPY, not the API), then every view of them timed in one run.

    python bench/volume.py --runs 20000 --datadir /work/volume-data
    python bench/volume.py --runs 1000000 --datadir /work/volume-data   # reuses the runs already there

The runs are made from a few real template runs (bench/_volume_build.py): five SQuAD contexts,
the judges' outputs, a tenth reviewed, 90 days, five apps. Then, timed: the Review queue's
first page and a filtered page, Document trends, the Tuning page's open and one slider move
(AppTest, cold caches, as bench/pages.py), the re-score itself, the queue's calibration fit,
`workbench export` of every run in a subprocess (throughput, peak RSS from wait4), and
`GET /runs?reviewed_since` paged to the end on a real `workbench api`. Every timing goes with
the 1-minute load average (the machine is shared). The last stdout line is one JSON object.
Document trends read a rollup the store's triggers keep (migration 0015); the bench checks it
against the runs themselves for one whole day.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(REPO))

from bench._common import emit_timed, log, machine, median, phase, prepare_store, rounded, today  # noqa: E402
from bench._volume_clients import time_export, time_reviewed_since  # noqa: E402

TARGETS = {"page_s": 1.0, "rescore_s": 0.5, "export_peak_rss_mb": 500, "reviewed_since_last_page_p95_ms": 100}
BUILD_INFO = "volume-build.json"
# Indexes the timings call for: migration 0014's, read from it so there is one definition
# (--indexes creates them in a store built before it; IF NOT EXISTS leaves them where it made them).
_MIGRATION_0014 = Path(__file__).resolve().parent.parent / "db" / "migrations" / "versions" / "0014_review_queue_indexes.py"


def recommended_indexes() -> dict[str, str]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("migration_0014", _MIGRATION_0014)
    assert spec is not None and spec.loader is not None
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    return {name: f"CREATE INDEX IF NOT EXISTS {name} {definition}" for name, definition in migration.INDEXES.items()}


def load() -> float:
    return round(os.getloadavg()[0], 2)


def timed(out: dict[str, Any], name: str, fn: Any) -> Any:
    """Run fn(), store its seconds as out[name] and the load average beside it."""
    started = time.perf_counter()
    value = fn()
    out[name] = rounded(time.perf_counter() - started, 3)
    out[f"{name}_load"] = load()
    log(f"  {name}: {out[name]} s (load {out[f'{name}_load']})")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--datadir", type=Path, required=True, help="the embedded store's data dir (kept)")
    parser.add_argument("--templates", type=int, default=48, help="real runs the store is made from")
    parser.add_argument("--indexes", action="store_true", help="create migration 0014's indexes in this store first")
    parser.add_argument("--skip", default="", help="comma-separated parts not to time: pages,documents,export,api")
    args = parser.parse_args(argv)
    wall = time.perf_counter()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # The pages are timed with caches cleared; the app's background preload of the Tuning matrix
    # would load beside them. It is timed on its own instead (tuning_preload_s).
    os.environ["TUNING_PRELOAD"] = "false"
    data_dir, _, _ = prepare_store(args.datadir)
    timings: dict[str, float] = {}
    out: dict[str, Any] = {"bench": "volume", "date": today(), "machine": machine(), "runs_requested": args.runs}
    skip = set(filter(None, args.skip.split(",")))
    out.update(build(args, data_dir, timings))
    if args.indexes:
        out.update(time_queue_query("before_indexes"))
        with phase("recommended indexes", timings):
            out["indexes_created"] = create_indexes()
    out["indexes"] = present_indexes()
    out.update(store_size())
    if "pages" not in skip:
        with phase("pages (AppTest)", timings):
            out.update(time_pages(skip))
    if "documents" not in skip:
        with phase("document trends: rollup, its check against the runs, drill-downs", timings):
            out.update(time_documents())
    with phase("re-score and calibration", timings):
        out.update(time_scoring())
    if "export" not in skip:
        with phase("workbench export", timings):
            out.update(time_export(data_dir))
    if "api" not in skip:
        with phase("GET /runs?reviewed_since to the end", timings):
            out.update(time_reviewed_since())
    out.update(time_queue_query("final"))
    out["targets"] = TARGETS
    out["load_avg_1m"] = load()
    emit_timed(out, started=wall, timings=timings)
    return 0


def build(args: argparse.Namespace, data_dir: Path, timings: dict[str, float]) -> dict[str, Any]:
    from sqlalchemy import text

    from bench._volume_build import bulk_load, make_templates
    from services.store import get_engine, transaction

    with phase("start store and migrate", timings):
        get_engine()
    with transaction() as session:
        have = int(session.scalar(text("SELECT count(*) FROM runs")))
        templates = list(session.scalars(text(
            "SELECT run_id FROM run_intake WHERE trace_id LIKE 'template-%' AND run_id IS NOT NULL ORDER BY run_id")))
    info_path = data_dir / BUILD_INFO
    info = json.loads(info_path.read_text()) if info_path.exists() else {"build_s": 0.0, "loads": []}
    missing = args.runs - have
    if missing > 0:
        started = time.perf_counter()
        if not templates:
            with phase(f"{args.templates} template runs through intake (judges on)", timings):
                templates = make_templates(args.templates)
            missing = args.runs - have - len(templates)
        with phase(f"COPY {missing:,} runs", timings):
            written = bulk_load(missing, templates, progress=lambda done, total: log(f"    {done:,} / {total:,} runs")
                                if done % 100_000 == 0 or done == total else None)
        seconds = time.perf_counter() - started
        info["build_s"] = round(info["build_s"] + seconds, 1)
        info["loads"].append({"runs": missing, "seconds": round(seconds, 1), "rows": written, "load": load(),
                              "date": today()})
        info_path.write_text(json.dumps(info, indent=1))
    with transaction() as session:
        counts = {status: n for status, n in session.execute(text("SELECT status, count(*) FROM runs GROUP BY status"))}
    total = sum(counts.values())
    log(f"  store holds {total:,} runs: {counts}")
    return {"runs": total, "by_status": counts, "templates": len(templates), "build_s": info["build_s"],
            "build_loads": info["loads"]}


def time_queue_query(label: str) -> dict[str, Any]:
    """The Review queue's first page query alone (services.review.queue.review_queue, default filters)."""
    from services.review.queue import review_queue

    out: dict[str, Any] = {}
    timed(out, f"queue_query_{label}_s", lambda: review_queue(limit=500))
    return out


def create_indexes() -> dict[str, float]:
    from services.store import get_engine

    seconds = {}
    raw = get_engine().raw_connection()  # autocommit: VACUUM runs outside a transaction
    try:
        conn = raw.driver_connection
        assert conn is not None
        conn.autocommit = True
        for name, statement in recommended_indexes().items():
            started = time.perf_counter()
            conn.execute(statement)
            seconds[name] = round(time.perf_counter() - started, 1)
            log(f"  {name}: {seconds[name]} s")
        started = time.perf_counter()
        conn.execute("VACUUM ANALYZE runs")  # the visibility map an index-only scan needs
        seconds["vacuum_analyze_runs"] = round(time.perf_counter() - started, 1)
        conn.autocommit = False
    finally:
        raw.close()
    return seconds


def present_indexes() -> list[str]:
    from sqlalchemy import text

    from services.store import transaction

    with transaction() as session:
        return list(session.scalars(text("SELECT indexname FROM pg_indexes WHERE tablename = 'runs' ORDER BY 1")))


def store_size() -> dict[str, Any]:
    from sqlalchemy import text

    from services.store import transaction

    with transaction() as session:
        db = int(session.scalar(text("SELECT pg_database_size(current_database())")))
        runs = int(session.scalar(text("SELECT count(*) FROM runs")))
        # A partitioned table (runs, by month since 0016) has no storage of its own: sum its tree.
        tables = {name: int(session.scalar(text(
            "SELECT COALESCE((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree(CAST(:name AS "
            "regclass))), pg_total_relation_size(CAST(:name AS regclass)))"),
            {"name": name}) or 0)
            for name in ("runs", "run_iterations", "run_intake", "run_events", "review_history", "llm_calls",
                         "document_day_rollup", "run_matrix_rows", "document_run_index")
            if session.scalar(text("SELECT to_regclass(:name)"), {"name": name}) is not None}
    return {"store_bytes": db, "store_bytes_per_run": round(db / max(runs, 1)),
            "table_bytes_per_run": {name: round(size / max(runs, 1)) for name, size in tables.items()}}


# --- pages -----------------------------------------------------------------------------------

def _open(page: str, title: str, *, keep_resources: bool = False) -> tuple[float, Any]:
    """(seconds, AppTest) of a page's first run in a fresh session with cold caches (the kept
    run matrix too unless `keep_resources`: a session opening the page after another did)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=600)
    at.run()
    at.switch_page(f"app_pages/{page}.py")
    st.cache_data.clear()
    if not keep_resources:
        _clear_page_resources()
    started = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - started
    if at.exception:
        raise SystemExit(f"the {page} page raised: {at.exception[0].message}")
    if not at.title or at.title[0].value != title:
        raise SystemExit(f"the {page} page did not draw its title {title!r}")
    return seconds, at


def _clear_page_resources() -> None:
    """The Tuning page keeps its run matrix as a resource: a first open starts without it."""
    try:
        from app_pages._tuning_state import cached_run_matrix
        cached_run_matrix.clear()
    except ImportError:
        pass
    from services.scoring import calibration
    calibration._QUEUE_CACHE.clear()


def _time_preloaded_open() -> dict[str, Any]:
    """What a process with TUNING_PRELOAD (the default) does: the matrix loads in the background
    from its first session on (tuning_preload_s, start to kept), then the page's first open."""
    from app_pages import _tuning_state

    _clear_page_resources()
    _tuning_state._preloaded = False
    started = time.perf_counter()
    _tuning_state.preload_run_matrix()
    while _tuning_state._MATRICES.age_s(_tuning_state.run_store_epoch()) is None:
        if time.perf_counter() - started > 600:
            raise SystemExit("the Tuning matrix's preload kept nothing in 10 minutes (its error is logged above)")
        time.sleep(0.01)
    out = {"tuning_preload_s": rounded(time.perf_counter() - started, 3), "tuning_preload_load": load()}
    seconds, _ = _open("tuning", "Tune confidence weights", keep_resources=True)
    out["tuning_open_after_preload_s"], out["tuning_open_after_preload_load"] = rounded(seconds, 3), load()
    return out


def _rerun(at: Any, change: Any) -> float:
    started = time.perf_counter()
    change(at).run()
    seconds = time.perf_counter() - started
    if at.exception:
        raise SystemExit(f"a page rerun raised: {at.exception[0].message}")
    return seconds


def time_pages(skip: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    seconds, _ = _open("review", "Review queue")
    out["warmup_review_s"] = rounded(seconds, 3)
    seconds, at = _open("review", "Review queue")
    out["review_first_page_s"], out["review_first_page_load"] = rounded(seconds, 3), load()
    out["review_filtered_page_s"] = rounded(_rerun(at, lambda a: a.multiselect(key="review.levels").set_value(["LOW"])), 3)
    out["review_filtered_page_load"] = load()
    if "documents" not in skip:
        seconds, _ = _open("documents", "Document trends")
        out["documents_page_s"], out["documents_page_load"] = rounded(seconds, 3), load()
    seconds, _ = _open("tuning", "Tune confidence weights")  # the first since the process started: loads the matrix
    out["tuning_open_cold_s"], out["tuning_open_cold_load"] = rounded(seconds, 3), load()
    seconds, at = _open("tuning", "Tune confidence weights", keep_resources=True)
    out["tuning_open_s"], out["tuning_open_load"] = rounded(seconds, 3), load()
    out.update(_time_preloaded_open())
    from services.scoring.weights import COMPONENTS
    key = f"tuning.w.{COMPONENTS[0]}"
    value = float(at.slider(key=key).value)
    out["tuning_slider_move_s"] = rounded(_rerun(at, lambda a: a.slider(key=key).set_value(round(1 - value, 2))), 3)
    out["tuning_slider_move_load"] = load()
    for name in ("review_first_page", "review_filtered_page", "documents_page", "tuning_open_cold", "tuning_open",
                 "tuning_preload", "tuning_open_after_preload", "tuning_slider_move"):
        if name + "_s" in out:
            log(f"  {name}: {out[name + '_s']} s (load {out[name + '_load']})")
    return out


# --- document trends -------------------------------------------------------------------------

def time_documents() -> dict[str, Any]:
    """The trends from the rollup (migration 0015), the same day counted from the runs as a check
    that the triggers kept it (the newest day: every run of it read), and the drill-down of the
    busiest and the least seen document (the page opens the first), from the index of 0018, the
    busiest's checked against its runs read from their hits."""
    from datetime import timedelta

    from sqlalchemy import text

    from services.review.days import day_range
    from services.review.document_trends_check import document_runs_from_runs, document_trends_from_runs
    from services.review.documents import document_runs, document_trends
    from services.store import read_transaction

    out: dict[str, Any] = {}
    with read_transaction() as session:
        everything = timed(out, "documents_trends_s", lambda: document_trends(session=session))
        out["documents_listed"] = len(everything)
        out["document_day_rollup_rows"] = int(session.scalar(text("SELECT count(*) FROM document_day_rollup")))
        newest = session.scalar(text("SELECT max(created_at) FROM runs"))
        since, until = day_range(newest.date() - timedelta(days=1), newest.date() - timedelta(days=1))
        kept = document_trends(since=since, until=until, session=session)
        counted = timed(out, "documents_one_day_from_runs_s",
                        lambda: document_trends_from_runs(since=since, until=until, session=session))
        out["documents_one_day_runs"] = sum(t.runs for t in counted)
        out["documents_rollup_matches_runs"] = _same_trends(kept, counted)
        if everything:
            busiest, rarest = everything[0], min(everything, key=lambda t: t.runs)
            first = timed(out, "documents_drilldown_first_s",
                          lambda: document_runs(busiest.external_id, collection=busiest.collection, session=session))
            # The drill-down reads the index of 0018: checked against the runs' own hits for the busiest.
            counted_runs = timed(out, "documents_drilldown_first_from_runs_s", lambda: document_runs_from_runs(
                busiest.external_id, collection=busiest.collection, session=session))
            out["documents_drilldown_matches_runs"] = len(first) > 0 and first == counted_runs
            timed(out, "documents_drilldown_rarest_s",
                  lambda: document_runs(rarest.external_id, collection=rarest.collection, session=session))
            out["documents_rarest_runs"] = rarest.runs
    log(f"  rollup and runs agree on {newest.date() - timedelta(days=1)}: {out['documents_rollup_matches_runs']}; "
        f"drill-down index and runs agree: {out.get('documents_drilldown_matches_runs')}")
    return out


def _same_trends(kept: list[Any], counted: list[Any]) -> bool:
    """Equal counts, order and weeks; means equal to 1e-12 (an exact sum divided, against avg() adding
    floats in any order); titles aside (a rollup row keeps a title once seen)."""
    import dataclasses
    import math

    def close(a: float, b: float) -> bool:
        return math.isclose(a, b, rel_tol=1e-12)

    def same(a: Any, b: Any) -> bool:
        if len(a.weeks) != len(b.weeks) or not close(a.mean_confidence, b.mean_confidence):
            return False
        if not all(close(x.mean_confidence, y.mean_confidence) for x, y in zip(a.weeks, b.weeks)):
            return False
        weeks = tuple(dataclasses.replace(y, mean_confidence=x.mean_confidence) for x, y in zip(a.weeks, b.weeks))
        return dataclasses.replace(a, title="") == dataclasses.replace(b, title="", mean_confidence=a.mean_confidence,
                                                                         weeks=weeks)

    return len(kept) > 0 and len(kept) == len(counted) and all(same(a, b) for a, b in zip(kept, counted))


# --- scoring ---------------------------------------------------------------------------------

def _backend_cpu_s(pid: int) -> float | None:
    """CPU seconds a local server backend has used (None when /proc does not show it)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def matrix_load_cpu() -> dict[str, Any]:
    """The matrix load's CPU time, this process's and its server backend's (median of 3): on a
    shared machine wall time says more about the other sessions than about the load."""
    from sqlalchemy import text

    from services.scoring.tuning import load_run_matrix
    from services.store import read_transaction

    client, server = [], []
    with read_transaction() as session:
        pid = int(session.scalar(text("SELECT pg_backend_pid()")))
        for _ in range(3):
            before, cpu = _backend_cpu_s(pid), time.process_time()
            load_run_matrix(session=session)
            client.append(time.process_time() - cpu)
            after = _backend_cpu_s(pid)
            if before is not None and after is not None:
                server.append(after - before)
    out = {"tuning_matrix_load_client_cpu_s": rounded(median(client), 3),
           "tuning_matrix_load_server_cpu_s": rounded(median(server), 3) if server else None,
           "tuning_matrix_load_cpu_load": load()}
    log(f"  matrix load CPU: client {out['tuning_matrix_load_client_cpu_s']} s, server "
        f"{out['tuning_matrix_load_server_cpu_s']} s (load {out['tuning_matrix_load_cpu_load']})")
    return out


def time_scoring() -> dict[str, Any]:
    from services.scoring import calibration
    from services.scoring.tuning import load_run_matrix, rescore
    from services.scoring.weights import WeightsProfile

    out: dict[str, Any] = {}
    matrix = timed(out, "tuning_matrix_load_s", load_run_matrix)
    out["tuning_matrix_bytes_per_run"] = round(matrix.nbytes / max(len(matrix), 1))
    out.update(matrix_load_cpu())
    profile = WeightsProfile()
    rescore(matrix, profile)
    samples = []
    for _ in range(5):
        started = time.perf_counter()
        rescore(matrix, profile)
        samples.append(time.perf_counter() - started)
    out["rescore_s"], out["rescore_load"] = rounded(median(samples), 4), load()
    log(f"  rescore of {len(matrix):,} runs: median {out['rescore_s']} s")
    calibration._QUEUE_CACHE.clear()
    timed(out, "calibration_fit_s", calibration.calibrator_for_queue)
    return out


if __name__ == "__main__":
    sys.exit(main())
