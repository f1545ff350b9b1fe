"""The intake queue: accepted records wait in run_intake until the assessment claims them.

Every record belongs to an app: the app of the API key that pushed it (imports go to
DEFAULT_APP). A record with a trace id is stored once per app: the same app sending it again
gets the row already there (idempotent pushes and re-imports); another app sending the same
trace id gets a row of its own. Reads take the app they may see (None: every app).

The assessment claims records taking turns over the apps with records waiting (round robin),
so one app's flood delays another app's records by at most one record per app with a
backlog, not by the whole flood. Functions take `*, session` and do not commit.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import text
from sqlalchemy.orm import Session

from services.errors import ConflictError, InputError, NotFoundError
from services.intake.api_keys import DEFAULT_APP, check_app_name
from services.intake.schema import ExternalRun, describe_validation_error
from services.review.queue import ACTIONS

SOURCES = ("import", "api", "otlp")
STATUSES = ("queued", "assessed", "failed")
VERDICTS = frozenset(ACTIONS.values())  # a run's review status once a reviewer acted on it
_MAX_ID = 2**63 - 1  # run_intake.id is a bigint


@dataclass(frozen=True)
class Accepted:
    """Where one pushed record went: a new row, or (created=False) the row its trace id already had."""

    intake_id: int
    trace_id: str | None
    created: bool
    status: str


@dataclass(frozen=True)
class IntakeStatus:
    """An intake row and, once the assessment produced a run, that run's outcome so far."""

    intake_id: int
    trace_id: str | None
    source: str
    status: str
    received_at: datetime
    error: str | None
    app: str
    run_id: int | None
    assessed_at: datetime | None
    confidence: float | None
    level: str | None
    review_status: str | None  # the run's status: auto_accepted, pending, approved, flagged, corrected
    verdict: str | None  # approved, flagged or corrected once a reviewer acted; else None


@dataclass(frozen=True)
class QueuedRecord:
    """A claimed record: locked by the claiming transaction until it commits or rolls back."""

    intake_id: int
    trace_id: str | None
    source: str
    received_at: datetime
    run: ExternalRun
    judges: bool  # False: assess without CRAG, reflection and grading (as pushed or imported)
    app: str = DEFAULT_APP


# Ids are drawn before the insert so every input row, inserted or not, has one to match
# the RETURNING rows against. The outer query's snapshot predates the insert: a trace id
# that appears twice in one batch finds its twin in `inserted`, one the app stored earlier
# in run_intake. A row committed by a concurrent push after this statement began is in
# neither; accept_records looks those up with a second statement.
_ACCEPT = text("""
WITH input AS MATERIALIZED (
    SELECT nextval(pg_get_serial_sequence('run_intake', 'id')) AS id, t.trace_id, t.payload, t.ord
    FROM unnest(CAST(:trace_ids AS text[]), CAST(:payloads AS jsonb[])) WITH ORDINALITY AS t(trace_id, payload, ord)
), inserted AS (
    INSERT INTO run_intake (id, app, trace_id, payload, source, api_key_id, status, judges)
    SELECT id, :app, trace_id, payload, :source, CAST(:api_key_id AS integer), 'queued', :judges FROM input ORDER BY ord
    ON CONFLICT (app, trace_id) DO NOTHING
    RETURNING id, trace_id, status
)
SELECT COALESCE(ins.id, twin.id, earlier.id) AS id, input.trace_id, ins.id IS NOT NULL AS created,
       COALESCE(ins.status, twin.status, earlier.status) AS status
FROM input
LEFT JOIN inserted ins ON ins.id = input.id
LEFT JOIN inserted twin ON ins.id IS NULL AND twin.trace_id = input.trace_id
LEFT JOIN run_intake earlier ON ins.id IS NULL AND twin.id IS NULL AND earlier.app = :app
                             AND earlier.trace_id = input.trace_id
ORDER BY input.ord
""")
_BY_TRACE_IDS = text("SELECT id, trace_id, status FROM run_intake WHERE app = :app AND trace_id = ANY(:trace_ids)")


def accept_records(records: Sequence[ExternalRun], *, source: str, app: str = DEFAULT_APP, api_key_id: int | None = None,
                   judges: bool = True, session: Session) -> list[Accepted]:
    """Store validated records as queued under `app`, in one statement; one Accepted per record,
    in order. `judges=False` queues them to be assessed without CRAG, reflection and grading
    (a record already stored keeps the choice it was stored with)."""
    if source not in SOURCES:
        raise InputError(f"unknown intake source {source!r}; use one of: {', '.join(SOURCES)}")
    check_app_name(app)
    if not records:
        return []
    rows = session.execute(_ACCEPT, {
        "trace_ids": [record.trace_id for record in records],
        "payloads": [json.dumps(record.to_payload()) for record in records],
        "source": source, "app": app, "api_key_id": api_key_id, "judges": judges,
    }).all()
    accepted = [Accepted(row.id, row.trace_id, row.created, row.status) for row in rows]
    racing = [a.trace_id for a in accepted if a.intake_id is None]
    if racing:
        found = {row.trace_id: row for row in session.execute(_BY_TRACE_IDS, {"app": app, "trace_ids": racing})}
        accepted = [a if a.intake_id is not None else
                    Accepted(found[a.trace_id].id, a.trace_id, False, found[a.trace_id].status) for a in accepted]
    return accepted


