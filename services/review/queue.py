"""The review queue: approve / flag / correct with optimistic locking and full history."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import select, text

from db.models import ReviewHistory
from db.models import Run as RunRow
from services.domain import RunStatus
from services.errors import ConflictError, InputError, NotFoundError
from services.retrieval.text import require_storable
from services.store import read_transaction, transaction

ACTIONS = {"approve": RunStatus.APPROVED, "flag": RunStatus.FLAGGED, "correct": RunStatus.CORRECTED}
FLAG_REASONS = (
    "wrong answer",
    "not supported by the sources",
    "incomplete answer",
    "wrong sources retrieved",
    "question out of scope",
    "other",
)
# Verdicts the demo's answer key gives (services.demo) are stored under this name, so every
# view of a verdict (queue, history, export) says it is not a person's; nobody may take it.
ANSWER_KEY_REVIEWER = "demo answer key"
MAX_COMMENT_CHARS = 5_000
MAX_ANSWER_CHARS = 20_000
_MAX_ID = 2**63 - 1  # runs.id is a bigint


@dataclass(frozen=True)
class Review:
    run_id: int
    version: int
    action: str
    reviewer: str
    previous_status: str
    new_status: str
    flag_reason: str | None
    corrected_answer: str | None
    comment: str
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "created_at": self.created_at.isoformat()}


def _validate(action: str, reviewer: str, comment: str, flag_reason: str | None, corrected_answer: str | None,
              answer_key: bool) -> None:
    if action not in ACTIONS:
        raise InputError(f"unknown review action '{action}' (use approve, flag or correct)")
    if not reviewer or not reviewer.strip():
        raise InputError("set your reviewer name (sidebar) before reviewing: every action records who took it")
    if not answer_key and reviewer.strip().casefold() == ANSWER_KEY_REVIEWER:
        raise InputError(f"'{ANSWER_KEY_REVIEWER}' is reserved for the demo's answer-key verdicts; "
                         "review under your own name")
    if len(comment) > MAX_COMMENT_CHARS:
        raise InputError(f"the comment is {len(comment):,} characters; keep it under {MAX_COMMENT_CHARS:,}")
    if action == "flag" and flag_reason not in FLAG_REASONS:
        raise InputError(f"choose a flag reason ({', '.join(FLAG_REASONS)})")
    if action == "correct":
        if not corrected_answer or not corrected_answer.strip():
            raise InputError("a correction needs the corrected answer text")
        if len(corrected_answer) > MAX_ANSWER_CHARS:
            raise InputError(f"the corrected answer is over {MAX_ANSWER_CHARS:,} characters")
    for value, what in ((reviewer, "the reviewer name"), (comment, "the comment"), (corrected_answer, "the corrected answer")):
        require_storable(value, what)


# The CTE locks the row only if it is still at the version the reviewer saw; a concurrent
# save that landed first bumps the version, so this one matches nothing (a conflict).
_SAVE_REVIEW = """
WITH seen AS (
    SELECT id, status FROM runs WHERE id = :run_id AND review_version = :expected_version FOR UPDATE
)
UPDATE runs r SET status = :new_status, review_version = r.review_version + 1, reviewer = :reviewer,
       reviewed_at = :now, flag_reason = :flag_reason, review_comment = :comment,
       corrected_answer = CASE WHEN :action = 'correct' THEN :corrected_answer ELSE r.corrected_answer END
FROM seen WHERE r.id = seen.id
RETURNING r.review_version, seen.status AS previous_status, r.created_at
"""


def submit_review(
    run_id: int,
    *,
    expected_version: int,
    action: str,
    reviewer: str,
    comment: str = "",
    flag_reason: str | None = None,
    corrected_answer: str | None = None,
    answer_key: bool = False,
) -> Review:
    """Land one review action, or raise ConflictError if the run changed since it was read.

    The update only matches the version the reviewer saw, so of two reviewers saving over
    the same version exactly one lands; the other is told what changed, nothing is lost.
    `answer_key` marks the demo's answer-key verdicts (reviewer ANSWER_KEY_REVIEWER).
    """
    _validate(action, reviewer, comment, flag_reason, corrected_answer, answer_key)
    if not 0 < run_id <= _MAX_ID:
        raise NotFoundError(f"run {run_id} does not exist")
    now = datetime.now(UTC)
    reviewer = reviewer.strip()
    with transaction() as session:
        landed = session.execute(text(_SAVE_REVIEW), {
            "run_id": run_id, "expected_version": expected_version, "new_status": ACTIONS[action],
            "reviewer": reviewer, "now": now, "flag_reason": flag_reason if action == "flag" else None,
            "comment": comment, "action": action, "corrected_answer": corrected_answer,
        }).first()
        if landed is None:
            raise _conflict(session, run_id, expected_version)
        review = Review(run_id, landed.review_version, action, reviewer, landed.previous_status, ACTIONS[action],
                        flag_reason if action == "flag" else None,
                        corrected_answer if action == "correct" else None, comment, now)
        session.add(ReviewHistory(**asdict(review), run_created_at=landed.created_at))
        return review


def _conflict(session, run_id: int, expected_version: int) -> Exception:  # type: ignore[no-untyped-def]
    row = session.get(RunRow, run_id)
    if row is None:
        return NotFoundError(f"run {run_id} does not exist")
    last = session.scalars(select(ReviewHistory).where(ReviewHistory.run_id == run_id)
                           .order_by(ReviewHistory.version.desc())).first()
    current = {"status": row.status, "version": row.review_version, "reviewer": row.reviewer,
               "flag_reason": row.flag_reason, "comment": row.review_comment, "corrected_answer": row.corrected_answer,
               "reviewed_at": row.reviewed_at.isoformat() if row.reviewed_at else None}
    if last is not None:
        what = f"{last.reviewer} {last.action}d it ({last.previous_status} → {last.new_status})"
        when = last.created_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        message = (f"Run {run_id} was changed while you were reviewing: {what} at {when}. "
                   f"Your change was not saved; review the current state and save again if you still disagree.")
    else:
        message = f"Run {run_id} is at version {row.review_version}, not {expected_version}; reload it and try again."
    return ConflictError(message, current=current)


def current_review_state(run_id: int) -> tuple[str, int]:
    """A run's review status and version; the version is what a save sends as expected_version."""
    with transaction() as session:
        row = session.execute(select(RunRow.status, RunRow.review_version).where(RunRow.id == run_id)).first()
    if row is None:
        raise NotFoundError(f"run {run_id} does not exist")
    return row.status, row.review_version


