"""The intake queue: accepted records wait in run_intake until the assessment claims them.

A record with a trace id is stored once: sending it again returns the row already there
(idempotent pushes and re-imports). Functions take `*, session` and do not commit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import text
from sqlalchemy.orm import Session

from services.errors import InputError, NotFoundError
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


# Ids are drawn before the insert so every input row, inserted or not, has one to match
# the RETURNING rows against. The outer query's snapshot predates the insert: a trace id
# that appears twice in one batch finds its twin in `inserted`, one stored earlier in
# run_intake. A row committed by a concurrent push after this statement began is in
# neither; accept_records looks those up with a second statement.
_ACCEPT = text("""
WITH input AS MATERIALIZED (
    SELECT nextval(pg_get_serial_sequence('run_intake', 'id')) AS id, t.trace_id, t.payload, t.ord
    FROM unnest(CAST(:trace_ids AS text[]), CAST(:payloads AS jsonb[])) WITH ORDINALITY AS t(trace_id, payload, ord)
), inserted AS (
    INSERT INTO run_intake (id, trace_id, payload, source, api_key_id, status, judges)
    SELECT id, trace_id, payload, :source, CAST(:api_key_id AS integer), 'queued', :judges FROM input ORDER BY ord
    ON CONFLICT (trace_id) DO NOTHING
    RETURNING id, trace_id, status
)
SELECT COALESCE(ins.id, twin.id, earlier.id) AS id, input.trace_id, ins.id IS NOT NULL AS created,
       COALESCE(ins.status, twin.status, earlier.status) AS status
FROM input
LEFT JOIN inserted ins ON ins.id = input.id
LEFT JOIN inserted twin ON ins.id IS NULL AND twin.trace_id = input.trace_id
LEFT JOIN run_intake earlier ON ins.id IS NULL AND twin.id IS NULL AND earlier.trace_id = input.trace_id
ORDER BY input.ord
""")
_BY_TRACE_IDS = text("SELECT id, trace_id, status FROM run_intake WHERE trace_id = ANY(:trace_ids)")


def accept_records(records: Sequence[ExternalRun], *, source: str, api_key_id: int | None = None,
                   judges: bool = True, session: Session) -> list[Accepted]:
    """Store validated records as queued, in one statement; one Accepted per record, in order.
    `judges=False` queues them to be assessed without CRAG, reflection and grading (a record
    already stored keeps the choice it was stored with)."""
    if source not in SOURCES:
        raise InputError(f"unknown intake source {source!r}; use one of: {', '.join(SOURCES)}")
    if not records:
        return []
    rows = session.execute(_ACCEPT, {
        "trace_ids": [record.trace_id for record in records],
        "payloads": [json.dumps(record.to_payload()) for record in records],
        "source": source, "api_key_id": api_key_id, "judges": judges,
    }).all()
    accepted = [Accepted(row.id, row.trace_id, row.created, row.status) for row in rows]
    racing = [a.trace_id for a in accepted if a.intake_id is None]
    if racing:
        found = {row.trace_id: row for row in session.execute(_BY_TRACE_IDS, {"trace_ids": racing})}
        accepted = [a if a.intake_id is not None else
                    Accepted(found[a.trace_id].id, a.trace_id, False, found[a.trace_id].status) for a in accepted]
    return accepted


_STATUS = """
SELECT i.id, i.trace_id, i.source, i.status, i.received_at, i.error, i.run_id, i.assessed_at,
       r.final_confidence, r.final_level, r.status AS review_status
FROM run_intake i LEFT JOIN runs r ON r.id = i.run_id
"""
_STATUS_BY_IDS = text(_STATUS + "WHERE i.id = ANY(:ids) ORDER BY i.id")
_STATUS_BY_TRACE_ID = text(_STATUS + "WHERE i.trace_id = :trace_id")


def intake_statuses(ids: Sequence[int], *, session: Session) -> list[IntakeStatus]:
    """The rows with these intake ids (unknown ids are left out), by id."""
    wanted = [i for i in ids if 0 < i <= _MAX_ID]
    return [_status(row) for row in session.execute(_STATUS_BY_IDS, {"ids": wanted})] if wanted else []


def intake_status(intake_id: int, *, session: Session) -> IntakeStatus:
    """One row by its intake id; NotFoundError when there is none."""
    found = intake_statuses([intake_id], session=session)
    if not found:
        raise NotFoundError(f"no intake record {intake_id}")
    return found[0]


def intake_status_by_trace_id(trace_id: str, *, session: Session) -> IntakeStatus:
    """One row by the source system's trace id; NotFoundError when there is none."""
    row = session.execute(_STATUS_BY_TRACE_ID, {"trace_id": trace_id}).one_or_none()
    if row is None:
        raise NotFoundError(f"no intake record with trace id {trace_id!r}")
    return _status(row)


def _status(row: Any) -> IntakeStatus:
    return IntakeStatus(
        intake_id=row.id, trace_id=row.trace_id, source=row.source, status=row.status, received_at=row.received_at,
        error=row.error, run_id=row.run_id, assessed_at=row.assessed_at, confidence=row.final_confidence,
        level=row.final_level, review_status=row.review_status,
        verdict=row.review_status if row.review_status in VERDICTS else None,
    )


# SKIP LOCKED: rows another worker has claimed are passed over, not waited for, so any
# number of assessors can drain the queue without taking the same record twice.
_CLAIM = text("""
SELECT id, trace_id, source, received_at, payload, judges FROM run_intake
WHERE status = 'queued' ORDER BY id LIMIT :limit
FOR UPDATE SKIP LOCKED
""")


def next_queued(limit: int, *, session: Session) -> list[QueuedRecord]:
    """Claim up to `limit` of the oldest queued records for this session's transaction.

    They stay claimed (row-locked) until the transaction ends: mark each assessed or failed
    in it, and a rollback hands them back to the queue. A payload that no longer validates
    is marked failed here, with the reason, and not returned.
    """
    if limit < 1:
        raise InputError("claim at least one record")
    claimed = []
    for row in session.execute(_CLAIM, {"limit": limit}):
        try:
            run = ExternalRun.model_validate(row.payload)
        except ValidationError as exc:
            mark_failed(row.id, f"the stored record no longer validates: {describe_validation_error(exc)}", session=session)
            continue
        claimed.append(QueuedRecord(row.id, row.trace_id, row.source, row.received_at, run, row.judges))
    return claimed


_MARK = text("""
UPDATE run_intake SET status = :status, run_id = :run_id, error = :error, assessed_at = now()
WHERE id = :id RETURNING id
""")


def mark_assessed(intake_id: int, *, run_id: int, session: Session) -> None:
    """Record that the assessment stored run `run_id` for this record."""
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
