"""The confidence-based cache (seed 003's future work): a question asked again of an unchanged
collection, with the same preset and loop settings, gets its stored run back when that run was
HIGH and approved by a reviewer, or auto-accepted.

"Unchanged" without a version column (no migration this session): a collection's ingest mark
is its id, its number of documents and its largest document id. An ingest that changes
anything inserts document rows (a new or replaced document takes a fresh id from the sequence,
and ids are never reused) and a removal lowers the count, so any change moves the mark; an
ingest that finds every document unchanged leaves it, as it leaves the corpus. Each run stores
the mark it was answered on in its config; a stored run is returned only while the
collection's mark is still the one it stored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from services.domain import RunStatus

MARK_KEY = "collection_mark"
# Keys of a run's stored config that are not the loop it ran: who asked, whether it was forced
# into review, the weights profile (a run approved under other weights is still approved), and
# the mark, compared on its own.
NOT_LOOP = ("profile", "requested_by", "force_pending", MARK_KEY)

_MARK_SQL = """
SELECT c.id AS collection_id, count(d.id) AS documents, coalesce(max(d.id), 0) AS last_document
FROM collections c LEFT JOIN documents d ON d.collection_id = c.id
WHERE c.name = :name
GROUP BY c.id
"""

# The status filter can use runs_status_created; the query text has no index of its own (a
# migration could add one on md5(query)), so on a large store this reads the accepted runs.
_CACHED_SQL = """
SELECT id, status, final_level, final_confidence, created_at, reviewer
FROM runs
WHERE status = ANY(:statuses)
  AND (status = :auto OR final_level = 'HIGH')
  AND query = :query AND collection = :collection AND preset = :preset
  AND config -> 'collection_mark' = CAST(:mark AS jsonb)
  AND (config - CAST(:not_loop AS text[])) = CAST(:loop AS jsonb)
ORDER BY created_at DESC, id DESC
LIMIT 1
"""


@dataclass(frozen=True)
class CacheHit:
    """The stored run a repeated question is answered with, and why it may be."""

    run_id: int
    status: str
    level: str
    confidence: float
    created_at: datetime
    reviewer: str | None

    @property
    def message(self) -> str:
        why = (f"approved by {self.reviewer or 'a reviewer'} at {self.level}" if self.status == RunStatus.APPROVED
               else f"auto-accepted at {self.level} {self.confidence:.2f}")
        return (f"Answered from the cache: run {self.run_id} asked this of the same collection with the same preset "
                f"and loop on {self.created_at:%Y-%m-%d %H:%M} UTC, {why}; nothing has been ingested since.")

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "level": self.level, "confidence": self.confidence,
                "created_at": self.created_at.isoformat(), "reviewer": self.reviewer}


def collection_mark(collection: str, *, session: Session) -> dict[str, int] | None:
    """The collection's ingest mark (see the module docstring); None when it does not exist."""
    row = session.execute(text(_MARK_SQL), {"name": collection}).first()
    if row is None:
        return None
    return {"collection_id": int(row.collection_id), "documents": int(row.documents),
            "last_document": int(row.last_document)}


def find_cached(query: str, *, collection: str, preset: str, loop: dict[str, Any], mark: dict[str, int] | None,
                session: Session) -> CacheHit | None:
    """The newest run to answer `query` with instead of running the loop, or None.

    `loop` is the run config without NOT_LOOP's keys (preset and every loop setting), as the
    pipeline would store it; `mark` the collection's ingest mark now."""
    if mark is None:
        return None
    values = {"statuses": [RunStatus.AUTO_ACCEPTED.value, RunStatus.APPROVED.value],
              "auto": RunStatus.AUTO_ACCEPTED.value, "query": query, "collection": collection, "preset": preset,
              "mark": json.dumps(mark), "not_loop": list(NOT_LOOP), "loop": json.dumps(loop, default=str)}
    row = session.execute(text(_CACHED_SQL), values).first()
    if row is None:
        return None
    return CacheHit(int(row.id), row.status, row.final_level, float(row.final_confidence), row.created_at, row.reviewer)
