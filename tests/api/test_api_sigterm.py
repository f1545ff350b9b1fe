"""`workbench api` stopped with SIGTERM (docker stop, systemd) stops the embedded server it
started and clears its pid, as Ctrl+C does (issue 28: it exited by the signal and left both)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from db.embedded import handle_pids, postgres_pid
from tests.api._server import free_port
from tests.reliability._workers import fresh_data_dir, wait_stopped

WORKBENCH = Path(sys.executable).parent / "workbench"  # the console script, as a service manager runs it


def _wait_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1].decode()[-2_000:]
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError("workbench api did not become healthy")


def test_sigterm_stops_the_embedded_server_and_clears_the_pid() -> None:
    port = free_port()
    with fresh_data_dir() as data_dir:
        env = {**os.environ, "WORKBENCH_DATA_DIR": str(data_dir)}
        env.pop("DATABASE_URL", None)
        process = subprocess.Popen([str(WORKBENCH), "api", "--port", str(port), "--no-assess"],
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            _wait_healthy(f"http://127.0.0.1:{port}", process)
            assert postgres_pid(data_dir) is not None and handle_pids(data_dir) == [process.pid]
            process.send_signal(signal.SIGTERM)
            assert process.wait(60) == 128 + signal.SIGTERM, process.communicate()[1].decode()[-2_000:]
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert wait_stopped(data_dir) is None, "workbench api exited but the embedded server kept running"
        assert handle_pids(data_dir) == []