def review_history(run_id: int) -> list[Review]:
    with transaction() as session:
        rows = session.scalars(select(ReviewHistory).where(ReviewHistory.run_id == run_id).order_by(ReviewHistory.version))
        return [Review(r.run_id, r.version, r.action, r.reviewer, r.previous_status, r.new_status, r.flag_reason,
                       r.corrected_answer, r.comment, r.created_at) for r in rows]


_SEND_TO_REVIEW = """
UPDATE runs SET status = 'pending', review_version = review_version + 1
WHERE id = :run_id AND status = 'auto_accepted'
RETURNING review_version, created_at
"""


def send_to_review(run_id: int, *, reviewer: str) -> bool:
    """Put an auto-accepted run into the queue by hand (a person chose to; never automatic).

    Recorded in the history like any review action; False when the run was not auto-accepted.
    """
    with transaction() as session:
        sent = session.execute(text(_SEND_TO_REVIEW), {"run_id": run_id}).first()
        if sent is None:
            if session.get(RunRow, run_id) is None:
                raise NotFoundError(f"run {run_id} does not exist")
            return False
        session.add(ReviewHistory(run_id=run_id, run_created_at=sent.created_at, version=sent.review_version,
                                  action="send_to_review", reviewer=reviewer.strip() or "unknown",
                                  previous_status=RunStatus.AUTO_ACCEPTED, new_status=RunStatus.PENDING, comment=""))
        return True


@dataclass(frozen=True)
class QueueItem:
    run_id: int
    query: str
    answer: str
    status: str
    level: str
    preset: str
    confidence: float
    calibrated: float
    disagreement: float
    reviewer: str | None
    review_version: int
    created_at: datetime
    p_supported: float | None = None  # the judge's; None for runs judged before it existed
    source: str = "ask"  # where the run came from: the Ask page, the demo, or another system (import, api, otlp)
    trace_id: str | None = None  # the source system's id, for runs from outside

    @property
    def p_wrong(self) -> float:
        """What the queue orders by: 1 - P(supported) where the judge ran, else 1 - the
        (calibrated) confidence."""
        return 1.0 - (self.p_supported if self.p_supported is not None else self.calibrated)


@dataclass(frozen=True)
class QueueFilters:
    statuses: tuple[str, ...] = (RunStatus.PENDING,)
    levels: tuple[str, ...] = ()
    presets: tuple[str, ...] = ()
    reviewer: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    sources: tuple[str, ...] = ()
    trace_id: str | None = None  # a whole trace id, or its start: a complaint may quote only part of it


def like_prefix(text: str) -> str:
    """`text` as a LIKE pattern matching values that start with it (its own % and _ taken literally)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


_QUEUE_SQL = """
SELECT id, query, final_answer, status, final_level, preset, final_confidence, signals, reviewer,
       review_version, created_at, p_supported, source, trace_id
FROM runs,
     LATERAL (SELECT (signals->>'retrieval')::float8 AS retrieval, (signals->>'reflection')::float8 AS reflection,
                     (signals->>'grade')::float8 AS grade, (signals->>'heuristic')::float8 AS heuristic) s
WHERE status = ANY(:statuses)
  AND (cardinality(CAST(:levels AS text[])) = 0 OR final_level = ANY(:levels))
  AND (CAST(:level AS text) IS NULL OR final_level = :level)
  AND (cardinality(CAST(:presets AS text[])) = 0 OR preset = ANY(:presets))
  AND (CAST(:reviewer AS text) IS NULL OR reviewer = :reviewer)
  AND (CAST(:since AS timestamptz) IS NULL OR created_at >= :since)
  AND (CAST(:until AS timestamptz) IS NULL OR created_at < :until)
  AND (cardinality(CAST(:sources AS text[])) = 0 OR source = ANY(:sources))
  AND (CAST(:trace_prefix AS text) IS NULL OR trace_id LIKE :trace_prefix)
