"""Start (or join) the embedded PostgreSQL + pgvector server that lives in the data dir."""

from __future__ import annotations

import atexit
import functools
import signal
import sys
import threading
from pathlib import Path

from db._pgdata import (
    DataDirError,
    check_owner,
    drop_dead_handles,
    forget_foreign_postmaster,
    is_our_postmaster,
    move_initdb_result,
    read_handles,
    shell_safe_path,
    staging_dir,
)

_START_LOCK = threading.Lock()  # pgserver's own lock is per process; threads in one race

# Server settings the embedded server starts with, in a conf file of our own that
# postgresql.conf includes. pgserver's initdb leaves shared_buffers at 128MB, and at 100k
# chunks the postings and HNSW index (~0.9 GB) then cycle through it: each hybrid query
# re-reads evicted pages from the OS cache. Postgres touches shared memory lazily, so a
# small corpus does not pay for the larger cache. Applied when the server (re)starts.
SERVER_SETTINGS = {"shared_buffers": "1GB"}
_SETTINGS_FILE = "workbench.conf"
_SIGTERM_INSTALLED = False
_EXIT_HOOKED: set[Path] = set()


class EmbeddedServerError(RuntimeError):
    """The embedded server could not be started."""


def embedded_uri(data_dir: Path) -> str:
    """Return a libpq URI for the embedded server in `data_dir`, starting it if needed.

    The server is shared: every process using the same data dir registers its pid in
    `.handle_pids.json`, and the last one to exit stops it (pgserver's cleanup_mode="stop").
    """
    import pgserver  # imported late: it touches the filesystem at import time

    pgdata = Path(data_dir).expanduser().resolve() / "pgdata"
    with _START_LOCK:
        try:
            check_owner(pgdata)
            pgdata.mkdir(parents=True, exist_ok=True)  # ourselves: pgserver races on a fresh dir
            with pgserver.PostgresServer._lock:
                pgdata = shell_safe_path(pgdata, pgserver.PostgresServer.runtime_path)
                forget_foreign_postmaster(pgdata)
                drop_dead_handles(pgdata)
                known = pgserver.PostgresServer._instances.get(pgdata)
                if known is not None and not known.get_postmaster_info().is_running():
                    # Stopped or killed under this process: get_server would hand back the
                    # dead instance, so start (or adopt a restarted) server; our handle stays.
                    known.ensure_postgres_running()
            server = known or _configured_server_class()(pgdata, cleanup_mode="stop")
            _drop_dead_handles_at_exit(pgdata)
        except DataDirError as exc:
            raise EmbeddedServerError(str(exc)) from exc
        except Exception as exc:  # pgserver raises bare subprocess/OS errors
            log = pgdata / "log"
            tail = log.read_text(errors="replace")[-600:] if log.exists() else ""
            raise EmbeddedServerError(
                f"could not start the embedded PostgreSQL in {pgdata}: {exc}. {tail}".strip()
            ) from exc
        _stop_cleanly_on_sigterm()
        return server.get_uri()


@functools.cache
def _configured_server_class() -> type:
    """pgserver's server, initialised in a staging dir, with our settings written before the first start."""
    import pgserver

    class ConfiguredServer(pgserver.PostgresServer):  # type: ignore[misc]
        def ensure_pgdata_inited(self) -> None:
            if not (self.pgdata / "PG_VERSION").exists():
                pgdata, staging = self.pgdata, staging_dir(self.pgdata)
                staging.mkdir()
                self.pgdata = staging
                try:
                    super().ensure_pgdata_inited()  # initdb (and, as root, its permissions) on the staging dir
                finally:
                    self.pgdata = pgdata
                move_initdb_result(staging, pgdata)
            super().ensure_pgdata_inited()  # as root: permissions; initdb is skipped now
            write_server_settings(self.pgdata)

    return ConfiguredServer


def write_server_settings(pgdata: Path) -> None:
    """Write SERVER_SETTINGS to our conf file and include it from postgresql.conf (once)."""
    (pgdata / _SETTINGS_FILE).write_text(
        "# Written by the workbench at each start (db/embedded.py); edits are overwritten.\n"
        + "".join(f"{name} = '{value}'\n" for name, value in SERVER_SETTINGS.items())
    )
    conf = pgdata / "postgresql.conf"
    include = f"include_if_exists = '{_SETTINGS_FILE}'"
    if include not in conf.read_text():
        with conf.open("a") as handle:
            handle.write(f"\n{include}\n")


def _drop_dead_handles_at_exit(pgdata: Path) -> None:
    """At exit, drop dead pids before pgserver's own hook decides whether we are the last user.

    A user SIGKILLed while we ran would otherwise keep the server up after we exit too.
    Registered after pgserver's hook, so it runs first (atexit is last in, first out).
    """
    if pgdata in _EXIT_HOOKED:
        return
    _EXIT_HOOKED.add(pgdata)

    def drop() -> None:
        import pgserver

        try:
            with pgserver.PostgresServer._lock:
                drop_dead_handles(pgdata)
        except OSError:
            pass  # the data dir is gone already: nothing left to release

    atexit.register(drop)


def _stop_cleanly_on_sigterm() -> None:
    """Turn SIGTERM into a normal exit so pgserver's atexit hook releases our handle."""
    global _SIGTERM_INSTALLED
    if _SIGTERM_INSTALLED or threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return  # someone (e.g. Streamlit) already owns SIGTERM and exits cleanly itself
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    _SIGTERM_INSTALLED = True


def handle_pids(data_dir: Path) -> list[int]:
    """The pids currently registered as users of the embedded server (for diagnostics)."""
    return read_handles(Path(data_dir).expanduser().resolve() / "pgdata") or []


def postgres_pid(data_dir: Path) -> int | None:
    """The postmaster pid if the embedded server is running."""
    pgdata = Path(data_dir).expanduser().resolve() / "pgdata"
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
    except (FileNotFoundError, ValueError):
        return None
    return pid if is_our_postmaster(pid, pgdata) else None


__all__ = ["EmbeddedServerError", "embedded_uri", "handle_pids", "postgres_pid"]
