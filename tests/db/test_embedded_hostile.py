"""The embedded server against what a crash, a root run or a careless user leaves in the data dir:
a postmaster.pid naming someone else's process, a broken handle file, an interrupted initdb,
a data dir owned by another user, a path with spaces and quotes."""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from db.embedded import handle_pids
from tests.db import test_embedded
from tests.db.test_embedded import _START, ROOT, _env, _python, _run, _wait_stopped

fresh_dir = test_embedded.fresh_dir  # the fixture: a data dir that does not exist yet, its server stopped after

pytestmark = pytest.mark.slow

_HOLD = """
import sys, time
from pathlib import Path
from db.embedded import embedded_uri, postgres_pid
embedded_uri(Path(sys.argv[1]))
print(postgres_pid(Path(sys.argv[1])), flush=True)
time.sleep(600)
"""


def _fake_postmaster_pid(pgdata: Path, pid: int) -> None:
    """A postmaster.pid as postgres writes it (pgserver parses all eight lines), naming `pid`."""
    pgdata.mkdir(parents=True, exist_ok=True)
    lines = [str(pid), str(pgdata), str(int(time.time())), "5432", str(pgdata), "", "  2154969        19", "ready   "]
    (pgdata / "postmaster.pid").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("stranger", ["sleep", "another data dir's server"])
def test_a_stale_postmaster_pid_naming_a_live_process_is_not_adopted_and_the_process_survives(fresh_dir, tmp_path, stranger):  # type: ignore[no-untyped-def]
    _run(_START, str(fresh_dir))  # an initialised data dir whose server has stopped
    assert _wait_stopped(fresh_dir) is None
    if stranger == "sleep":
        holder = subprocess.Popen(["sleep", "300"])
        victim = psutil.Process(holder.pid)
    else:
        other = tmp_path / "other"
        holder = subprocess.Popen(_python(_HOLD, str(other)), cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True)
        victim = psutil.Process(int(holder.stdout.readline()))  # type: ignore[union-attr]
    try:
        # After a crash the file stays behind; the pid in it now belongs to someone else.
        _fake_postmaster_pid(fresh_dir / "pgdata", victim.pid)
        seen = _run(_START, str(fresh_dir))
        assert seen["one"] == 1 and seen["postgres"] != victim.pid
        assert _wait_stopped(fresh_dir) is None
        assert victim.is_running() and victim.status() != psutil.STATUS_ZOMBIE, "an unrelated process was killed"
    finally:
        holder.terminate()
        holder.wait(30)


@pytest.mark.parametrize("content", ["", "[12, 3", '{"pids": [1]}', "null"])
def test_an_empty_or_corrupt_handle_file_is_repaired_and_the_server_still_stops(fresh_dir, content):  # type: ignore[no-untyped-def]
    _run(_START, str(fresh_dir))
    assert _wait_stopped(fresh_dir) is None
    (fresh_dir / "pgdata" / ".handle_pids.json").write_text(content)

    seen = _run(_START, str(fresh_dir))

    assert seen["one"] == 1 and seen["handles"] == [seen["pid"]]
    assert _wait_stopped(fresh_dir) is None, "the server was left running with no one to stop it"
    assert handle_pids(fresh_dir) == []


def test_a_first_start_killed_during_initdb_starts_cleanly_the_next_time(fresh_dir):  # type: ignore[no-untyped-def]
    child = subprocess.Popen(_python(_START, str(fresh_dir)), cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    family: list[psutil.Process] = []
    while time.monotonic() < deadline:  # initdb's bootstrap: PG_VERSION is written, the databases are not
        family = [psutil.Process(child.pid), *psutil.Process(child.pid).children(recursive=True)]
        if any(_is_bootstrapping(p) for p in family):
            break
        time.sleep(0.005)
    else:
        pytest.fail("initdb's bootstrap was never seen")
    for process in family:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    child.wait(10)
    psutil.wait_procs(family, timeout=10)

    seen = _run(_START, str(fresh_dir))

    assert seen["one"] == 1 and seen["vector"] == 1
    assert _wait_stopped(fresh_dir) is None


def _is_bootstrapping(process: psutil.Process) -> bool:
    try:
        cmdline = process.cmdline()
    except psutil.Error:
        return False
    return bool(cmdline) and Path(cmdline[0]).name == "postgres" and ("--boot" in cmdline or "--single" in cmdline)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can run on a data dir another user owns")
def test_a_root_run_refuses_a_data_dir_another_user_owns_and_leaves_it_theirs(fresh_dir):  # type: ignore[no-untyped-def]
    pgdata = fresh_dir / "pgdata"
    pgdata.mkdir(parents=True)
    nobody = pwd.getpwnam("nobody")
    os.chown(pgdata, nobody.pw_uid, nobody.pw_gid)

    done = subprocess.run(_python(_START, str(fresh_dir)), cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)

    assert done.returncode != 0
    assert f"{pgdata} belongs to the user nobody" in done.stderr and "run the workbench as nobody" in done.stderr
    assert pgdata.stat().st_uid == nobody.pw_uid, "the owner was locked out of their data dir"
    assert list(pgdata.iterdir()) == []


@pytest.mark.parametrize("name", ["with space", "it's", 'say "hi"'])
def test_a_data_dir_path_with_spaces_or_quotes_starts(fresh_dir, name):  # type: ignore[no-untyped-def]
    data_dir = fresh_dir.parent / name / "data"

    seen = _run(_START, str(data_dir))

    assert seen["one"] == 1 and (data_dir / "pgdata" / "PG_VERSION").exists()
    assert isinstance(seen["postgres"], int)  # postgres_pid knows the server by its real data dir too
    assert _wait_stopped(data_dir) is None
