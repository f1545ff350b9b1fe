"""Read records from JSONL, CSV or Parquet, streamed: each good record with its line number,
each bad one as a RecordError saying where and why, so the good ones can still land.

Numbering: JSONL and CSV count physical lines from 1 (a CSV header is line 1, and a
record spanning several lines carries the line it starts on); Parquet counts rows from 1.

CSV and Parquet columns: `question` and `answer` (required), `trace_id`, `contexts` (a JSON
array of context objects; in Parquet also a list-of-struct column), and the metadata either
as one `metadata` column (a JSON object, or a struct) or as columns `app`, `model`, `user`,
`timestamp`. An unknown column is an error for the whole file: it would be wrong on every row.
Rows of RAGAS, Phoenix or Langfuse datasets, or with names given by a mapping, are mapped to
the record first (datasets.py).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from services.errors import InputError
from services.intake.datasets import dataset_record, is_dataset
from services.intake.schema import ExternalRun, describe_validation_error

FORMATS = ("jsonl", "csv", "parquet")
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
# One record's longest line: the schema's limits (200 contexts of 20,000 characters) fit,
# and a file that is one enormous line is reported instead of read into memory whole.
MAX_RECORD_BYTES = 16_000_000
_METADATA_COLUMNS = ("app", "model", "user", "timestamp")
_COLUMNS = ("question", "answer", "trace_id", "contexts", "metadata", *_METADATA_COLUMNS)
_PARQUET_BATCH_ROWS = 1_000


@dataclass(frozen=True)
class NumberedRun:
    """A valid record and where it was in the file."""

    line: int
    run: ExternalRun


@dataclass(frozen=True)
class RecordError:
    """A record that was not accepted: where it was and what to fix."""

    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


def detect_format(name: str | None, fmt: str | None = None) -> str:
    """The given format, else the one the file name's suffix implies."""
    if fmt is not None:
        if fmt.lower() not in FORMATS:
            raise InputError(f"unknown format {fmt!r}; use one of: {', '.join(FORMATS)}")
        return fmt.lower()
    suffix = Path(name or "").suffix.lower()
    if suffix not in _SUFFIXES:
        raise InputError(f"cannot tell the format of {name or 'this input'!r} from its suffix; "
                         f"name it .jsonl, .csv or .parquet, or give the format ({', '.join(FORMATS)})")
    return _SUFFIXES[suffix]


def iter_records(source: Path | bytes, *, fmt: str | None = None,
                 mapping: dict[str, str] | None = None) -> Iterator[NumberedRun | RecordError]:
    """Every record of a file (or its bytes), in order, as a NumberedRun or a RecordError;
    `mapping` ({field: column}, datasets.parse_map) names the columns of other datasets.

    Raises InputError only for what spoils the whole file: unreadable, an unknown format or
    column, a Parquet file that is not one.
    """
    kind = detect_format(source.name if isinstance(source, Path) else None, fmt)
    handle: IO[bytes] = _open(source) if isinstance(source, Path) else io.BytesIO(source)
    mapping = mapping or {}
    with handle:
        if kind == "jsonl":
            yield from _jsonl(handle, mapping)
        elif kind == "csv":
            yield from _csv(handle, mapping)
        else:
            yield from _parquet(handle, mapping)


def _open(path: Path) -> IO[bytes]:
    try:
        return path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _validated(line: int, data: Any) -> NumberedRun | RecordError:
    if not isinstance(data, dict):
        return RecordError(line, f"expected a JSON object (one record per line), got {_json_kind(data)}")
    try:
        return NumberedRun(line, ExternalRun.model_validate(data))
    except ValidationError as exc:
        return RecordError(line, describe_validation_error(exc))


# --- JSONL -------------------------------------------------------------------------------

def _jsonl(handle: IO[bytes], mapping: dict[str, str]) -> Iterator[NumberedRun | RecordError]:
    head = handle.read(4)
    if head == b"PAR1":
        raise InputError("this is a Parquet file, not JSONL: name it .parquet or give the format parquet")
    handle.seek(0)
    for number, raw in _lines(handle):
        if raw is None:
            yield RecordError(number, f"the line is over {MAX_RECORD_BYTES:,} bytes; split the record or shorten its contexts")
            continue
        if number == 1:
            raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark
        if not raw.strip():
            continue
        if b"\x00" in raw:
            yield RecordError(number, "binary data (a NUL byte), not a line of JSON text")
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield RecordError(number, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                                      "save the file as UTF-8")
            continue
        data, problem = _parse_json(text)
        if problem is None and isinstance(data, dict) and is_dataset(set(data), mapping):
            data = dataset_record(data, mapping)
        yield _validated(number, data) if problem is None else RecordError(number, f"not valid JSON: {problem}")


