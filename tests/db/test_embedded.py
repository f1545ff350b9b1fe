"""The embedded PostgreSQL server and the engine's failure messages.

Servers are started in child processes so each test owns its server's whole life: pgserver
stops a server when the last process registered in `.handle_pids.json` exits, and these
tests check exactly that.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from db import StoreUnavailableError, build_engine
from db.embedded import SERVER_SETTINGS, handle_pids, postgres_pid
from services.errors import DatabaseUnavailableError
from services.settings import Settings
from services.store import get_engine

ROOT = Path(__file__).resolve().parents[2]

_START = """
import json, os, sys
from pathlib import Path
import psycopg
from db.embedded import embedded_uri, handle_pids, postgres_pid

data_dir = Path(sys.argv[1])
if len(sys.argv) > 2:  # wait for the go signal so that several processes start together
    while not Path(sys.argv[2]).exists():
        pass
uri = embedded_uri(data_dir)
with psycopg.connect(uri) as conn:
    one = conn.execute("SELECT 1").fetchone()[0]
    vector = conn.execute("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'").fetchone()[0]
    shared_buffers = conn.execute("SHOW shared_buffers").fetchone()[0]
print(json.dumps({"uri": uri, "pid": os.getpid(), "handles": handle_pids(data_dir),
                  "postgres": postgres_pid(data_dir), "one": one, "vector": vector,
                  "shared_buffers": shared_buffers}))
"""

_TWO_THREADS = """
import json, os, sys, threading
from pathlib import Path
from db.embedded import embedded_uri, handle_pids

data_dir = Path(sys.argv[1])
barrier = threading.Barrier(2)
uris, errors = [], []

def start():
    barrier.wait()
    try:
        uris.append(embedded_uri(data_dir))
    except Exception as exc:
        errors.append(repr(exc))

threads = [threading.Thread(target=start) for _ in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps({"uris": uris, "errors": errors, "pid": os.getpid(), "handles": handle_pids(data_dir)}))
"""


def _python(script: str, *args: str) -> list[str]:
    return [sys.executable, "-c", script, *args]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _run(script: str, *args: str) -> dict:  # type: ignore[type-arg]
    done = subprocess.run(_python(script, *args), cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _wait_stopped(data_dir: Path, timeout: float = 15.0) -> int | None:
    deadline = time.monotonic() + timeout
    while (pid := postgres_pid(data_dir)) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    return pid


@pytest.fixture()
def fresh_dir() -> Iterator[Path]:
    """A data dir that does not exist yet, under a traversable parent outside /root."""
    parent = Path(tempfile.mkdtemp(prefix="workbench-embedded-", dir="/tmp"))
    parent.chmod(0o755)
    data_dir = parent / "data"
    yield data_dir
    pid = postgres_pid(data_dir)
    if pid is not None:  # a test failed with the server still up: stop it (fast shutdown)
        os.kill(pid, signal.SIGINT)
        psutil.Process(pid).wait(15)
    shutil.rmtree(parent, ignore_errors=True)


def test_embedded_uri_starts_a_server_in_a_fresh_dir_and_stops_it_with_the_last_user(fresh_dir):  # type: ignore[no-untyped-def]
    assert not fresh_dir.exists()
    seen = _run(_START, str(fresh_dir))
    assert (seen["one"], seen["vector"]) == (1, 1)
    assert seen["shared_buffers"] == SERVER_SETTINGS["shared_buffers"]  # not initdb's 128MB
    assert seen["handles"] == [seen["pid"]]
    assert isinstance(seen["postgres"], int)
    assert (fresh_dir / "pgdata" / "PG_VERSION").exists()
    assert _wait_stopped(fresh_dir) is None  # its only user exited
    assert handle_pids(fresh_dir) == []

    # A data dir from before the settings file existed gets it at its next start.
    conf = fresh_dir / "pgdata" / "postgresql.conf"
    conf.write_text("\n".join(line for line in conf.read_text().splitlines() if "workbench.conf" not in line))
    (fresh_dir / "pgdata" / "workbench.conf").unlink()

    again = _run(_START, str(fresh_dir))  # the data dir is reused, not re-initialised
    assert again["uri"] == seen["uri"] and again["one"] == 1
    assert again["shared_buffers"] == SERVER_SETTINGS["shared_buffers"]
    assert _wait_stopped(fresh_dir) is None


def test_stale_pid_in_handle_file_is_dropped_on_next_start(fresh_dir):  # type: ignore[no-untyped-def]
    _run(_START, str(fresh_dir))
    assert _wait_stopped(fresh_dir) is None
    stale = 999_999
    assert not psutil.pid_exists(stale)
    (fresh_dir / "pgdata" / ".handle_pids.json").write_text(json.dumps([stale]))

    seen = _run(_START, str(fresh_dir))

    assert seen["handles"] == [seen["pid"]]
    # with the stale pid still listed, pgserver would never stop the server
    assert _wait_stopped(fresh_dir) is None
    assert handle_pids(fresh_dir) == []


def test_two_threads_starting_one_fresh_dir_share_one_server(fresh_dir):  # type: ignore[no-untyped-def]
    seen = _run(_TWO_THREADS, str(fresh_dir))
    assert seen["errors"] == []
    assert len(seen["uris"]) == 2 and seen["uris"][0] == seen["uris"][1]
    assert seen["handles"] == [seen["pid"]]
    assert _wait_stopped(fresh_dir) is None


def test_two_processes_starting_one_fresh_dir_share_one_server(fresh_dir, tmp_path):  # type: ignore[no-untyped-def]
    go = tmp_path / "go"
    children = [subprocess.Popen(_python(_START, str(fresh_dir), str(go)), cwd=ROOT, env=_env(),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    time.sleep(3)  # both children have imported pgserver and are spinning on the go file
    go.touch()
    outputs = [child.communicate(timeout=120) for child in children]
    for child, (_, err) in zip(children, outputs):
        assert child.returncode == 0, err[-3000:]
    seen = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert seen[0]["uri"] == seen[1]["uri"]
    assert all(s["one"] == 1 for s in seen)
    assert _wait_stopped(fresh_dir) is None  # stopped once both users are gone
    assert handle_pids(fresh_dir) == []


# --- an unreachable DATABASE_URL -------------------------------------------------------

UNREACHABLE = "postgresql://nobody:s3cret@127.0.0.1:1/none"


def test_build_engine_names_the_unreachable_host_and_port():  # type: ignore[no-untyped-def]
    settings = Settings(database_url=UNREACHABLE)
    with pytest.raises(StoreUnavailableError) as caught:
        build_engine(settings)
    message = str(caught.value)
    assert "external database at 127.0.0.1:1/none" in message
    assert "s3cret" not in message


def test_get_engine_maps_an_unreachable_store_to_database_unavailable():  # type: ignore[no-untyped-def]
    settings = Settings(database_url=UNREACHABLE)
    for _ in range(2):  # a failure is not cached: the next call tries again
        with pytest.raises(DatabaseUnavailableError) as caught:
            get_engine(settings)
        assert isinstance(caught.value.__cause__, StoreUnavailableError)
        assert "127.0.0.1:1" in str(caught.value) and "s3cret" not in str(caught.value)


def test_database_url_with_another_scheme_is_rejected():  # type: ignore[no-untyped-def]
    with pytest.raises(StoreUnavailableError, match="must start with postgresql://"):
        build_engine(Settings(database_url="mysql://root@127.0.0.1/shop"))
