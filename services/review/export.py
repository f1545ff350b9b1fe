"""Exports of stored runs and their reviews (CSV, JSONL, Parquet) for audits and fine-tuning sets.

One record per run, flat enough for a spreadsheet but complete: `FIELDS` gives the
columns in order and the type of each. Lists and dicts (citations, components, route,
iterations, review history) are JSON strings in CSV and Parquet cells -- simple, lossless,
and readable by any tool -- and plain JSON in JSONL. `read_export` turns any of the three
back into the records `export_records` returned.
"""

from __future__ import annotations

import csv
import io
import json
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import text
from sqlalchemy.orm import Session

from services.answering.runs import STATUSES
from services.errors import InputError
from services.retrieval.text import require_storable
from services.scoring.confidence import COMPONENTS
from services.store import transaction

VERDICTS = ("approved", "flagged", "corrected")
DATE_FIELDS = ("created", "reviewed")
FORMATS = ("csv", "jsonl", "parquet")

# Column order and type. "?" marks a nullable scalar; "json" holds a list or dict. A
# nullable text field is never "" in a record (blank is None), so an empty CSV cell is None.
FIELDS: dict[str, str] = {
    "run_id": "int", "created_at": "text", "reviewed_at": "text?",
    "question": "text", "final_answer": "text", "original_answer": "text", "citations": "json",
    "confidence_components": "json", "retrieval_confidence": "float", "final_confidence": "float",
    "final_level": "text", "calibrated_probability": "float?", "weights_profile": "text", "weights_profile_id": "int?",
    "route": "json", "iterations_summary": "json", "crag_verdict": "text?", "reflection_score": "float?", "grade": "int?",
    "status": "text", "verdict": "text?", "reviewer": "text?", "flag_reason": "text?", "review_comment": "text?",
    "review_version": "int", "review_history": "json",
    "preset": "text", "backend": "text", "model": "text", "collection": "text", "source": "text",
}
_CITATION_KEYS = ("marker", "chunk_id", "document_id", "external_id", "quote")


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "statuses", tuple(self.statuses))
        unknown = [s for s in self.statuses if s not in STATUSES]
        if unknown:
            raise InputError(f"unknown status {', '.join(map(repr, unknown))}; use one of: {', '.join(STATUSES)}")
        if self.verdict is not None and self.verdict not in VERDICTS:
            raise InputError(f"unknown verdict {self.verdict!r}; use one of: {', '.join(VERDICTS)}")
        for name in ("reviewer", "profile", "collection"):
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
    if end and day == date.max:  # the day after it is past what a datetime can hold
        return datetime.max.replace(tzinfo=UTC)
    return datetime.combine(day + timedelta(days=1 if end else 0), time(), UTC)


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r}; use one of: {', '.join(FORMATS)}")
    return fmt


# --- loading: three queries in one snapshot, grouped in Python ---------------------------

_RUNS_SQL = """
SELECT id, query, final_answer, corrected_answer, citations, components, retrieval_confidence, final_confidence,
       final_level, weights_profile, weights_profile_id, route, crag_verdict, reflection_score, grade, status,
       reviewer, flag_reason, review_comment, review_version, preset, backend, model, collection, source,
       created_at, reviewed_at
FROM runs
WHERE (cardinality(CAST(:statuses AS text[])) = 0 OR status = ANY(:statuses))
  AND (CAST(:verdict AS text) IS NULL OR status = :verdict)
  AND (CAST(:reviewer AS text) IS NULL OR reviewer = :reviewer)
  AND (CAST(:profile AS text) IS NULL OR weights_profile = :profile)
  AND (CAST(:collection AS text) IS NULL OR collection = :collection)
  AND (CAST(:since AS timestamptz) IS NULL
       OR (CASE WHEN CAST(:by_reviewed AS boolean) THEN reviewed_at ELSE created_at END) >= :since)
  AND (CAST(:until AS timestamptz) IS NULL
       OR (CASE WHEN CAST(:by_reviewed AS boolean) THEN reviewed_at ELSE created_at END) < :until)
ORDER BY created_at, id
"""
_ITERATIONS_SQL = """
SELECT run_id, ordinal, query_used, decision, confidence,
       reflection -> 'reflection_score' AS reflection_score, grade -> 'score' AS grade
FROM run_iterations WHERE run_id = ANY(:run_ids) ORDER BY run_id, ordinal
"""
_HISTORY_SQL = """
SELECT run_id, version, action, reviewer, previous_status, new_status, flag_reason, corrected_answer, comment, created_at
FROM review_history WHERE run_id = ANY(:run_ids) ORDER BY run_id, version
"""


def export_records(filters: ExportFilters = ExportFilters(), *, calibrate: Callable[[np.ndarray], Any] | None = None,
                   session: Session | None = None) -> list[dict[str, Any]]:
    """One record per matching run (oldest first), with `FIELDS` as keys in that order.

    `calibrate` maps an array of raw final confidences to calibrated probabilities (as
    for `review.review_queue`); without one `calibrated_probability` is None.
    """
    if session is None:
        with transaction() as own:
            # One snapshot for all three queries, so a review landing mid-export cannot
            # make a run's status disagree with its history.
            own.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            return export_records(filters, calibrate=calibrate, session=own)
    runs = session.execute(text(_RUNS_SQL), {
        "statuses": list(filters.statuses), "verdict": filters.verdict, "reviewer": filters.reviewer,
        "profile": filters.profile, "collection": filters.collection, "since": filters.since, "until": filters.until,
        "by_reviewed": filters.date_field == "reviewed",
    }).all()
    run_ids = [r.id for r in runs]
    iterations = _group(session.execute(text(_ITERATIONS_SQL), {"run_ids": run_ids}).all()) if runs else {}
    histories = _group(session.execute(text(_HISTORY_SQL), {"run_ids": run_ids}).all()) if runs else {}
    calibrated: Sequence[float | None] = [None] * len(runs)
    if calibrate is not None and runs:
        calibrated = [float(p) for p in np.asarray(calibrate(np.array([r.final_confidence for r in runs], dtype=np.float64)))]
    return [_record(r, iterations.get(r.id, []), histories.get(r.id, []), p) for r, p in zip(runs, calibrated)]


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
    }


