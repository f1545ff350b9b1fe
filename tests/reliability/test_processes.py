"""Several app processes on one embedded data dir: one server, started once, stopped when
the last live user exits, whatever happened to the others (a SIGKILL leaves its pid behind).

Each test uses a fresh data dir whose server only child processes own, so the whole life
of that server is observable from here.
"""

from __future__ import annotations

import signal

from db.embedded import handle_pids, postgres_pid
from tests.reliability._workers import Child, children, fresh_data_dir, wait_stopped


def _holder(data_dir, started: list[Child]) -> tuple[Child, dict]:  # type: ignore[no-untyped-def, type-arg]
    child = Child("hold", env={"WORKBENCH_DATA_DIR": str(data_dir)})
    started.append(child)
    return child, child.line()


def test_two_app_processes_share_one_server_until_the_last_one_exits():  # type: ignore[no-untyped-def]
    with fresh_data_dir() as data_dir, children() as started:
        a, ready_a = _holder(data_dir, started)
        assert ready_a["postgres"] is not None and ready_a["handles"] == [a.pid]
        run_id = a.ask("store")["run"]

        b, ready_b = _holder(data_dir, started)
        assert ready_b["postgres"] == ready_a["postgres"]  # joined the running server, no second one
        assert sorted(ready_b["handles"]) == sorted([a.pid, b.pid])
        assert b.ask(f"review {run_id} 0 bea") == {"version": 1}  # B works on what A stored
        assert b.finish() == 0, b.stderr()

        # B has gone; A is still registered, so the server is still up and A still works.
        assert postgres_pid(data_dir) == ready_a["postgres"]
        assert handle_pids(data_dir) == [a.pid]
        assert a.ask(f"history {run_id}") == {"history": [[1, "approve", "bea"]]}

        a.process.send_signal(signal.SIGTERM)  # how a service manager stops the app
        assert a.process.wait(60) == 128 + signal.SIGTERM, a.stderr()  # a clean exit: atexit hooks ran
        assert wait_stopped(data_dir) is None, "the last user exited but the server kept running"
        assert handle_pids(data_dir) == []


def test_server_left_by_a_killed_process_is_reused_and_stops_with_the_next_user():  # type: ignore[no-untyped-def]
    with fresh_data_dir() as data_dir, children() as started:
        killed, ready_killed = _holder(data_dir, started)
        killed.kill()
        assert postgres_pid(data_dir) == ready_killed["postgres"]  # postgres outlives its killed user...
        assert handle_pids(data_dir) == [killed.pid]  # ...and the dead pid is still listed

        after, ready_after = _holder(data_dir, started)
        assert ready_after["postgres"] == ready_killed["postgres"]  # reused, not restarted beside it
        assert ready_after["handles"] == [after.pid]  # the dead pid was dropped at start
        assert after.finish() == 0, after.stderr()
        assert wait_stopped(data_dir) is None, "a stale pid kept the server running"
        assert handle_pids(data_dir) == []


def test_a_user_killed_while_another_runs_does_not_keep_the_server_up():  # type: ignore[no-untyped-def]
    with fresh_data_dir() as data_dir, children() as started:
        survivor, ready_survivor = _holder(data_dir, started)
        killed, ready_killed = _holder(data_dir, started)
        assert ready_killed["postgres"] == ready_survivor["postgres"]
        killed.kill()
        assert sorted(handle_pids(data_dir)) == sorted([survivor.pid, killed.pid])

        assert survivor.finish() == 0, survivor.stderr()  # the last live user: its exit drops the dead pid
        assert wait_stopped(data_dir) is None, "the killed user's stale pid kept the server running"
        assert handle_pids(data_dir) == []
