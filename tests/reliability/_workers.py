"""Child processes for the reliability tests, and the parent's side of talking to them.

    python -m tests.reliability._workers reviewers --runs 1,2 --names a,b --actions 25 --go FILE --out FILE
    python -m tests.reliability._workers hold      (joins the store; then obeys commands on stdin)
    python -m tests.reliability._workers ingest DIR --collection NAME

Children find the store the way the app does: WORKBENCH_DATA_DIR / DATABASE_URL from the
environment. Each prints JSON lines on stdout; the first one says it is ready.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


# --- one reviewer action, shared by threads here and in the tests ---------------------------

def review_action(rng: random.Random, reviewer: str, seq: int, run_ids: list[int], think_s: float) -> dict[str, Any]:
    """Read a run's version, think, then save an approve/flag/correct over that version."""
    from services.errors import ConflictError
    from services.review.queue import FLAG_REASONS, current_review_state, submit_review

    run_id = rng.choice(run_ids)
    action = rng.choice(("approve", "flag", "correct"))
    comment = f"{reviewer}#{seq}"  # names the action, so history rows map back to it
    extra: dict[str, Any] = {}
    if action == "flag":
        extra["flag_reason"] = rng.choice(FLAG_REASONS)
    elif action == "correct":
        extra["corrected_answer"] = f"answer corrected by {comment}"
    record: dict[str, Any] = {"run": run_id, "reviewer": reviewer, "comment": comment, "action": action, **extra}
    try:
        record["seen_status"], record["seen_version"] = current_review_state(run_id)
        time.sleep(rng.uniform(0, think_s))  # others land meanwhile: the race under test
        review = submit_review(run_id, expected_version=record["seen_version"], action=action, reviewer=reviewer,
                               comment=comment, **extra)
        record.update(outcome="landed", version=review.version, previous_status=review.previous_status)
    except ConflictError as exc:
        record.update(outcome="conflict", current_version=exc.current.get("version"))
    except Exception as exc:  # anything else is a finding: report it, do not stop the others
        record.update(outcome="error", error=f"{type(exc).__name__}: {exc}")
    return record


