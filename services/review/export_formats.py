"""Write export records as CSV, JSONL or Parquet, atomically, and read any of the three back.

Lists and dicts (citations, components, route, iterations, review history, the metadata of
runs from other systems) are JSON strings in CSV and Parquet cells -- simple, lossless, and
readable by any tool -- and plain JSON in JSONL. `read_export` turns any of the three back
into the records `export_records` returned.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import stat
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.parquet as pq

from services.errors import InputError
from services.review.export import FIELDS

FORMATS = ("csv", "jsonl", "parquet")
# Columns added after exports were first written: a file without one reads as if it were empty.
ADDED_COLUMNS: dict[str, object] = {"contexts": []}


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r}; use one of: {', '.join(FORMATS)}")
    return fmt


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _to_cells(record: dict[str, Any]) -> dict[str, Any]:
    """Nested fields as JSON strings; scalars unchanged."""
    return {name: _dumps(record[name]) if kind == "json" else record[name] for name, kind in FIELDS.items()}


# A spreadsheet runs a CSV cell as a formula when its first character after any spaces and
# control characters is one of these (OWASP "CSV injection": " =1+1", "\n=1+1" and a leading
# no-break space all count); questions, answers and comments are typed by people. Such a
# text cell, and any cell starting with a tab or a line break, is written with a leading
# apostrophe, which spreadsheets show as plain text. Cells already starting with an
# apostrophe get one too, so reading strips exactly one and round-trips.
_FORMULA_CHARS = ("=", "+", "-", "@")
_RISKY_FIRST = ("\t", "\r", "\n", "'")
# Whitespace (Unicode's, so the no-break space too), C0/C1 controls, and the invisible
# format characters a spreadsheet skips the same way.
_LEADING_BLANKS = re.compile(r"^[\s\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202f\u2060\ufeff]+")


def _needs_quote(value: str) -> bool:
    return value.startswith(_RISKY_FIRST) or _LEADING_BLANKS.sub("", value, count=1).startswith(_FORMULA_CHARS)


def _csv_text(value: str) -> str:
    return "'" + value if _needs_quote(value) else value


def _from_csv_text(value: str) -> str:
    return value[1:] if value.startswith("'") and _needs_quote(value[1:]) else value


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


PARQUET_ROW_GROUP = 1_000  # records a Parquet row group holds: what the writer keeps in memory


def write_records(records: Iterable[dict[str, Any]], fmt: str, handle: BinaryIO) -> int:
    """Write the records to an open binary file as `fmt` (UTF-8 for the text formats, no
    byte-order mark) as they come, holding at most one Parquet row group; the count written."""
    check_format(fmt)
    count = 0
    if fmt == "jsonl":
        for record in records:
            handle.write((_dumps(record) + "\n").encode("utf-8"))
            count += 1
        return count
    if fmt == "csv":
        text = io.TextIOWrapper(handle, encoding="utf-8", newline="", write_through=True)
        try:
            writer = csv.writer(text)
            writer.writerow(FIELDS)
            for record in records:
                cells = _to_cells(record)
                # repr keeps every float digit; None is an empty cell (nullable fields only).
                writer.writerow(["" if v is None else repr(v) if isinstance(v, float) else
                                 _csv_text(v) if isinstance(v, str) else v for v in cells.values()])
                count += 1
        finally:
            text.detach()  # the caller's handle stays open
        return count
    with pq.ParquetWriter(handle, _ARROW_SCHEMA) as writer:
        for group in _groups(records, PARQUET_ROW_GROUP):
            writer.write_table(pa.Table.from_pylist([_to_cells(r) for r in group], schema=_ARROW_SCHEMA))
            count += len(group)
        if not count:  # a file with the schema and no rows, as pq.write_table writes one
            writer.write_table(pa.Table.from_pylist([], schema=_ARROW_SCHEMA))
    return count


def _groups(records: Iterable[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    group: list[dict[str, Any]] = []
    for record in records:
        group.append(record)
        if len(group) == size:
            yield group
            group = []
    if group:
        yield group


def export_bytes(records: Iterable[dict[str, Any]], fmt: str) -> bytes:
    """The records serialized as `fmt`, in memory (a page's download; the CLI streams to a file)."""
    buffer = io.BytesIO()
    write_records(records, fmt, buffer)
    return buffer.getvalue()


def write_export(records: Iterable[dict[str, Any]], fmt: str, destination: Path | BinaryIO) -> int:
    """Write the export as the records come to an open binary file, or to a path (replaced
    atomically, see `write_file`); the count written."""
    check_format(fmt)
    if isinstance(destination, (str, Path)):
        return write_file(Path(destination), lambda handle: write_records(records, fmt, handle))
    return write_records(records, fmt, destination)


def check_target(path: Path) -> os.stat_result | None:
    """What is at `path` now (None: nothing yet), or an InputError when no file can be written there."""
    target = Path(os.path.realpath(path))
    try:
        existing: os.stat_result | None = target.stat()
    except FileNotFoundError:
        existing = None
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from exc
    if existing is not None and stat.S_ISDIR(existing.st_mode):
        raise InputError(f"cannot write {path}: it is a directory; give a file name")
    if existing is not None and not (stat.S_ISREG(existing.st_mode) or stat.S_ISFIFO(existing.st_mode)
                                     or stat.S_ISCHR(existing.st_mode)):
        raise InputError(f"cannot write {path}: it is not a regular file; give a file name")
    if existing is None and not target.parent.is_dir():
        raise InputError(f"cannot write {path}: directory {target.parent} does not exist")
    return existing


def write_file(path: Path, data: bytes | Callable[[BinaryIO], int]) -> int:
    """Replace a regular file atomically, keeping its mode; write through anything else that takes bytes.

    `data` is the bytes, or a function writing them to the open file as they are made (an
    export of a million runs) and returning its count, which is returned (else the byte count).
    A regular file is written through a temporary file in the same directory and renamed over
    it, so a failed export never leaves a half-written file behind. A symlink is followed (the
    file it names is replaced, the link stays); a FIFO or a device (`/dev/null`) is written
    into, since renaming over it would swap it for a regular file.
    """
    existing = check_target(path)
    target = Path(os.path.realpath(path))

    def write(handle: BinaryIO) -> int:
        if callable(data):
            return data(handle)
        handle.write(data)
        return len(data)

    if existing is not None and not stat.S_ISREG(existing.st_mode):  # a FIFO or a device
        try:
            with open(target, "wb") as handle:
                return write(handle)
        except OSError as exc:
            raise InputError(f"cannot write {path}: {exc.strerror or exc}") from exc
    temporary = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
    try:
        with open(temporary, "xb") as handle:
            count = write(handle)
            handle.flush()
            if existing is not None:  # the replaced file's permissions, not the umask's
                os.fchmod(handle.fileno(), stat.S_IMODE(existing.st_mode))
            os.fsync(handle.fileno())
        os.replace(temporary, target)
        return count
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
        return [{name: _from_cell(kind, row[name]) if name in row else _added(name) for name, kind in FIELDS.items()}
                for row in cells]
    except (ValueError, pa.ArrowException) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise InputError(f"not a readable {fmt} export: {exc}") from exc


def _added(name: str) -> Any:
    return json.loads(json.dumps(ADDED_COLUMNS[name]))  # a fresh copy: records must not share a list


def _require_columns(columns: Sequence[str]) -> None:
    missing = [name for name in FIELDS if name not in columns and name not in ADDED_COLUMNS]
    if missing:
        raise InputError(f"not a workbench export: missing columns {', '.join(missing)}")


def _ordered(row: dict[str, Any]) -> dict[str, Any]:
    _require_columns(list(row))
    return {name: row[name] if name in row else _added(name) for name in FIELDS}
