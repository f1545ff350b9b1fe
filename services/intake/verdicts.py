"""Verdicts flowing back: the reviews of runs that came from other systems, by review time,
so a source system can pull what reviewers decided about its answers (GET /runs).

Pages follow a keyset cursor, (reviewed_at, run id) of the last run listed: each page is one
index range scan from there, so the last page of a million reviews costs what the first
does, and a run reviewed again moves to the end, where the next poll finds its new verdict.
A review is listed once it is `settle_seconds` old: a review saved while a page is read,
stamped a moment before the page's last run, would otherwise be passed over for good.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from services.errors import InputError
from services.intake.intake import VERDICTS

MAX_LIMIT = 1_000
SETTLE_SECONDS = 1.0
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CURSOR_VERSION = "v1"


@dataclass(frozen=True)
class ReviewedRun:
    """One imported or pushed run as its latest review left it."""

    intake_id: int
    app: str
    trace_id: str | None
    source: str
    run_id: int
    status: str  # approved, flagged, corrected, or pending again (sent back to review)
    verdict: str | None  # approved, flagged or corrected
    corrected_answer: str | None  # set once a reviewer corrected the answer
    flag_reason: str | None
    comment: str | None
    reviewer: str | None
    reviewed_at: datetime
    review_version: int  # with run_id, identifies this review: a later one has a higher version
    final_confidence: float
    final_level: str


@dataclass(frozen=True)
class Position:
    """Where a page ends: after the review at `reviewed_at` of run `run_id` (order: both)."""

    reviewed_at: datetime
    run_id: int

    @classmethod
    def since(cls, when: datetime) -> Position:
        """Before every review at or after `when` (UTC when naive): run ids start at 1."""
        return cls(when if when.tzinfo is not None else when.replace(tzinfo=UTC), 0)

    def encode(self) -> str:
        """An opaque cursor: the time in whole microseconds since 1970 and the run id."""
        micros = (self.reviewed_at - _EPOCH) // timedelta(microseconds=1)
        raw = f"{_CURSOR_VERSION}:{micros}:{self.run_id}".encode("ascii")
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")

    @classmethod
    def decode(cls, cursor: str) -> Position:
        """The position a cursor of `encode` names; InputError for anything else."""
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
            version, micros, run_id = raw.split(":")
            if version != _CURSOR_VERSION or not (0 <= int(run_id) < 2**63):
                raise ValueError(version)
            return cls(_EPOCH + timedelta(microseconds=int(micros)), int(run_id))
        except (ValueError, UnicodeDecodeError, binascii.Error, OverflowError):
            raise InputError("that is not a cursor this API gave (pass back the `next` or `resume` of a page)") from None


@dataclass(frozen=True)
class ReviewedPage:
    runs: list[ReviewedRun]
    resume: Position  # after the last run listed (where the page started, when it is empty)
    more: bool  # the page is full: more may follow at once


_SELECT = """
SELECT i.id AS intake_id, r.app, i.trace_id, i.source, r.id AS run_id, r.status, r.corrected_answer, r.flag_reason,
       r.review_comment, r.reviewer, r.reviewed_at, r.review_version, r.final_confidence, r.final_level
FROM runs r JOIN run_intake i ON i.run_id = r.id
WHERE r.reviewed_at IS NOT NULL AND r.app IS NOT NULL AND (r.reviewed_at, r.id) > (:after_at, :after_id)
  AND r.reviewed_at <= now() - make_interval(secs => :settle)
"""
# One statement per case so each uses its index: runs_reviewed_by_app, runs_reviewed_external.
_OF_APP = text(_SELECT + "  AND r.app = :app ORDER BY r.reviewed_at, r.id LIMIT :limit")
_OF_EVERY_APP = text(_SELECT + "ORDER BY r.reviewed_at, r.id LIMIT :limit")


# Each page is read in the cursor's order from its index and stops after `limit` rows. The planner
# misjudges how many reviews lie past a cursor (on a million runs it guessed 967 of 99,825 for the
# first page) and would rather collect them all and sort: 0.6-1.6 s for the first page, 100 ms near
# the end; in index order 23-47 ms for every page (2026-11-27, load 12). So sorting and bitmap
# scans are turned off for this statement only, and the caller's settings given back after it.
_IN_CURSOR_ORDER = text("SELECT current_setting('enable_sort') AS sort, current_setting('enable_bitmapscan') AS bitmap, "
                        "set_config('enable_sort', 'off', true), set_config('enable_bitmapscan', 'off', true)")
_GIVE_BACK = text("SELECT set_config('enable_sort', :sort, true), set_config('enable_bitmapscan', :bitmap, true)")


def reviewed_page(after: Position, *, app: str | None, limit: int = 100, settle_seconds: float = SETTLE_SECONDS,
                  session: Session) -> ReviewedPage:
    """Runs of `app` (None: of every app) from other systems whose latest review comes after
    `after` in (reviewed_at, run id) order, oldest review first, reviews at least
    `settle_seconds` old only."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InputError(f"limit must be between 1 and {MAX_LIMIT}")
    values: dict[str, Any] = {"after_at": after.reviewed_at, "after_id": after.run_id, "settle": settle_seconds,
                              "limit": limit}
    statement = _OF_EVERY_APP if app is None else _OF_APP
    previous = session.execute(_IN_CURSOR_ORDER).one()
    try:
        runs = [_reviewed(row) for row in session.execute(statement, {**values, "app": app})]
    finally:
        session.execute(_GIVE_BACK, {"sort": previous.sort, "bitmap": previous.bitmap})
    resume = Position(runs[-1].reviewed_at, runs[-1].run_id) if runs else after
    return ReviewedPage(runs, resume, more=len(runs) == limit)


def reviewed_since(since: datetime, *, app: str | None, limit: int = 100, settle_seconds: float = SETTLE_SECONDS,
                   session: Session) -> list[ReviewedRun]:
    """Runs of `app` (None: every app) reviewed at or after `since` (UTC when naive), oldest first."""
    return reviewed_page(Position.since(since), app=app, limit=limit, settle_seconds=settle_seconds,
                         session=session).runs


def _reviewed(row: Any) -> ReviewedRun:
    return ReviewedRun(
        intake_id=row.intake_id, app=row.app, trace_id=row.trace_id, source=row.source, run_id=row.run_id,
        status=row.status, verdict=row.status if row.status in VERDICTS else None, corrected_answer=row.corrected_answer,
        flag_reason=row.flag_reason, comment=row.review_comment or None, reviewer=row.reviewer,
        reviewed_at=row.reviewed_at, review_version=row.review_version, final_confidence=row.final_confidence,
        final_level=row.final_level,
    )
