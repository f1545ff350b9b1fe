"""The intake as the Import runs page, the sidebar and GET /health show it: records per
status, the latest failures, and the backlog (how many wait, and how long the oldest has).

Read-only views of run_intake, so a person importing a file sees what waits for its
assessment and why a record could not be assessed, and anyone can see when the assessment
falls behind the pushes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.orm import Session

from services.errors import InputError
from services.settings import Settings
from services.store import transaction


@dataclass(frozen=True)
class IntakeCounts:
    queued: int  # accepted, waiting for the assessment
    assessed: int  # turned into runs (in the review queue unless auto-accepted)
    failed: int  # could not be assessed; the reason is on the row


@dataclass(frozen=True)
class IntakeFailure:
    intake_id: int
    trace_id: str | None
    source: str
    error: str
    assessed_at: datetime | None


_COUNTS = text("SELECT status, count(*) FROM run_intake GROUP BY status")


def intake_counts(*, session: Session) -> IntakeCounts:
    counts: dict[str, int] = dict(session.execute(_COUNTS).tuples().all())
    return IntakeCounts(**{status: int(counts.get(status, 0)) for status in ("queued", "assessed", "failed")})


_FAILURES = text("""
SELECT id AS intake_id, trace_id, source, COALESCE(error, '') AS error, assessed_at
FROM run_intake WHERE status = 'failed'
ORDER BY assessed_at DESC NULLS LAST, id DESC
LIMIT :limit
""")


def recent_failures(*, limit: int = 20, session: Session) -> list[IntakeFailure]:
    """The newest records the assessment marked failed, with its reason."""
    if limit < 1:
        raise InputError("limit must be at least 1")
    return [IntakeFailure(**row) for row in session.execute(_FAILURES, {"limit": limit}).mappings()]


# --- the backlog -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Backlog:
    """How far the assessment is behind: records waiting, and since when the oldest has."""

    queued: int
    oldest_received_at: datetime | None  # when the record waiting longest was accepted; None when none waits
    oldest_age_s: float | None  # how long it has waited, as of `read_at`
    read_at: float  # time.monotonic() when the store was read

    def aged(self, now: float) -> Backlog:
        """The same figures with the oldest record's wait carried forward to `now` (monotonic)."""
        if self.oldest_age_s is None:
            return self
        return Backlog(self.queued, self.oldest_received_at, self.oldest_age_s + max(now - self.read_at, 0.0), now)


# One pass over the partial index run_intake_queued (every queued row, nothing else) gives
# both the count and the oldest id; ids are drawn in the order records are accepted.
_BACKLOG = text("""
WITH q AS (SELECT count(*) AS queued, min(id) AS oldest_id FROM run_intake WHERE status = 'queued')
SELECT q.queued, i.received_at, EXTRACT(EPOCH FROM clock_timestamp() - i.received_at)::float8 AS age_s
FROM q LEFT JOIN run_intake i ON i.id = q.oldest_id
""")


def queue_backlog(*, session: Session, clock: Callable[[], float] = time.monotonic) -> Backlog:
    """The backlog as the store has it now."""
    row = session.execute(_BACKLOG).one()
    return Backlog(int(row.queued), row.received_at, None if row.age_s is None else max(float(row.age_s), 0.0), clock())


# Counting is a pass over every queued row: ~1 ms a thousand. Below this many the backlog is
# read afresh on every call; above it at most once a BACKLOG_MAX_AGE_S, so an unauthenticated
# GET /health polled in a loop costs the store one count a second, however deep the queue.
BACKLOG_EXACT_BELOW = 10_000
BACKLOG_MAX_AGE_S = 1.0


class BacklogReader:
    """The backlog read through `read`, kept for `max_age_s` once it is `exact_below` records or
    more; while one caller reads the store the others get the last figures (their oldest wait
    carried forward) rather than queueing behind it. Thread-safe."""

    def __init__(self, read: Callable[[], Backlog], *, exact_below: int = BACKLOG_EXACT_BELOW,
                 max_age_s: float = BACKLOG_MAX_AGE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._read, self._exact_below, self._max_age_s, self._clock = read, exact_below, max_age_s, clock
        self._lock = threading.Lock()
        self._last: Backlog | None = None

    def __call__(self) -> Backlog:
        last, now = self._last, self._clock()
        if last is not None and last.queued >= self._exact_below and now - last.read_at < self._max_age_s:
            return last.aged(now)
        if not self._lock.acquire(blocking=last is None or last.queued < self._exact_below):
            return last.aged(now)  # type: ignore[union-attr]  # another caller is reading a deep queue
        try:
            self._last = self._read()
            return self._last
        finally:
            self._lock.release()


_READERS: dict[str, BacklogReader] = {}
_READERS_LOCK = threading.Lock()


def cached_backlog(settings: Settings) -> Backlog:
    """The backlog of the store `settings` name, through one BacklogReader per store and process."""
    url = settings.database_url.get_secret_value() if settings.database_url else ""
    key = f"{url}|{settings.workbench_data_dir}"  # one store: the same URL, or the same embedded data dir
    with _READERS_LOCK:
        reader = _READERS.get(key)
        if reader is None:
            reader = _READERS[key] = BacklogReader(lambda: _read_backlog(settings))
    return reader()


def _read_backlog(settings: Settings) -> Backlog:
    with transaction(settings) as session:
        return queue_backlog(session=session)