# --- writing and reading the three formats ---------------------------------------------

def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _to_cells(record: dict[str, Any]) -> dict[str, Any]:
    """Nested fields as JSON strings; scalars unchanged."""
    return {name: _dumps(record[name]) if kind == "json" else record[name] for name, kind in FIELDS.items()}


# A spreadsheet runs a CSV cell that starts with one of these as a formula (OWASP "CSV
# injection"); questions, answers and comments are typed by people. Such a text cell is
# written with a leading apostrophe, which spreadsheets show as plain text. Cells already
# starting with an apostrophe get one too, so reading strips exactly one and round-trips.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "'")


def _csv_text(value: str) -> str:
    return "'" + value if value.startswith(_FORMULA_STARTS) else value


def _from_csv_text(value: str) -> str:
    return value[1:] if value.startswith("'") and value[1:].startswith(_FORMULA_STARTS) else value


def _from_cell(kind: str, value: Any) -> Any:
    if kind == "json":
        return json.loads(value)
    if value is None or (value == "" and kind.endswith("?")):
        return None
    if kind.startswith("int"):
        return int(value)
    if kind.startswith("float"):
        return float(value)
    return value


_ARROW_TYPES = {"int": pa.int64(), "float": pa.float64(), "text": pa.string(), "json": pa.string()}
_ARROW_SCHEMA = pa.schema([pa.field(name, _ARROW_TYPES[kind.rstrip("?")], nullable=kind.endswith("?"))
                           for name, kind in FIELDS.items()])


def export_bytes(records: Sequence[dict[str, Any]], fmt: str) -> bytes:
    """The records serialized as `fmt` (UTF-8 for the text formats, no byte-order mark)."""
    check_format(fmt)
    if fmt == "jsonl":
        return "".join(_dumps(r) + "\n" for r in records).encode("utf-8")
    if fmt == "csv":
        buffer = io.StringIO(newline="")
        writer = csv.writer(buffer)
        writer.writerow(FIELDS)
        for record in records:
            cells = _to_cells(record)
            # repr keeps every float digit; None is an empty cell (nullable fields only).
            writer.writerow(["" if v is None else repr(v) if isinstance(v, float) else
                             _csv_text(v) if isinstance(v, str) else v for v in cells.values()])
        return buffer.getvalue().encode("utf-8")
    table = pa.Table.from_pylist([_to_cells(r) for r in records], schema=_ARROW_SCHEMA)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


def write_export(records: Sequence[dict[str, Any]], fmt: str, destination: Path | BinaryIO) -> None:
    """Write the export to an open binary file, or atomically to a path.

    A path is written through a temporary file in the same directory and then renamed
    over the destination, so a failed export never leaves a half-written file behind.
    """
    data = export_bytes(records, fmt)
    if not isinstance(destination, (str, Path)):
        destination.write(data)
        return
    path = Path(destination)
    if not path.parent.is_dir():
        raise InputError(f"cannot write {path}: directory {path.parent} does not exist")
    temporary = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(temporary, "xb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from exc
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def read_export(source: Path | str | bytes, fmt: str) -> list[dict[str, Any]]:
    """Re-import an export written by `write_export` / `export_bytes` as the same records."""
    check_format(fmt)
    if isinstance(source, bytes):
        data = source
    else:
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read {source}: {exc.strerror or exc}") from exc
    try:
        if fmt == "jsonl":
            # Split on "\n" only: str.splitlines() would also split inside text at U+2028.
            rows = [json.loads(line) for line in data.decode("utf-8").split("\n") if line.strip()]
            return [_ordered(row) for row in rows]
        if fmt == "csv":
            # Cells hold whole answers and JSON lists; the default 128 KiB cell cap is too low.
            csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))
            reader = csv.DictReader(io.StringIO(data.decode("utf-8-sig"), newline=""))
            _require_columns(reader.fieldnames or [])
            cells = [{name: _from_csv_text(value) if isinstance(value, str) else value for name, value in row.items()}
                     for row in reader]
        else:
            table = pq.read_table(pa.BufferReader(data))
            _require_columns(table.column_names)
            cells = table.to_pylist()
        return [{name: _from_cell(kind, row[name]) for name, kind in FIELDS.items()} for row in cells]
    except (ValueError, pa.ArrowException) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise InputError(f"not a readable {fmt} export: {exc}") from exc


def _require_columns(columns: Sequence[str]) -> None:
    missing = [name for name in FIELDS if name not in columns]
    if missing:
        raise InputError(f"not a workbench export: missing columns {', '.join(missing)}")


def _ordered(row: dict[str, Any]) -> dict[str, Any]:
    _require_columns(list(row))
    return {name: row[name] for name in FIELDS}