_STATUS = """
SELECT i.id, i.app, i.trace_id, i.source, i.status, i.received_at, i.error, i.run_id, i.assessed_at,
       r.final_confidence, r.final_level, r.status AS review_status
FROM run_intake i LEFT JOIN runs r ON r.id = i.run_id
"""
# An id of another app is answered exactly as an id nobody has: not found.
_STATUS_BY_IDS = text(_STATUS + "WHERE i.id = ANY(:ids) AND (CAST(:app AS text) IS NULL OR i.app = :app) ORDER BY i.id")
_STATUS_BY_TRACE_ID = text(_STATUS + "WHERE i.trace_id = :trace_id AND (CAST(:app AS text) IS NULL OR i.app = :app) "
                                     "ORDER BY i.app LIMIT 6")


def intake_statuses(ids: Sequence[int], *, app: str | None, session: Session) -> list[IntakeStatus]:
    """The rows of `app` (None: of every app) with these intake ids, by id; ids unknown or of
    another app are left out."""
    wanted = [i for i in ids if 0 < i <= _MAX_ID]
    if not wanted:
        return []
    return [_status(row) for row in session.execute(_STATUS_BY_IDS, {"ids": wanted, "app": app})]


def intake_status(intake_id: int, *, app: str | None, session: Session) -> IntakeStatus:
    """One row of `app` (None: of any app) by its intake id; NotFoundError when there is none."""
    found = intake_statuses([intake_id], app=app, session=session)
    if not found:
        raise NotFoundError(f"no intake record {intake_id}")
    return found[0]


def intake_status_by_trace_id(trace_id: str, *, app: str | None, session: Session) -> IntakeStatus:
    """One row of `app` by the source system's trace id; NotFoundError when there is none. With
    app None (an admin's read) the trace id must name one app's record: ConflictError when
    several apps sent it."""
    rows = session.execute(_STATUS_BY_TRACE_ID, {"trace_id": trace_id, "app": app}).all()
    if not rows:
        raise NotFoundError(f"no intake record with trace id {trace_id!r}")
    if len(rows) > 1:
        apps = ", ".join(row.app for row in rows[:5]) + (" and more" if len(rows) > 5 else "")
        raise ConflictError(f"trace id {trace_id!r} was sent by more than one app ({apps}); name one with ?app=")
    return _status(rows[0])


def _status(row: Any) -> IntakeStatus:
    return IntakeStatus(
        intake_id=row.id, trace_id=row.trace_id, source=row.source, status=row.status, received_at=row.received_at,
        error=row.error, app=row.app, run_id=row.run_id, assessed_at=row.assessed_at, confidence=row.final_confidence,
        level=row.final_level, review_status=row.review_status,
        verdict=row.review_status if row.review_status in VERDICTS else None,
    )


# The apps with records waiting, in name order: a walk down the queued index (one probe per
# app) rather than a scan of every queued row.
_QUEUED_APPS = text("""
WITH RECURSIVE apps(app) AS (
    (SELECT app FROM run_intake WHERE status = 'queued' ORDER BY app LIMIT 1)
    UNION ALL
    SELECT (SELECT i.app FROM run_intake i WHERE i.status = 'queued' AND i.app > apps.app ORDER BY i.app LIMIT 1)
    FROM apps WHERE apps.app IS NOT NULL
)
SELECT app FROM apps WHERE app IS NOT NULL
""")
# SKIP LOCKED: rows another worker has claimed are passed over, not waited for, so any
# number of assessors can drain the queue without taking the same record twice. Rows this
# transaction locked itself are not skipped: a second round starts after the first's, and a
# second claim in one transaction names what it holds (:skip).
_CLAIM_OF_APP = text("""
SELECT id, app, trace_id, source, received_at, payload, judges FROM run_intake
WHERE status = 'queued' AND app = :app AND id > :after AND id <> ALL(CAST(:skip AS bigint[])) ORDER BY id LIMIT :limit
FOR UPDATE SKIP LOCKED
""")


