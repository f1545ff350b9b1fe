"""The intake as the Import runs page shows it: records per status, and the latest failures.

Read-only views of run_intake, so a person importing a file sees what waits for its
assessment and why a record could not be assessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import text
from sqlalchemy.orm import Session

from services.errors import InputError


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
