"""The daily prune: a daemon thread of a long-running process (the API's, with RETENTION_DAILY)
that creates the months ahead and prunes runs past RETENTION_OLDER_THAN once a day.

Any number of processes may run one: a prune holds an advisory lock for its whole run, and
another process's prune that finds it taken skips that day's turn instead of waiting.
A failed prune is logged and tried again at the next turn; nothing of the failed month changed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy import text

from services.review.retention import PruneReport, parse_age, prune
from services.settings import Settings
from services.store import get_engine

_log = logging.getLogger("workbench.retention")
DAY_SECONDS = 24 * 60 * 60.0
FIRST_AFTER_SECONDS = 5 * 60.0  # not while the process is starting and warming up
_PRUNE_LOCK_KEY = 727_017


class DailyPrune:
    def __init__(self, settings: Settings, *, every_s: float = DAY_SECONDS, first_after_s: float = FIRST_AFTER_SECONDS,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self._settings = settings
        self._age = parse_age(settings.retention_older_than)  # a bad setting fails the start, not a night
        self._every_s = every_s
        self._first_after_s = first_after_s
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reports: list[PruneReport] = []  # for tests and logs: the prunes this process ran
        self.skipped = 0  # turns another process's prune held

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="workbench-retention", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop after the month being pruned (if any), and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def run_once(self) -> PruneReport | None:
        """One turn: prune now unless another process is pruning; errors are logged, not raised."""
        engine = get_engine(self._settings)
        try:
            with engine.connect() as conn:
                if not conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": _PRUNE_LOCK_KEY}).scalar():
                    self.skipped += 1
                    return None
                try:
                    conn.commit()
                    report = prune(older_than=self._age, keep_reviewed=self._settings.retention_keep_reviewed,
                                   now=self._clock(), settings=self._settings)
                finally:
                    conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PRUNE_LOCK_KEY})
                    conn.commit()
        except Exception:  # noqa: BLE001 - a daily job outlives one bad night; the log says what failed
            _log.exception("the daily prune failed; it runs again in %.0f s", self._every_s)
            return None
        self.reports.append(report)
        _log.info("daily prune: removed %d runs, kept %d reviewed, freed %d bytes of run tables",
                  report.runs_removed, report.runs_kept, report.bytes_freed)
        return report

    def _run(self) -> None:
        wait = self._first_after_s
        while not self._stop.wait(wait):
            self.run_once()
            wait = self._every_s
