"""The embedded server against what a crash, a root run or a careless user leaves in the data dir:
a postmaster.pid naming someone else's process, a broken handle file, an interrupted initdb,
a data dir owned by another user, a path with spaces and quotes."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import psutil
import pytest

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