def _lines(handle: IO[bytes]) -> Iterator[tuple[int, bytes | None]]:
    """(line number, bytes) per line; None for a line over MAX_RECORD_BYTES, whose rest is skipped."""
    number = 0
    while True:
        raw = handle.readline(MAX_RECORD_BYTES + 1)
        if not raw:
            return
        number += 1
        if len(raw) > MAX_RECORD_BYTES and not raw.endswith(b"\n"):
            while (rest := handle.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            yield number, None
            continue
        yield number, raw


def _parse_json(text: str) -> tuple[Any, str | None]:
    """The value, or None and what is wrong with the text (position included)."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"{exc.msg} (column {exc.colno})"
    except RecursionError:
        return None, "nested too deeply"


def _json_kind(value: Any) -> str:
    names = {list: "an array", str: "a string", bool: "true or false", type(None): "null"}
    return names.get(type(value), "a number")


# --- CSV and Parquet ---------------------------------------------------------------------

def _csv(handle: IO[bytes], mapping: dict[str, str]) -> Iterator[NumberedRun | RecordError]:
    # surrogateescape turns bytes that are not UTF-8 into lone surrogates instead of
    # stopping the file at the first one; rows holding them are reported on their own.
    text = io.TextIOWrapper(handle, encoding="utf-8-sig", errors="surrogateescape", newline="")
    csv.field_size_limit(MAX_RECORD_BYTES)  # the default (128 KiB) is shorter than a record's contexts
    reader = csv.reader(text)
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        raise InputError(f"line 1: not a CSV header: {exc}") from exc
    columns = _check_columns(header, mapping)
    dataset = is_dataset(set(columns), mapping)
    start = reader.line_num + 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield RecordError(start, f"not valid CSV: {exc}")
            start = reader.line_num + 1
            continue
        line, start = start, reader.line_num + 1
        if not any(cell.strip() for cell in cells):
            continue
        if any("\udc80" <= ch <= "\udcff" for cell in cells for ch in cell):
            yield RecordError(line, "not UTF-8 text; save the file as UTF-8")
            continue
        if len(cells) != len(columns):
            yield RecordError(line, f"{len(cells)} cells where the header has {len(columns)} columns")
            continue
        yield _tabular(line, dict(zip(columns, cells)), mapping if dataset else None)


def _parquet(handle: IO[bytes], mapping: dict[str, str]) -> Iterator[NumberedRun | RecordError]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(handle)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise InputError(f"not a readable Parquet file: {exc}") from exc
    columns = _check_columns(parquet.schema_arrow.names, mapping)
    dataset = is_dataset(set(columns), mapping)
    row = 0
    batches = parquet.iter_batches(batch_size=_PARQUET_BATCH_ROWS, columns=list(columns))
    while True:
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as exc:
            raise InputError(f"the Parquet file is damaged after row {row}: {exc}") from exc
        for values in batch.to_pylist():
            row += 1
            yield _tabular(row, values, mapping if dataset else None)


def _check_columns(names: Iterable[str], mapping: dict[str, str]) -> tuple[str, ...]:
    columns = tuple(name.strip() for name in names)
    if len(set(columns)) != len(columns):
        raise InputError("a column name appears twice in the header")
    absent = [f"{field}={column}" for field, column in mapping.items() if column not in columns]
    if absent:
        raise InputError(f"--map {', '.join(absent)}: no such column; the columns are {', '.join(columns)}")
    if is_dataset(set(columns), mapping):
        return columns  # a dataset's other columns are kept in metadata.extra
    unknown = [name for name in columns if name not in _COLUMNS]
    if unknown:
        raise InputError(f"unknown column(s) {', '.join(map(repr, unknown))}; the columns are {', '.join(_COLUMNS)}")
    missing = [name for name in ("question", "answer") if name not in columns]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)}: every record needs a question and an answer")
    if len(set(columns)) != len(columns):
        raise InputError("a column name appears twice in the header")
    if "metadata" in columns and any(name in columns for name in _METADATA_COLUMNS):
        raise InputError("give the metadata either as one JSON column 'metadata' or as columns "
                         f"{', '.join(_METADATA_COLUMNS)}, not both")
    return columns


def _tabular(line: int, row: dict[str, Any], mapping: dict[str, str] | None = None) -> NumberedRun | RecordError:
    """A CSV or Parquet row as a record: empty optional cells are absent, JSON cells parsed;
    with a mapping, a dataset's row mapped to the record."""
    if mapping is not None:
        mapped = dataset_record(row, mapping)
        given = {c: row[c] for c in _METADATA_COLUMNS if c in row and row[c] not in (None, "")}
        if given:
            mapped["metadata"] = {**mapped.get("metadata", {}), **given}
        return _validated(line, mapped)
    record: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    for column, value in row.items():
        blank = value is None or (isinstance(value, str) and not value.strip())
        if value is None or (blank and column not in ("question", "answer")):
            continue  # absent; an empty question or answer cell goes on to the schema as it is
        if column in ("contexts", "metadata") and isinstance(value, str):
            value, problem = _parse_json(value)
            if problem is not None:
                return RecordError(line, f"column {column} is not valid JSON: {problem}")
        if column in _METADATA_COLUMNS:
            metadata[column] = value
        else:
            record[column] = value
    if metadata:
        record["metadata"] = metadata
    return _validated(line, record)
