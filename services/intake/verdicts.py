"""Verdicts flowing back: the reviews of runs that came from other systems, by review time,
so a source system can pull what reviewers decided about its answers (GET /runs?reviewed_since=)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from services.errors import InputError
from services.intake.intake import VERDICTS

MAX_LIMIT = 1_000


@dataclass(frozen=True)
class ReviewedRun:
    """One imported or pushed run as its latest review left it."""

    intake_id: int
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


# Inclusive, so a review at exactly the instant a client last saw is not lost; the client
# drops what it already has by (run_id, review_version).
_REVIEWED_SINCE = text("""
SELECT i.id AS intake_id, i.trace_id, i.source, r.id AS run_id, r.status, r.corrected_answer, r.flag_reason,
       r.review_comment, r.reviewer, r.reviewed_at, r.review_version, r.final_confidence, r.final_level
FROM runs r JOIN run_intake i ON i.run_id = r.id
WHERE r.reviewed_at >= :since
ORDER BY r.reviewed_at, r.id
LIMIT :limit
""")


def reviewed_since(since: datetime, *, limit: int = 100, session: Session) -> list[ReviewedRun]:
    """Runs from other systems reviewed at or after `since` (UTC when naive), oldest review first."""
    if not 1 <= limit <= MAX_LIMIT:
        raise InputError(f"limit must be between 1 and {MAX_LIMIT}")
    if since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    rows = session.execute(_REVIEWED_SINCE, {"since": since, "limit": limit})
    return [_reviewed(row) for row in rows]


def _reviewed(row: Any) -> ReviewedRun:
    return ReviewedRun(
        intake_id=row.intake_id, trace_id=row.trace_id, source=row.source, run_id=row.run_id, status=row.status,
        verdict=row.status if row.status in VERDICTS else None, corrected_answer=row.corrected_answer,
        flag_reason=row.flag_reason, comment=row.review_comment or None, reviewer=row.reviewer,
        reviewed_at=row.reviewed_at, review_version=row.review_version, final_confidence=row.final_confidence,
        final_level=row.final_level,
    )
