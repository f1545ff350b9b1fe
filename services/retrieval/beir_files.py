"""Read BEIR queries and qrels files, dropping what cannot be evaluated and saying so line by line."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from services.errors import InputError
from services.retrieval.search import clean_query
from services.settings import get_settings

MAX_NAMED = 10  # ids named in one warning; the rest are counted


@dataclass(frozen=True)
class EvalQuery:
    query_id: str
    text: str


@dataclass(frozen=True)
class QueryFile:
    """The usable queries of a file, in file order, and one warning per line left out."""

    queries: list[EvalQuery]
    warnings: list[str] = field(default_factory=list)


def read_queries(path: Path, *, strict: bool = True) -> QueryFile:
    """BEIR queries.jsonl. A line that is not a query is an InputError naming it (`strict`) or a
    warning; a repeated id (the first is kept) and a text that cannot be searched are warnings."""
    queries: list[EvalQuery] = []
    warnings: list[str] = []
    first_line: dict[str, int] = {}
    max_chars = get_settings().max_query_chars
    # split("\n"), not splitlines(): JSON strings may hold raw U+2028 and friends.
    for lineno, line in enumerate(_read_text(path).split("\n"), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            query_id, text = obj["_id"], obj["text"]
            if not isinstance(query_id, (str, int)) or isinstance(query_id, bool) or not isinstance(text, str):
                raise TypeError("_id must be a string or number and text a string")
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            message = f"{path}: line {lineno} is not a BEIR query ({{\"_id\", \"text\"}}): {exc}"
            if strict:
                raise InputError(message) from exc
            warnings.append(f"{message}; left out")
            continue
        query_id = str(query_id)
        if query_id in first_line:
            warnings.append(f"{path}: line {lineno}: query id {query_id!r} repeats line {first_line[query_id]}; "
                            "kept the first")
            continue
        first_line[query_id] = lineno
        try:
            queries.append(EvalQuery(query_id, clean_query(text, max_chars=max_chars)))
        except InputError as exc:
            warnings.append(f"{path}: line {lineno}: query {query_id!r} cannot be searched ({exc}); left out")
    return QueryFile(queries, warnings)


def load_queries(path: Path) -> list[EvalQuery]:
    """The usable queries of a BEIR queries.jsonl (see `read_queries`)."""
    return read_queries(path).queries


def read_qrels(path: Path) -> tuple[dict[str, dict[str, int]], list[str]]:
    """BEIR qrels TSV (query-id, corpus-id, score), header optional; a repeated pair is a warning."""
    qrels: dict[str, dict[str, int]] = {}
    first_line: dict[tuple[str, str], int] = {}
    warnings: list[str] = []
    for lineno, row in enumerate(csv.reader(io.StringIO(_read_text(path), newline=""), delimiter="\t"), 1):
        if not row or (lineno == 1 and row[0] == "query-id"):
            continue
        try:
            query_id, doc_id, score = row[0], row[1], int(row[2])
        except (IndexError, ValueError) as exc:
            raise InputError(f"{path}: line {lineno} is not 'query-id<TAB>corpus-id<TAB>score'") from exc
        if (query_id, doc_id) in first_line:
            warnings.append(f"{path}: line {lineno}: query {query_id!r} judges document {doc_id!r} again "
                            f"(first on line {first_line[query_id, doc_id]}); kept the first")
            continue
        first_line[query_id, doc_id] = lineno
        qrels.setdefault(query_id, {})[doc_id] = score
    return qrels, warnings


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """The judgements of a BEIR qrels TSV (see `read_qrels`)."""
    return read_qrels(path)[0]


def named(ids: list[str]) -> str:
    """Ids for a warning: all of them up to MAX_NAMED, then how many more."""
    shown = ", ".join(map(repr, ids[:MAX_NAMED]))
    return shown + (f" and {len(ids) - MAX_NAMED} more" if len(ids) > MAX_NAMED else "")


def _read_text(path: Path) -> str:
    try:
        # utf-8-sig: a byte-order mark would otherwise become part of the first id
        return Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 text (bad byte at offset {exc.start}); re-save it as UTF-8") from exc
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
