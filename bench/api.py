"""HTTP API intake: N concurrent clients push single runs through POST /runs for a fixed
time against a real `workbench api` (uvicorn in its own process), then every pushed run is
looked for in run_intake.

    python bench/api.py [--clients 20] [--seconds 30] [--data-dir DIR]
    python bench/api.py --attack [--attackers 19] [--seconds 30] [--pin-attackers]

Each client is a thread with its own httpx.Client (keep-alive), sending one run at a time:
a question, an answer, five contexts with retriever scores and metadata, and a unique trace
id. The server is the `workbench api` command as a user runs it (access log on, to
/dev/null here) on a free port, against a fresh embedded data dir (or DATABASE_URL).

Last stdout line: {"runs_per_s", "p50_ms", "p95_ms", "pushed", "stored", "lost", "errors",
...}. `pushed` counts 202 answers, `stored` the bench's trace ids found in run_intake, and
`lost` the pushed ones missing there: it must be 0. Runs are pushed with judges off
(`?judges=false`): the API's worker assesses them beside the intake, from their own retriever
scores; the figure is acceptance, what a production system waits for.

--attack (issue 28): one valid pusher alone for --seconds, then the same pusher for --seconds
while --attackers clients with no key post 4 MB JSON arrays as fast as they are answered
(threads of a process of their own, so that they do not hold the pusher's GIL).
Prints the pusher's p50/p95 alone and under attack, their ratio (target: p95 within 2x),
the attackers' answers by status, and `lost` (must be 0).

--pin-attackers: the attackers' process runs on the last CPU only, and everything else (the
bench's pusher, the API server, Postgres: children inherit it) on the others, in both phases.
Strangers' clients run on machines of their own; on a small machine their CPU would otherwise
be counted against the server. The unpinned figure is the one a shared machine gives.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import describe, emit, log, machine, percentile, phase, prepare_store, rounded, shutdown_store, today  # noqa: E402

_STORED = "SELECT trace_id FROM run_intake WHERE trace_id LIKE 'bench-%'"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _record(client: int, i: int) -> dict[str, Any]:
    return {
        "question": f"Client {client} question {i}: how do I clear alarm SRVO-062 after a battery change?",
        "answer": "Replace the pulsecoder battery with the controller on, then remaster the affected axes [1][2].",
        "trace_id": f"bench-{client:02d}-{i:07d}",
        "contexts": [{"text": f"Passage {rank}: SRVO-062 BZAL alarm means the pulsecoder backup battery ran low; "
                              "replace it with power on and remaster.",
                      "document_id": f"srvo-062-{rank}.md", "source": "manuals/alarms", "rank": rank,
                      "score": round(1 / (60 + rank), 5), "bm25_score": 9.0 - rank, "dense_similarity": 0.7 - rank / 20}
                     for rank in range(1, 6)],
        "metadata": {"app": "bench", "model": "bench-model", "user": f"user-{client}",
                     "timestamp": "2026-06-01T12:00:00Z", "extra": {"client": client}},
    }


def _start_api(port: int, data_dir: Path) -> subprocess.Popen[bytes]:
    workbench = Path(sys.executable).with_name("workbench")
    if not workbench.exists():
        raise SystemExit(f"{workbench} not found: install the package first (make install)")
    command = [str(workbench), "--data-dir", str(data_dir), "api", "--port", str(port)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _wait_healthy(base_url: str, server: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the API exited with {server.returncode} before it was healthy")
        try:
            if httpx.get(f"{base_url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit("the API did not become healthy in time")


def _push(base_url: str, key: str, clients: int, seconds: float, *, first: int = 0) -> list[dict[str, Any]]:
    """Every request's outcome: client, trace id, status, created, ms."""
    import httpx

    outcomes: list[dict[str, Any]] = []
    lock = threading.Lock()
    start = threading.Barrier(clients + 1)
    stop_at: list[float] = []

    def client(number: int) -> None:
        mine = []
        with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as http:
            start.wait()
            i = 0
            while time.monotonic() < stop_at[0]:
                record = _record(number, i)
                began = time.perf_counter()
                try:
                    response = http.post("/runs", json=record, params={"judges": "false"})
                    status = response.status_code
                    created = status == 202 and response.json()["runs"][0]["created"]
                    error = None if status == 202 else response.text[:200]
                except httpx.HTTPError as exc:
                    status, created, error = 0, False, f"{type(exc).__name__}: {exc}"
                mine.append({"trace_id": record["trace_id"], "status": status, "created": created, "error": error,
                             "ms": (time.perf_counter() - began) * 1000})
                i += 1
        with lock:
            outcomes.extend(mine)

    threads = [threading.Thread(target=client, args=(first + n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    stop_at.append(time.monotonic() + seconds)
    start.wait()
    for thread in threads:
        thread.join()
    return outcomes


def _attack_body() -> bytes:
    """A JSON array of about 4 MB: what a stranger sends to make the server parse."""
    import json

    record = {**_record(99, 0), "answer": "x" * 7_000}
    return json.dumps([record] * 400).encode()


def _attackers(base_url: str, count: int, stop: threading.Event) -> tuple[list[threading.Thread], dict[str, int]]:
    """`count` clients without a key posting the 4 MB body until `stop`: their answers by status."""
    import httpx

    body, answers, lock = _attack_body(), {}, threading.Lock()
    log(f"attack body: {len(body):,} bytes")

    def attacker() -> None:
        with httpx.Client(base_url=base_url, timeout=30) as http:
            while not stop.is_set():
                try:
                    status = str(http.post("/runs", content=body, headers={"Content-Type": "application/json"}).status_code)
                except httpx.HTTPError as exc:  # the server answers 401 and may close before the body is sent
                    status = type(exc).__name__
                with lock:
                    answers[status] = answers.get(status, 0) + 1

    threads = [threading.Thread(target=attacker, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads, answers


def _attack_process(base_url: str, count: int, ready: Any, stop: Any, results: Any, cpus: set[int] | None) -> None:
    """The attackers in a process of their own: their Python work (19 threads sending 4 MB each)
    must not take the measured pusher's GIL, as strangers on other machines would not."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    threads, answers = _attackers(base_url, count, stop)
    ready.set()
    for thread in threads:
        thread.join()
    results.put(answers)


def _cpu(server_pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) so far of the API server's process and of this one."""
    import psutil

    times = psutil.Process(server_pid).cpu_times()
    return times.user + times.system, time.process_time()


def _run_attack(base_url: str, key: str, attackers: int, seconds: float, timings: dict[str, float],
                server_pid: int, attacker_cpus: set[int] | None) -> dict[str, Any]:
    start = _cpu(server_pid)
    with phase(f"1 valid pusher alone for {seconds:.0f} s", timings):
        alone = _push(base_url, key, 1, seconds)
    import psutil

    context = multiprocessing.get_context("spawn")
    ready, stop, results = context.Event(), context.Event(), context.Queue()
    attacking = context.Process(target=_attack_process, args=(base_url, attackers, ready, stop, results, attacker_cpus),
                                  daemon=True)
    attacking.start()
    ready.wait(timeout=60)
    between = _cpu(server_pid)
    attackers_before = psutil.Process(attacking.pid).cpu_times()
    load_before = os.getloadavg()[0]
    with phase(f"1 valid pusher beside {attackers} unauthenticated 4 MB posters for {seconds:.0f} s", timings):
        attacked = _push(base_url, key, 1, seconds, first=1)  # trace ids of its own
    load_during = os.getloadavg()[0]
    end = _cpu(server_pid)
    attackers_after = psutil.Process(attacking.pid).cpu_times()
    stop.set()
    answers = results.get(timeout=90)
    attacking.join(timeout=60)
    ok_alone = [o["ms"] for o in alone if o["status"] == 202]
    ok_attacked = [o["ms"] for o in attacked if o["status"] == 202]
    p95_alone, p95_attacked = percentile(ok_alone, 95), percentile(ok_attacked, 95)
    return {
        "outcomes": alone + attacked,
        "p50_alone_ms": rounded(percentile(ok_alone, 50), 1), "p95_alone_ms": rounded(p95_alone, 1),
        "p50_attacked_ms": rounded(percentile(ok_attacked, 50), 1), "p95_attacked_ms": rounded(p95_attacked, 1),
        "p95_ratio": rounded(p95_attacked / p95_alone, 2) if p95_alone else None, "p95_ratio_target": 2.0,
        "pushed_alone": len(ok_alone), "pushed_attacked": len(ok_attacked),
        "attackers": attackers, "attacker_answers": dict(sorted(answers.items())),
        # Where the CPU went in each phase: the API server's process, the bench's (the pusher) and
        # the attackers' process, in CPU seconds per second of the phase.
        "api_cpu_per_s_alone": rounded((between[0] - start[0]) / seconds, 2),
        "api_cpu_per_s_attacked": rounded((end[0] - between[0]) / seconds, 2),
        "bench_cpu_per_s_alone": rounded((between[1] - start[1]) / seconds, 2),
        "bench_cpu_per_s_attacked": rounded((end[1] - between[1]) / seconds, 2),
        "attackers_cpu_per_s": rounded((attackers_after.user + attackers_after.system
                                        - attackers_before.user - attackers_before.system) / seconds, 2),
        "api_cpu_ms_per_attacker_post": rounded(1000 * ((end[0] - between[0]) - (between[0] - start[0]))
                                                / max(1, sum(answers.values())), 2),
        "attackers_pinned_to_cpus": sorted(attacker_cpus) if attacker_cpus else None,
        "load_average_1min_before_attack": rounded(load_before, 1), "load_average_1min_during_attack": rounded(load_during, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--attack", action="store_true", help="a valid pusher alone, then beside unauthenticated 4 MB posters")
    parser.add_argument("--attackers", type=int, default=19)
    parser.add_argument("--pin-attackers", action="store_true",
                        help="attackers on the last CPU, the server, Postgres and the pusher on the others")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the data dir")
    args = parser.parse_args()
    attacker_cpus = None
    if args.pin_attackers:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            parser.error("--pin-attackers needs at least 2 CPUs")
        attacker_cpus = {cpus[-1]}
        os.sched_setaffinity(0, set(cpus[:-1]))  # before the server and Postgres start: they inherit it

    data_dir, created, settings = prepare_store(args.data_dir)  # the API server inherits the store
    from sqlalchemy import text

    from services.intake.api_keys import create_api_key
    from services.store import get_engine, transaction

    timings: dict[str, float] = {}
    server = None
    try:
        with phase(f"store: {describe(settings)}", timings):
            get_engine(settings)  # migrated here; the API joins the same server
            with transaction(settings) as session:
                session.execute(text("DELETE FROM run_intake WHERE trace_id LIKE 'bench-%'"))
                key = create_api_key(name="bench", app="bench", created_by="bench/api.py", session=session).key
        port = _free_port()
        base_url = f"http://127.0.0.1:{port}"
        with phase(f"start workbench api on port {port}", timings):
            server = _start_api(port, data_dir)
            _wait_healthy(base_url, server)
        load_before = os.getloadavg()[0]
        attack: dict[str, Any] = {}
        if args.attack:
            attack = _run_attack(base_url, key, args.attackers, args.seconds, timings, server.pid, attacker_cpus)
            outcomes = attack.pop("outcomes")
        else:
            with phase(f"{args.clients} clients push single runs for {args.seconds:.0f} s", timings):
                outcomes = _push(base_url, key, args.clients, args.seconds)
        load_during = os.getloadavg()[0]
        with transaction(settings) as session:
            stored = {row[0] for row in session.execute(text(_STORED))}
        accepted = [o for o in outcomes if o["status"] == 202]
        errors = [o for o in outcomes if o["status"] != 202]
        for error in errors[:5]:
            log(f"error: {error['status']} {error['error']}")
        latencies = [o["ms"] for o in accepted]
        result = {
            "runs_per_s": rounded(len(accepted) / (args.seconds * (2 if args.attack else 1)), 1),
            "p50_ms": rounded(percentile(latencies, 50), 1),
            "p95_ms": rounded(percentile(latencies, 95), 1),
            "p99_ms": rounded(percentile(latencies, 99), 1),
            "pushed": len(accepted),
            "stored": len(stored),
            "lost": sum(o["trace_id"] not in stored for o in accepted),
            "not_new": sum(not o["created"] for o in accepted),  # every trace id is unique: must be 0
            "errors": len(errors),
            **attack,
            "clients": 1 if args.attack else args.clients,
            "seconds": args.seconds * (2 if args.attack else 1),
            "store": "embedded" if settings.embedded else "external",
            "load_average_1min_before": rounded(load_before, 1),
            "load_average_1min_after": rounded(load_during, 1),
            "machine": machine(),
            "date": today(),
        }
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
        shutdown_store(settings, data_dir, remove=created and not args.keep)
    emit(result)


if __name__ == "__main__":
    main()
