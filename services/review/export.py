"""Select stored runs and their reviews for export, as one flat record per run.

One record per run, flat enough for a spreadsheet but complete: `FIELDS` gives the
columns in order and the type of each. With the contexts the answer was given (text,
document id, scores), an export of reviewed runs is a ready evaluation or fine-tuning set:
question, contexts, the answer a reviewer stood behind, and the verdict. `services.review.export_formats` writes records
as CSV, JSONL or Parquet and reads them back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from services.domain import ANONYMOUS_CONTEXT, STATUSES
from services.errors import InputError
from services.retrieval.text import require_storable
from services.review.days import day_end, day_start
from services.scoring.weights import COMPONENTS
from services.store import read_transaction

VERDICTS = ("approved", "flagged", "corrected")
DATE_FIELDS = ("created", "reviewed")

# Column order and type. "?" marks a nullable scalar; "json" holds a list or dict. A
# nullable text field is never "" in a record (blank is None), so an empty CSV cell is None.
FIELDS: dict[str, str] = {
    "run_id": "int", "created_at": "text", "reviewed_at": "text?",
    "question": "text", "final_answer": "text", "original_answer": "text", "citations": "json", "contexts": "json",
    "confidence_components": "json", "retrieval_confidence": "float", "final_confidence": "float",
    "final_level": "text", "calibrated_probability": "float?", "weights_profile": "text", "weights_profile_id": "int?",
    "route": "json", "iterations_summary": "json", "crag_verdict": "text?", "reflection_score": "float?", "grade": "int?",
    "status": "text", "verdict": "text?", "reviewer": "text?", "flag_reason": "text?", "review_comment": "text?",
    "review_version": "int", "review_history": "json",
    "preset": "text", "backend": "text", "model": "text", "collection": "text", "source": "text",
    # Runs from other systems (source import, api or otlp): the app whose key sent them (trace
    # ids are unique per app), their trace id and the metadata they came with (app, model,
    # user, timestamp, extra); None for the workbench's own runs.
    "app": "text?", "trace_id": "text?", "external": "json",
}
_CITATION_KEYS = ("marker", "chunk_id", "document_id", "external_id", "quote")
_SCORE_KEYS = ("fused_score", "bm25_score", "dense_similarity", "rerank_score")


@dataclass(frozen=True)
class ExportFilters:
    """Which runs to export; every field left empty / None selects everything.

    `since` (inclusive) and `until` (exclusive) bound `created_at` when `date_field` is
    "created", or `reviewed_at` when it is "reviewed" (runs never reviewed then drop out).
    Naive datetimes are taken as UTC. `verdict` is the run's current review outcome.
    `profile` is a weights profile label as runs store it ("default v1").
    """

    statuses: tuple[str, ...] = ()
    verdict: str | None = None
    reviewer: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    date_field: str = "created"
    profile: str | None = None
    collection: str | None = None
    app: str | None = None  # the app whose key sent the runs (GET /runs and the API's keys speak per app)

    def __post_init__(self) -> None:
        object.__setattr__(self, "statuses", tuple(self.statuses))
        unknown = [s for s in self.statuses if s not in STATUSES]
        if unknown:
            raise InputError(f"unknown status {', '.join(map(repr, unknown))}; use one of: {', '.join(STATUSES)}")
        if self.verdict is not None and self.verdict not in VERDICTS:
            raise InputError(f"unknown verdict {self.verdict!r}; use one of: {', '.join(VERDICTS)}")
        for name in ("reviewer", "profile", "collection", "app"):
            require_storable(getattr(self, name), f"the {name} filter")
        if self.date_field not in DATE_FIELDS:
            raise InputError(f"unknown date field {self.date_field!r}; use one of: {', '.join(DATE_FIELDS)}")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                object.__setattr__(self, name, value.replace(tzinfo=UTC))
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise InputError(f"since ({self.since.isoformat()}) must be before until ({self.until.isoformat()})")


def parse_when(value: str, *, end: bool = False) -> datetime:
    """An ISO date or datetime from the command line, as a bound for ExportFilters.

    A bare date means midnight UTC at its start; as an `end` (until) bound it means the
    end of that day, so `--since 2025-05-01 --until 2025-05-31` covers all of May.
    """
    try:
        day = date.fromisoformat(value)
    except ValueError:
        try:
            return datetime.fromisoformat(value)
        except ValueError as exc:
            raise InputError(f"{value!r} is not an ISO date (2025-05-31) or datetime (2025-05-31T14:00:00+00:00)") from exc
    return day_end(day) if end else day_start(day)


# --- loading: streamed in batches, three queries a batch, one snapshot -----------------------

# Which runs: the filters, every value bound (a filter left empty matches everything).
_MATCHING = """
FROM runs
WHERE (cardinality(CAST(:statuses AS text[])) = 0 OR status = ANY(:statuses))
  AND (CAST(:verdict AS text) IS NULL OR status = :verdict)
  AND (CAST(:reviewer AS text) IS NULL OR reviewer = :reviewer)
  AND (CAST(:profile AS text) IS NULL OR weights_profile = :profile)
  AND (CAST(:collection AS text) IS NULL OR collection = :collection)
  AND (CAST(:app AS text) IS NULL OR app = :app)
  AND (CAST(:since AS timestamptz) IS NULL
       OR (CASE WHEN CAST(:by_reviewed AS boolean) THEN reviewed_at ELSE created_at END) >= :since)
  AND (CAST(:until AS timestamptz) IS NULL
       OR (CASE WHEN CAST(:by_reviewed AS boolean) THEN reviewed_at ELSE created_at END) < :until)
