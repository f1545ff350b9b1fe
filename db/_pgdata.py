"""What a crash, a root run or an odd path leaves in the data dir, checked or repaired before pgserver reads it."""

from __future__ import annotations

import hashlib
import json
import os
import pwd
import re
import shutil
import stat
from pathlib import Path

import psutil

SERVER_USER = "pgserver"  # the user pgserver runs postgres as when we are root
_SHELL_SAFE = re.compile(r"[A-Za-z0-9_./+,:@%=-]+")


class DataDirError(RuntimeError):
    """The data dir cannot be used as it is; the message says what to do."""


def check_owner(pgdata: Path) -> None:
    """Refuse a data dir another user owns, before anything in it changes hands.

    As root, pgserver chowns the data dir to its own user: a user's data dir would be taken
    from them (their next run fails on the handle file). As anyone else, postgres cannot
    read a data dir a root run handed to that user.
    """
    try:
        owner = pgdata.stat().st_uid
    except FileNotFoundError:
        return
    me = os.geteuid()
    allowed = {0, _uid(SERVER_USER)} if me == 0 else {me}
    if owner in allowed:
        return
    name = _user_name(owner)
    if me == 0:
        raise DataDirError(f"{pgdata} belongs to the user {name}: run the workbench as {name}, or give another "
                           f"--data-dir (as root the server would take the data dir over and lock {name} out)")
    raise DataDirError(f"{pgdata} belongs to the user {name}, not to you ({_user_name(me)}): run the workbench as "
                       f"{name}, or as root `chown -R {_user_name(me)} {pgdata}`, or give another --data-dir")


def _uid(user: str) -> int | None:
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def forget_foreign_postmaster(pgdata: Path) -> None:
    """Remove a postmaster.pid whose live pid is not this data dir's server.

    After a crash the file stays behind and its pid may be reused by any process: pgserver
    would adopt that process as our server, fail to connect, and kill it at exit. Postgres
    itself ignores a file naming a dead pid, but refuses to start while that pid lives.
    """
    pidfile = pgdata / "postmaster.pid"
    try:
        pid = int(pidfile.read_text().split("\n", 1)[0])
    except FileNotFoundError:
        return
    except ValueError:  # not a pid at all: no server wrote this
        pidfile.unlink()
        return
    if psutil.pid_exists(pid) and not is_our_postmaster(pid, pgdata):
        pidfile.unlink()


def is_our_postmaster(pid: int, pgdata: Path) -> bool:
    """Whether `pid` is a postgres server started on `pgdata` (its -D argument says so)."""
    try:
        cmdline = psutil.Process(pid).cmdline()
    except psutil.Error:
        return False
    if not cmdline or Path(cmdline[0]).name != "postgres":
        return False
    data_dirs = [value for flag, value in zip(cmdline, cmdline[1:]) if flag == "-D"]
    return any(Path(value).resolve() == pgdata.resolve() for value in data_dirs)


def read_handles(pgdata: Path) -> list[int] | None:
    """The pids in `.handle_pids.json`; None when the file is empty or not a list of pids."""
    try:
        pids = json.loads((pgdata / ".handle_pids.json").read_text())
    except FileNotFoundError:
        return []
    except json.JSONDecodeError:
        return None
    return pids if isinstance(pids, list) and all(isinstance(p, int) for p in pids) else None


def drop_dead_handles(pgdata: Path) -> None:
    """Keep only live pids in `.handle_pids.json`, rewriting a file that is empty or corrupt.

    pgserver stops the server only when its own pid is the last one listed, so one stale
    pid would keep the server running forever after everyone has gone; and it cannot read
    a corrupt file at all (every start failed, each leaving a server no one would stop).
    A corrupt file's pids are lost: their processes stay connected, and the server stops
    when the last process that registered after the repair exits.
    """
    pids = read_handles(pgdata)
    alive = [pid for pid in pids or () if psutil.pid_exists(pid)]
    if pids is None or alive != pids:
        (pgdata / ".handle_pids.json").write_text(json.dumps(alive))


def shell_safe_path(pgdata: Path, runtime_dir: Path) -> Path:
    """`pgdata`, or a symlink to it with a plain name when its path would break pg_ctl.

    pg_ctl starts postgres through a shell, and pgserver passes the socket directory (the
    data dir) unquoted: a space or a quote in the path fails the start. The symlink lives
    in pgserver's per-user runtime directory, named after the real path.
    """
    if _SHELL_SAFE.fullmatch(str(pgdata)):
        return pgdata
    alias = runtime_dir / f"pgdata-{hashlib.sha256(str(pgdata).encode()).hexdigest()[:16]}"
    if not _SHELL_SAFE.fullmatch(str(alias)):
        raise DataDirError(f"the data dir path {pgdata} holds characters the server cannot start with "
                           "(spaces, quotes); give a --data-dir with a plain path")
    if not (alias.is_symlink() and Path(os.readlink(alias)) == pgdata):
        runtime_dir.mkdir(parents=True, exist_ok=True)
        staged = alias.with_name(f"{alias.name}.{os.getpid()}")
        staged.unlink(missing_ok=True)
        staged.symlink_to(pgdata, target_is_directory=True)
        os.replace(staged, alias)
    return alias


def staging_dir(pgdata: Path) -> Path:
    """Where initdb runs before its result is moved into `pgdata` (see `move_initdb_result`)."""
    real = pgdata.resolve()
    staging = real.parent / f".{real.name}.initdb"
    shutil.rmtree(staging, ignore_errors=True)  # what an interrupted first start left
    return staging


def move_initdb_result(staging: Path, pgdata: Path) -> None:
    """Move a finished initdb into `pgdata`, PG_VERSION last.

    pgserver takes PG_VERSION as "initialised" and initdb writes it first: a first start
    killed mid-initdb left a data dir that could never start. Now PG_VERSION only arrives
    with everything else; anything an interrupted move left is replaced.
    """
    pgdata.chmod(stat.S_IMODE(staging.stat().st_mode))  # initdb's 0700: postgres refuses a laxer data dir
    entries = sorted(staging.iterdir(), key=lambda entry: entry.name == "PG_VERSION")
    for entry in entries:
        target = pgdata / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(entry, target)
    staging.rmdir()
