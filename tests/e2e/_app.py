"""What both browser tests need: the system Chromium's flags and the app served on a free port."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Headless in a sandbox with a closed network: background networking only fails and waits.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
BROWSER_MARKS = [
    pytest.mark.e2e,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not on PATH (make test installs Debian's chromium; "
                                                "it could not be installed here)"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def running_app(env: dict[str, str], log_path: Path) -> Iterator[str]:
    """`streamlit run app.py` with `env`, its output in `log_path`; yields its URL once healthy."""
    port = free_port()
    with open(log_path, "w") as log:
        process = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port",
                                    str(port), "--server.headless", "true"],
                                   cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                        if response.status == 200:
                            break
                except OSError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not start: {log_path.read_text()[-2000:]}")
                time.sleep(0.5)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