"""
_RUNS_SQL = """
SELECT id, query, final_answer, corrected_answer, citations, components, retrieval_confidence, final_confidence,
       final_level, weights_profile, weights_profile_id, route, crag_verdict, reflection_score, grade, status,
       reviewer, flag_reason, review_comment, review_version, preset, backend, model, collection, source,
       created_at, reviewed_at, app, trace_id, external, best_iteration""" + _MATCHING + """
ORDER BY created_at, id
LIMIT CAST(:limit AS bigint)
"""
_COUNT_SQL = "SELECT count(*)" + _MATCHING
# The best iteration's hits ride along with its summary row: the contexts the final answer was given.
_ITERATIONS_SQL = """
SELECT it.run_id, it.ordinal, it.query_used, it.decision, it.confidence,
       it.reflection -> 'reflection_score' AS reflection_score, it.grade -> 'score' AS grade,
       CASE WHEN it.ordinal = r.best_iteration THEN it.retrieval -> 'hits' END AS hits
FROM run_iterations it JOIN runs r ON r.id = it.run_id
WHERE it.run_id = ANY(:run_ids) ORDER BY it.run_id, it.ordinal
"""
_HISTORY_SQL = """
SELECT run_id, version, action, reviewer, previous_status, new_status, flag_reason, corrected_answer, comment, created_at
FROM review_history WHERE run_id = ANY(:run_ids) ORDER BY run_id, version
"""
BATCH_RUNS = 500  # runs held at once, with their iterations and history: what memory an export costs


def _params(filters: ExportFilters, limit: int | None) -> dict[str, Any]:
    return {"statuses": list(filters.statuses), "verdict": filters.verdict, "reviewer": filters.reviewer,
            "profile": filters.profile, "collection": filters.collection, "app": filters.app,
            "since": filters.since,
            "until": filters.until, "by_reviewed": filters.date_field == "reviewed", "limit": limit}


def iter_export_records(filters: ExportFilters = ExportFilters(), *,
                        calibrate: Callable[[np.ndarray], Any] | None = None, session: Session | None = None,
                        limit: int | None = None, batch: int = BATCH_RUNS) -> Iterator[dict[str, Any]]:
    """One record per matching run (oldest first, at most `limit`), with `FIELDS` as keys in
    that order, made as they are read: the runs come through a server-side cursor `batch` at a
    time, so an export of a million runs holds one batch in memory, not a million records.

    `calibrate` maps an array of raw final confidences to calibrated probabilities (as for
    `review.review_queue`; it is applied per batch, which an elementwise map allows); without
    one `calibrated_probability` is None.
    """
    if session is None:
        with read_transaction() as own:  # the replica when there is one
            # One snapshot for every batch, so a review landing mid-export cannot make a run's
            # status disagree with its history, nor a run move between batches.
            own.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"))
            yield from iter_export_records(filters, calibrate=calibrate, session=own, limit=limit, batch=batch)
        return
    connection = session.connection()
    runs = connection.execute(text(_RUNS_SQL), _params(filters, limit),  # a server-side cursor
                              execution_options={"stream_results": True, "max_row_buffer": batch})
    for rows in runs.partitions(batch):
        run_ids = [r.id for r in rows]
        iterations = _group(connection.execute(text(_ITERATIONS_SQL), {"run_ids": run_ids}))
        histories = _group(connection.execute(text(_HISTORY_SQL), {"run_ids": run_ids}))
        calibrated: Sequence[float | None] = [None] * len(rows)
        if calibrate is not None:
            raw = np.array([r.final_confidence for r in rows], dtype=np.float64)
            calibrated = [float(p) for p in np.asarray(calibrate(raw))]
        for r, p in zip(rows, calibrated):
            yield _record(r, iterations.get(r.id, []), histories.get(r.id, []), p)


def export_records(filters: ExportFilters = ExportFilters(), *, calibrate: Callable[[np.ndarray], Any] | None = None,
                   session: Session | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """iter_export_records as a list: for a preview or a small export (a big one streams)."""
    return list(iter_export_records(filters, calibrate=calibrate, session=session, limit=limit))


def count_export_records(filters: ExportFilters = ExportFilters(), *, session: Session | None = None) -> int:
    """How many runs the filters select, without reading them."""
    if session is None:
        with read_transaction() as own:
            return count_export_records(filters, session=own)
    return int(session.execute(text(_COUNT_SQL), _params(filters, None)).scalar_one())


def _group(rows: Iterable[Any]) -> dict[int, list[Any]]:
    grouped: dict[int, list[Any]] = {}
    for row in rows:
        grouped.setdefault(row.run_id, []).append(row)
    return grouped


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


def _record(r: Any, iterations: list[Any], history: list[Any], calibrated: float | None) -> dict[str, Any]:
    return {
        "run_id": r.id, "created_at": _iso(r.created_at), "reviewed_at": _iso(r.reviewed_at),
        "question": r.query,
        "final_answer": r.corrected_answer if r.corrected_answer is not None else r.final_answer,
        "original_answer": r.final_answer,
        "citations": [{k: c.get(k) for k in _CITATION_KEYS} for c in r.citations],
        "contexts": _contexts(next((i.hits for i in iterations if i.hits is not None), [])),
        "confidence_components": dict(zip(COMPONENTS, r.components)),
        "retrieval_confidence": r.retrieval_confidence, "final_confidence": r.final_confidence,
        "final_level": r.final_level, "calibrated_probability": calibrated,
        "weights_profile": r.weights_profile, "weights_profile_id": r.weights_profile_id,
        "route": list(r.route),
        "iterations_summary": [{"ordinal": i.ordinal, "query_used": i.query_used, "decision": i.decision,
                                "confidence": i.confidence, "reflection_score": i.reflection_score, "grade": i.grade}
                               for i in iterations],
        "crag_verdict": r.crag_verdict, "reflection_score": r.reflection_score, "grade": r.grade,
        "status": r.status, "verdict": r.status if r.status in VERDICTS else None,
        "reviewer": r.reviewer, "flag_reason": r.flag_reason,
        # A blank comment is no comment: None, so a CSV cell can tell it from text.
        "review_comment": r.review_comment or None,
        "review_version": r.review_version,
        "review_history": [{"version": h.version, "action": h.action, "reviewer": h.reviewer, "comment": h.comment,
                            "created_at": _iso(h.created_at), "previous_status": h.previous_status,
                            "new_status": h.new_status, "flag_reason": h.flag_reason,
                            "corrected_answer": h.corrected_answer} for h in history],
        "preset": r.preset, "backend": r.backend, "model": r.model, "collection": r.collection, "source": r.source,
        "app": r.app, "trace_id": r.trace_id, "external": r.external,
    }


def _contexts(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The best iteration's hits in rank order: text, the document as its owner names it (None for
    an imported context that named none), and the scores that ranked it."""
    return [{"rank": h.get("rank"), "document_id": _document_name(h), "title": h.get("title") or None,
             "text": h.get("text"), "scores": {k: h.get(k) for k in _SCORE_KEYS}} for h in hits]


def _document_name(hit: dict[str, Any]) -> str | None:
    external_id = hit.get("external_id") or None
    anonymous = (hit.get("document_id") or 0) < 0 and external_id == f"{ANONYMOUS_CONTEXT}{hit.get('rank')}"
    return None if anonymous else external_id
