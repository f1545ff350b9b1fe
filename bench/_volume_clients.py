"""bench/volume.py's two client processes: `workbench export` of every run (throughput, peak RSS
from wait4) and GET /runs?reviewed_since paged to the end on a real `workbench api`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from bench._common import log, percentile, rounded

WORKBENCH = str(Path(sys.executable).with_name("workbench"))


def load() -> float:
    return round(os.getloadavg()[0], 2)


# --- export ----------------------------------------------------------------------------------

_PEAK_RSS = """
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def time_export(data_dir: Path) -> dict[str, Any]:
    target = data_dir / "export.jsonl"
    started = time.perf_counter()
    # Linux counts a child's resident set before its exec in ru_maxrss, so a child forked from
    # this process (the pages' AppTest, the kept matrix: about 900 MB) would report our size, not
    # its own. A small Python started first forks the export and reports the export's peak alone.
    process = subprocess.run([sys.executable, "-c", _PEAK_RSS, WORKBENCH, "export", "-o", str(target), "--format",
                              "jsonl"], capture_output=True, check=False)
    seconds = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"workbench export failed: {process.stderr.decode()[-2000:]}")
    peak_kib = int(process.stdout.decode().split()[-1])
    size = target.stat().st_size
    with target.open("rb") as handle:
        records = sum(1 for _ in handle)
    target.unlink()
    out = {"export_s": rounded(seconds, 1), "export_load": load(), "export_records": records,
           "export_runs_per_s": round(records / seconds), "export_mb_per_s": round(size / seconds / 1e6, 1),
           "export_bytes": size, "export_peak_rss_mb": round(peak_kib / 1024, 1)}  # ru_maxrss is KiB on Linux
    log(f"  export: {records:,} records in {seconds:.1f} s, peak RSS {out['export_peak_rss_mb']} MB")
    return out


# --- GET /runs?reviewed_since ----------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _admin_key() -> str:
    import inspect

    from services.intake.api_keys import create_api_key
    from services.store import transaction

    options: dict[str, Any] = {}
    parameters = inspect.signature(create_api_key).parameters
    if "scope" in parameters:  # app-scoped keys (issue 28): an admin key reads every app's runs
        options["scope"] = "admin"
    if "app" in parameters:
        options["app"] = "bench-volume"
    with transaction() as session:
        return create_api_key(name="bench-volume", created_by="bench/volume.py", session=session, **options).key


def time_reviewed_since() -> dict[str, Any]:
    key, port = _admin_key(), _free_port()
    server = subprocess.Popen([WORKBENCH, "api", "--port", str(port), "--no-assess", "--no-access-log"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/health", timeout=2).read()
                break
            except OSError:
                time.sleep(0.5)
        return _page_through(base, key)
    finally:
        server.terminate()
        server.wait(timeout=60)


def _get(url: str, key: str) -> tuple[float, dict[str, Any]]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=120) as response:
        body = json.loads(response.read())
    return (time.perf_counter() - started) * 1000, body


def _page_through(base: str, key: str) -> dict[str, Any]:
    """Every reviewed run, 1,000 a page: by the API's cursor (`next`) when it gives one, else by
    passing the last reviewed_at back (the client drops what it has seen by run id and version)."""
    seen: set[tuple[int, int]] = set()
    url = base + "/runs?" + urllib.parse.urlencode({"reviewed_since": "1970-01-01T00:00:00Z", "limit": 1000})
    latencies, by_cursor = [], False
    while True:
        ms, body = _get(url, key)
        latencies.append(ms)
        runs = body.get("runs", [])
        new = [(r["run_id"], r["review_version"]) for r in runs if (r["run_id"], r["review_version"]) not in seen]
        seen.update(new)
        cursor = body.get("next") or body.get("next_cursor")
        if cursor:
            by_cursor = True
            url = cursor if cursor.startswith("http") else base + cursor if cursor.startswith("/") else (
                base + "/runs?" + urllib.parse.urlencode({"cursor": cursor, "limit": 1000}))
            continue
        if by_cursor or len(runs) < 1000 or not new:
            break
        url = base + "/runs?" + urllib.parse.urlencode({"reviewed_since": runs[-1]["reviewed_at"], "limit": 1000})
    tail = latencies[-max(1, len(latencies) // 10):]  # the last tenth of the pages
    out = {"reviewed_since_pages": len(latencies), "reviewed_since_runs": len(seen), "reviewed_since_by_cursor": by_cursor,
           "reviewed_since_first_page_ms": round(latencies[0], 1), "reviewed_since_last_page_ms": round(latencies[-1], 1),
           "reviewed_since_p50_ms": round(percentile(latencies, 50), 1),
           "reviewed_since_p95_ms": round(percentile(latencies, 95), 1),
           "reviewed_since_last_tenth_p95_ms": round(percentile(tail, 95), 1), "reviewed_since_load": load()}
    log(f"  reviewed_since: {len(seen):,} runs in {len(latencies)} pages, p95 {out['reviewed_since_p95_ms']} ms, "
        f"by cursor: {by_cursor}")
    return out