def run_reviewers(names: list[str], actions_each: int, run_ids: list[int], *, seed: int,
                  think_s: float = 0.005, start: threading.Event | None = None) -> list[dict[str, Any]]:
    """One thread per reviewer name, each taking `actions_each` actions; all outcomes."""
    outcomes: list[dict[str, Any]] = []
    lock = threading.Lock()

    def reviewer(index: int, name: str) -> None:
        rng = random.Random(seed * 1000 + index)
        if start is not None:
            start.wait()
        for seq in range(actions_each):
            record = review_action(rng, name, seq, run_ids, think_s)
            with lock:
                outcomes.append(record)

    threads = [threading.Thread(target=reviewer, args=(i, n), name=f"reviewer-{n}") for i, n in enumerate(names)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


# --- child commands -------------------------------------------------------------------------

def _say(data: dict[str, Any]) -> None:
    print(json.dumps(data, default=str), flush=True)


def _ready(**extra: Any) -> None:
    from db.embedded import handle_pids, postgres_pid
    from services.settings import get_settings

    settings = get_settings()
    if settings.embedded:
        extra.update(postgres=postgres_pid(settings.workbench_data_dir), handles=handle_pids(settings.workbench_data_dir))
    _say({"ready": os.getpid(), **extra})


def _reviewers(args: argparse.Namespace) -> None:
    from services.store import get_engine

    get_engine()  # start/join the store and migrate before the starting gun
    _ready()
    while not Path(args.go).exists():
        time.sleep(0.01)
    run_ids = [int(r) for r in args.runs.split(",")]
    outcomes = run_reviewers(args.names.split(","), args.actions, run_ids, seed=args.seed, think_s=args.think)
    with open(args.out, "w", encoding="utf-8") as out:
        out.writelines(json.dumps(o) + "\n" for o in outcomes)
    _say({"done": len(outcomes)})


def _hold(args: argparse.Namespace) -> None:
    """Keep a handle on the store until stdin closes; answer one-line commands meanwhile."""
    from db.embedded import handle_pids, postgres_pid
    from services.answering.runs import save_run
    from services.review.queue import review_history, submit_review
    from services.settings import get_settings
    from services.store import get_engine, transaction

    get_engine()
    _ready()
    data_dir = get_settings().workbench_data_dir
    for line in sys.stdin:
        command, *rest = line.split()
        if command == "store":
            from tests.services.test_export import make_run

            with transaction() as session:
                _say({"run": save_run(make_run(), session=session)})
        elif command == "review":  # review RUN EXPECTED_VERSION REVIEWER
            landed = submit_review(int(rest[0]), expected_version=int(rest[1]), action="approve", reviewer=rest[2])
            _say({"version": landed.version})
        elif command == "history":
            _say({"history": [[h.version, h.action, h.reviewer] for h in review_history(int(rest[0]))]})
        elif command == "where":
            _say({"postgres": postgres_pid(data_dir), "handles": handle_pids(data_dir)})
        else:
            _say({"error": f"unknown command {command}"})


def _ingest(args: argparse.Namespace) -> None:
    from services.corpus.ingest import ingest_paths
    from services.store import get_engine

    get_engine()
    _ready()
    summary = ingest_paths([Path(args.path)], collection=args.collection)
    _say({"ingested": summary.ingested, "unchanged": summary.unchanged})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability._workers")
    commands = parser.add_subparsers(dest="command", required=True)
    reviewers = commands.add_parser("reviewers")
    reviewers.add_argument("--runs", required=True)
    reviewers.add_argument("--names", required=True)
    reviewers.add_argument("--actions", type=int, required=True)
    reviewers.add_argument("--seed", type=int, default=1)
    reviewers.add_argument("--think", type=float, default=0.005)
    reviewers.add_argument("--go", required=True)
    reviewers.add_argument("--out", required=True)
    commands.add_parser("hold")
    ingest = commands.add_parser("ingest")
    ingest.add_argument("path")
    ingest.add_argument("--collection", default="default")
    args = parser.parse_args(argv)
    {"reviewers": _reviewers, "hold": _hold, "ingest": _ingest}[args.command](args)


# --- the parent's side ----------------------------------------------------------------------

class Child:
    """A worker process with its stdout read line by line in the background."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability._workers", *args], cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.pid = self.process.pid
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self.process.stdout, self._lines.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.process.stderr, self._stderr.append), daemon=True).start()

    @staticmethod
    def _pump(stream, sink) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            sink(line)
        sink(None)

    def stderr(self) -> str:
        return "".join(s for s in self._stderr if s)[-4000:]

    def line(self, timeout: float = 180.0) -> dict[str, Any]:
        """The next JSON line on its stdout (other output is skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"child {self.pid} said nothing for {timeout:.0f} s\n{self.stderr()}") from None
            if line is None:
                self.process.wait(10)
                raise AssertionError(f"child {self.pid} exited ({self.process.returncode})\n{self.stderr()}")
            if line.startswith("{"):
                return json.loads(line)

    def ask(self, command: str, timeout: float = 60.0) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.line(timeout)

    def finish(self, timeout: float = 60.0) -> int:
        """Close its stdin (a `hold` child then exits normally) and wait for the exit code."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        return self.process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL and reap (an unreaped child would still count as a live pid)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)


@contextmanager
def children() -> Iterator[list[Child]]:
    """Collects children started in the block and SIGKILLs whichever still run at the end."""
    started: list[Child] = []
    try:
        yield started
    finally:
        for child in started:
            child.kill()
            for stream in (child.process.stdin, child.process.stdout, child.process.stderr):
                if stream is not None:
                    stream.close()


def wait_stopped(data_dir: Path, timeout: float = 20.0) -> int | None:
    """Wait for the embedded server in `data_dir` to stop; its pid if it is still running."""
    from db.embedded import postgres_pid

    deadline = time.monotonic() + timeout
    while (pid := postgres_pid(data_dir)) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    return pid


@contextmanager
def fresh_data_dir() -> Iterator[Path]:
    """A new data dir under /tmp (traversable: postgres runs as another user under root);
    any server still running in it at the end is stopped, then the dir is removed."""
    import psutil

    from db.embedded import postgres_pid

    parent = Path(tempfile.mkdtemp(prefix="workbench-reliability-", dir="/tmp"))
    parent.chmod(0o755)
    data_dir = parent / "data"
    try:
        yield data_dir
    finally:
        import pgserver

        server = pgserver.PostgresServer._instances.get((data_dir / "pgdata").resolve())
        if server is not None:  # this process joined it: release our handle (stops it if we are last)
            server.cleanup()
        pid = postgres_pid(data_dir)
        if pid is not None:  # still up (a test failed early): fast shutdown, then make sure
            os.kill(pid, signal.SIGINT)
            try:
                psutil.Process(pid).wait(15)
            except psutil.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    main()