class AppTurns:
    """Whose turn it is: the app the last claim of this process ended on. The next claim
    starts with the app after it in name order and goes round."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: str | None = None

    def order(self, apps: Sequence[str]) -> list[str]:
        with self._lock:
            last = self._last
        if last is None:
            return list(apps)
        return [a for a in apps if a > last] + [a for a in apps if a <= last]

    def served(self, app: str) -> None:
        with self._lock:
            self._last = app


_TURNS = AppTurns()


def next_queued(limit: int, *, session: Session, skip: Sequence[int] = ()) -> list[QueuedRecord]:
    """Claim up to `limit` queued records for this session's transaction, taking turns over
    the apps that have records waiting (each app's oldest first): one app's flood does not
    hold back another app's records.

    They stay claimed (row-locked) until the transaction ends: mark each assessed or failed
    in it, and a rollback hands them back to the queue. A payload that no longer validates
    is marked failed here, with the reason, and not returned. `skip`: ids this transaction
    has claimed already (its own locks do not make SKIP LOCKED pass over them).
    """
    if limit < 1:
        raise InputError("claim at least one record")
    order = _TURNS.order([row.app for row in session.execute(_QUEUED_APPS)])
    by_app = _claim_in_turns(order, limit, skip=list(skip), session=session)
    rows = [by_app[app][k] for k in range(max(map(len, by_app.values()), default=0)) for app in order
            if k < len(by_app.get(app, ()))]  # round robin: each app's first, then each app's second, ...
    if rows:
        _TURNS.served(rows[-1].app)
    claimed = []
    for row in rows:
        try:
            run = ExternalRun.model_validate(row.payload)
        except ValidationError as exc:
            mark_failed(row.id, f"the stored record no longer validates: {describe_validation_error(exc)}", session=session)
            continue
        claimed.append(QueuedRecord(row.id, row.trace_id, row.source, row.received_at, run, row.judges, row.app))
    return claimed


def _claim_in_turns(order: list[str], limit: int, *, skip: list[int], session: Session) -> dict[str, list[Any]]:
    """`limit` rows shared out over the apps in turn order (the first in turn get the remainder);
    what an app cannot fill (fewer queued, or claimed by another worker) goes round again."""
    by_app: dict[str, list[Any]] = {}
    wanting, remaining = list(order), limit
    while remaining and wanting:  # each pass claims a row or drops an app, so it ends
        share, extra = divmod(remaining, len(wanting))
        still: list[str] = []
        for index, app in enumerate(wanting):
            asked = share + (index < extra)
            after = by_app[app][-1].id if by_app.get(app) else 0
            got = session.execute(_CLAIM_OF_APP, {"app": app, "after": after, "limit": asked, "skip": skip}).all() if asked else []
            by_app.setdefault(app, []).extend(got)
            remaining -= len(got)
            if len(got) == asked:  # it may have more
                still.append(app)
        wanting = still
    return by_app


# A run gets its record's app when the record is marked assessed (save_run knows no apps):
# until then, in the same transaction, the run has none.
_MARK = text("""
WITH marked AS (
    UPDATE run_intake SET status = :status, run_id = :run_id, error = :error, assessed_at = now()
    WHERE id = :id RETURNING id, app, run_id
), owned AS (
    UPDATE runs r SET app = marked.app FROM marked WHERE r.id = marked.run_id RETURNING r.id
)
SELECT id FROM marked
""")


def mark_assessed(intake_id: int, *, run_id: int, session: Session) -> None:
    """Record that the assessment stored run `run_id` for this record (the run takes its app)."""
    _mark(intake_id, {"status": "assessed", "run_id": run_id, "error": None}, session)


def mark_failed(intake_id: int, error: str, *, session: Session) -> None:
    """Record that the assessment could not be made, and why (shown by GET /runs/{id})."""
    _mark(intake_id, {"status": "failed", "run_id": None, "error": error}, session)


def _mark(intake_id: int, values: dict[str, Any], session: Session) -> None:
    if session.execute(_MARK, {"id": intake_id, **values}).one_or_none() is None:
        raise NotFoundError(f"no intake record {intake_id}")


def count_queued(*, session: Session) -> int:
    """How many records wait for their assessment."""
    return int(session.execute(text("SELECT count(*) FROM run_intake WHERE status = 'queued'")).scalar_one())


_QUEUED_FOR_KEY = text("""
SELECT count(*) FROM (SELECT 1 FROM run_intake WHERE api_key_id = :key_id AND status = 'queued' LIMIT :cap) q
""")


def count_queued_for_key(api_key_id: int, *, cap: int, session: Session) -> int:
    """How many records pushed with this key wait for their assessment, counted up to `cap`
    (a quota needs to know whether it is reached, not by how much)."""
    return int(session.execute(_QUEUED_FOR_KEY, {"key_id": api_key_id, "cap": cap}).scalar_one())