ORDER BY CASE WHEN CAST(:by_disagreement AS boolean) THEN coalesce(
             greatest(s.retrieval, s.reflection, s.grade, s.heuristic)
             - least(s.retrieval, s.reflection, s.grade, s.heuristic), 0) END DESC,
         coalesce(p_supported, final_confidence), final_confidence, id
LIMIT :limit
"""


def review_queue(filters: QueueFilters = QueueFilters(), *, order: str = "uncertainty", limit: int = 500,
                 calibrate=None) -> list[QueueItem]:  # type: ignore[no-untyped-def]
    """Runs to review, most likely wrong first (or largest disagreement between signals first).

    `calibrate` maps raw confidences to calibrated probabilities (from services.scoring.calibration);
    without one the raw confidence is used.
    """
    if order not in ("uncertainty", "disagreement"):
        raise InputError("order must be 'uncertainty' or 'disagreement'")
    # On the read replica when there is one (DATABASE_READ_URL): a verdict saved a moment ago may
    # be missing for the replication lag, and a save against what was shown is still checked by
    # its review_version (a conflict, never an overwrite).
    with read_transaction() as session:
        rows = session.execute(text(_QUEUE_SQL), {
            "statuses": list(filters.statuses), "presets": list(filters.presets),
            # One level as an equality, which an index led by final_level can serve in the queue's
            # order (runs_pending_queue_by_level: 11 ms against 3.7 s for = ANY at a million runs).
            "level": filters.levels[0] if len(filters.levels) == 1 else None,
            "levels": list(filters.levels) if len(filters.levels) > 1 else [],
            "reviewer": filters.reviewer, "since": filters.since, "until": filters.until, "limit": limit,
            "sources": list(filters.sources),
            "trace_prefix": like_prefix(filters.trace_id) if filters.trace_id else None,
            "by_disagreement": order == "disagreement",  # the limit must keep the most disagreeing runs
        }).all()
    raw = np.array([r.final_confidence for r in rows], dtype=np.float64)
    calibrated = calibrate(raw) if calibrate is not None and len(raw) else raw
    items = [
        QueueItem(r.id, r.query, r.final_answer, r.status, r.final_level, r.preset, r.final_confidence,
                  float(c), signal_disagreement(r.signals), r.reviewer, r.review_version, r.created_at, r.p_supported,
                  r.source, r.trace_id)
        for r, c in zip(rows, calibrated)
    ]
    if order == "disagreement":
        return sorted(items, key=lambda i: (-i.disagreement, -i.p_wrong, i.confidence, i.run_id))
    # Isotonic calibration is a step function: the raw score orders runs within a step.
    return sorted(items, key=lambda i: (-i.p_wrong, i.confidence, i.run_id))


def signal_disagreement(signals: dict[str, float]) -> float:
    """Spread (max - min) of the blend's signals: retrieval vs reflection vs grade
    (_QUEUE_SQL orders by the same spread)."""
    values = [v for k, v in signals.items() if k in ("retrieval", "reflection", "grade", "heuristic")]
    return float(max(values) - min(values)) if len(values) > 1 else 0.0


# Trace ids are unique per app (migration 0013): two systems may send the same one.
_RUN_FOR_TRACE_SQL = """
SELECT id, review_version FROM runs
WHERE trace_id = :trace_id AND (CAST(:app AS text) IS NULL OR app = :app)
ORDER BY id DESC LIMIT 1
"""


def run_for_trace(trace_id: str, app: str | None = None) -> tuple[int, int] | None:
    """(run id, review version) of the run stored under exactly this trace id, by `app` when
    given, else the newest of any app's; None when there is none."""
    with transaction() as session:
        row = session.execute(text(_RUN_FOR_TRACE_SQL), {"trace_id": trace_id.strip(), "app": app}).first()
    return (row.id, row.review_version) if row is not None else None


# Where runs come from: the Ask page, `workbench ask --queries`, the demo, evaluation runs, and
# other systems' records (file import, POST /runs, OTLP traces).
RUN_SOURCES = ("ask", "batch", "demo", "eval", "import", "api", "otlp")


def run_sources() -> list[str]:
    """The sources a run can have, for the queue's source filter. Not read from the runs: with no
    index on source, SELECT DISTINCT reads every run (about a second at a million)."""
    return list(RUN_SOURCES)


_COUNTS_SQL = "SELECT status, count(*) FROM runs GROUP BY status"


def queue_counts() -> dict[str, int]:
    with read_transaction() as session:
        counts: dict[str, int] = dict(session.execute(text(_COUNTS_SQL)).tuples().all())
    shown = (RunStatus.PENDING, RunStatus.APPROVED, RunStatus.FLAGGED, RunStatus.CORRECTED, RunStatus.AUTO_ACCEPTED)
    return {status.value: int(counts.get(status, 0)) for status in shown}
