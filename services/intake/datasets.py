"""Rows of the evaluation datasets teams already keep, mapped to our record: RAGAS
(`user_input`, `retrieved_contexts`, `response`, `reference`), Phoenix and Langfuse dataset
exports (`input`, `output`, `expected_output`, `metadata`), and any other names given as
`--map question=col,answer=col2,...`.

A row is a dataset row when it has a column only a dataset uses, or a mapping is given;
then columns the record has no field for are kept in `metadata.extra`, not refused. A
record-shaped row (our own field names only) is left to the schema, unknown fields and all.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

from services.errors import InputError

FIELDS = ("question", "answer", "contexts", "reference", "trace_id")
# Where each field is found when no mapping names it, first match wins. RAGAS writes
# user_input / response / retrieved_contexts / reference (older versions question / answer /
# contexts / ground_truth(s)); Phoenix datasets input / output; Langfuse input /
# expected_output (or expectedOutput) and output in its run exports.
ALIASES: dict[str, tuple[str, ...]] = {
    "question": ("question", "user_input", "query", "input"),
    "answer": ("answer", "response", "output", "generated_answer"),
    "contexts": ("contexts", "retrieved_contexts", "context"),
    "reference": ("reference", "ground_truth", "ground_truths", "expected_output", "expectedOutput", "reference_answer"),
    "trace_id": ("trace_id", "source_trace_id", "sourceTraceId"),
}
_OURS = frozenset({"question", "answer", "contexts", "trace_id", "metadata", "app", "model", "user", "timestamp"})
DATASET_COLUMNS = frozenset(name for names in ALIASES.values() for name in names) - _OURS
# Inside a Phoenix or Langfuse input/output object, the keys that hold the text.
_TEXT_KEYS = {"question": ("question", "query", "input", "user_input", "text"),
              "answer": ("answer", "output", "response", "text", "content"),
              "reference": ("reference", "answer", "output", "expected_output", "text")}


def parse_map(spec: str | None) -> dict[str, str]:
    """`question=col,answer=col2` as {field: column}; InputError naming what is wrong."""
    mapping: dict[str, str] = {}
    for part in (spec or "").split(","):
        if not part.strip():
            continue
        field, sep, column = (piece.strip() for piece in part.partition("="))
        if not sep or not column:
            raise InputError(f"--map takes FIELD=COLUMN pairs separated by commas; {part.strip()!r} is not one")
        if field not in FIELDS:
            raise InputError(f"--map: {field!r} is not a record field; map one of: {', '.join(FIELDS)}")
        mapping[field] = column
    return mapping


def is_dataset(columns: set[str] | frozenset[str], mapping: Mapping[str, str]) -> bool:
    return bool(mapping) or bool(columns & DATASET_COLUMNS)


def dataset_record(row: Mapping[str, Any], mapping: Mapping[str, str]) -> dict[str, Any]:
    """A dataset row as a record (to be validated by the schema); the rest in metadata.extra."""
    used: set[str] = set()
    record: dict[str, Any] = {}
    for field in FIELDS:
        column = mapping.get(field) or next((c for c in ALIASES[field] if row.get(c) not in (None, "")), None)
        if column is None or column not in row:
            continue
        used.add(column)
        value = row[column]
        if field == "contexts":
            record[field] = _contexts(value)
        elif field == "trace_id":
            record[field] = str(value) if value is not None else None
        else:
            record[field] = _text(value, _TEXT_KEYS[field])
    extra = {k: _jsonable(v) for k, v in row.items() if k not in used and k not in _OURS and v not in (None, "")}
    metadata = row.get("metadata")
    if isinstance(metadata, str):
        metadata = _loads(metadata)
    if isinstance(metadata, dict) and metadata:
        extra["metadata"] = metadata
    if extra:
        record["metadata"] = {"extra": extra}
    return record


def _text(value: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(value, str) and value.strip().startswith("{"):
        value = _loads(value)
    if isinstance(value, dict):
        return next((value[k] for k in keys if isinstance(value.get(k), str)), value)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return value[0]  # RAGAS ground_truths: a list of one
    return value  # anything else goes to the schema, which says what is wrong with it


def _contexts(value: Any) -> Any:
    if isinstance(value, str):
        value = _loads(value)
    if hasattr(value, "tolist"):  # a NumPy array from a Parquet list column
        value = value.tolist()
    return value  # a list of texts is read as contexts by the schema (GivenContext)


def _loads(text: str) -> Any:
    """JSON, or the Python literal pandas writes for a list column (`['a', 'b']`); else the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict | list | str | int | float | bool) or value is None:
        return value
    return str(value)
