"""Turn uploaded or found files into source documents, saying why any input was skipped."""

from __future__ import annotations

import codecs
import io
import json
import math
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from bs4 import BeautifulSoup, CData, NavigableString, Tag
from bs4.exceptions import ParserRejectedMarkup
from pypdf import PdfReader

from services.retrieval.text import unstorable_char

SUPPORTED_SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".jsonl")
DEFAULT_MAX_BYTES = 20_000_000

_MAX_TXT_TITLE_CHARS = 120
# <title> is read separately; the rest never shows on the page.
_HIDDEN_TAGS = frozenset({"script", "style", "noscript", "template", "head", "title"})
_BLOCK_TAGS = frozenset(
    "address article aside blockquote br caption dd details div dl dt fieldset figcaption "
    "figure footer form h1 h2 h3 h4 h5 h6 header hr li main nav ol p pre section summary "
    "table td th tr ul".split()
)
_MD_H1 = re.compile(r"^ {0,3}#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_MD_FENCE = re.compile(r"^ {0,3}(```|~~~)")
# Document ids sit in a unique btree index, whose rows PostgreSQL caps at about 2,700 bytes.
MAX_ID_BYTES = 2_000
_SURROGATE = re.compile(r"[\ud800-\udfff]")


@dataclass(frozen=True)
class SourceDocument:
    """One document ready for chunking; `external_id` stays stable across re-ingests."""

    external_id: str
    title: str
    text: str
    source: str
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SkippedInput:
    """A file (or one JSONL line) that was not ingested, with what to do about it."""

    source: str
    reason: str


@dataclass(frozen=True)
class ParsedFile:
    """Everything one file produced: documents, and whatever was skipped."""

    documents: tuple[SourceDocument, ...]
    skipped: tuple[SkippedInput, ...]


class _Skip(Exception):
    """Raised inside a parser to turn the whole file (or one JSONL line) into a skip."""


def parse_file(name: str, data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ParsedFile:
    """Parse one file's bytes; bad input never raises, it comes back as a SkippedInput."""
    try:
        return _parse(name, data, max_bytes)
    except _Skip as skip:
        return _skipped(name, str(skip))


def _skipped(name: str, reason: str) -> ParsedFile:
    return ParsedFile((), (SkippedInput(name, reason),))


def iter_paths(paths: Sequence[Path]) -> Iterator[tuple[str, Path]]:
    """Yield (name, path) per file: a given file by its bare name, files under a given
    directory by their posix path relative to it, depth-first in name order. Hidden entries
    are skipped; symlinked directories are not followed (they can loop) but yielded, like
    missing paths and unreadable directories, so `parse_paths` can say why."""
    for given in map(Path, paths):
        if not given.is_dir():
            yield given.name, given
            continue
        stack = [given]
        while stack:
            path = stack.pop()
            name = given.name if path is given else path.relative_to(given).as_posix()
            try:
                if path is not given and (path.is_symlink() or not path.is_dir()):
                    yield name, path
                    continue
                with os.scandir(path) as entries:
                    names = sorted(e.name for e in entries if not e.name.startswith("."))
            except OSError:
                yield name, path
                continue
            stack.extend(path / n for n in reversed(names))  # popped back in name order


def parse_paths(paths: Sequence[Path], *, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[ParsedFile]:
    """Yield one ParsedFile per file found under `paths`; never raises for bad input."""
    for name, path in iter_paths(paths):
        yield _parse_path(name, path, max_bytes)


def _parse_path(name: str, path: Path, max_bytes: int) -> ParsedFile:
    try:
        if path.is_dir():
            os.listdir(path)  # only directories that could not be walked get here
            return _skipped(name, "a symbolic link to a directory; links are not followed")
        # Check the cheap things before reading a possibly huge file into memory.
        if (reason := _precheck(name, path.stat().st_size, max_bytes)) is not None:
            return _skipped(name, reason)
        return parse_file(name, path.read_bytes(), max_bytes=max_bytes)
    except FileNotFoundError:
        return _skipped(name, "no such file or directory")
    except OSError as exc:
        return _skipped(name, f"could not read it: {(exc.strerror or str(exc)).lower()}")


def _precheck(name: str, size: int, max_bytes: int) -> str | None:
    # The name is the document id: it must be storable (a name read from disk may hold
    # undecodable bytes, which Python keeps as unpaired surrogates).
    if (problem := unstorable_char(name)) is not None:
        return f"the file name contains {problem}; rename the file"
    if len(name.encode()) > MAX_ID_BYTES:
        return f"the file name is {len(name.encode()):,} bytes long, over the {MAX_ID_BYTES:,}-byte limit; shorten it"
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        shown = f"'{suffix}'" if suffix else "(no extension)"
        return f"unsupported file type {shown} (supported: {', '.join(SUPPORTED_SUFFIXES)})"
    if size > max_bytes:
        return f"file is {size / 1e6:.1f} MB, over the {max_bytes / 1e6:.1f} MB limit"
    if size == 0:
        return "empty file"
    return None


def _parse(name: str, data: bytes, max_bytes: int) -> ParsedFile:
    if (reason := _precheck(name, len(data), max_bytes)) is not None:
        raise _Skip(reason)
    suffix, stem = PurePosixPath(name).suffix.lower(), PurePosixPath(name).stem
    if suffix == ".pdf":
        title, body, metadata = _pdf_text(data)
    else:
        text = _decode(data).replace("\r\n", "\n")
        if not text.strip():
            raise _Skip("no text found")
        if suffix == ".jsonl":
            return _parse_jsonl(name, text)
        text = text.replace("\r", "\n")
        if suffix in (".html", ".htm"):
            title, body, metadata = *_html_text(text), {"format": "html"}
        elif suffix in (".md", ".markdown"):
            title, body, metadata = _markdown_title(text), text, {"format": "markdown"}
        else:
            first = next(line.strip() for line in text.split("\n") if line.strip())
            title = first if len(first) <= _MAX_TXT_TITLE_CHARS else ""
            body, metadata = text, {"format": "text"}
        if not body.strip():
            raise _Skip("no text found")
    document = SourceDocument(name, title or stem, body, name, metadata)
    return ParsedFile((document,), ())


def _decode(data: bytes) -> str:
    if b"\x00" in data:
        utf16 = data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
        hint = " (it looks like UTF-16; re-save the file as UTF-8)" if utf16 else ""
        raise _Skip(f"binary content, not a text file{hint}")
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = bom + exc.start
        raise _Skip(f"not valid UTF-8 (first bad byte at offset {offset}); re-save the file as UTF-8") from None


def _markdown_title(text: str) -> str:
    in_fence = False
    for line in text.split("\n"):
        if _MD_FENCE.match(line):
            in_fence = not in_fence  # a "# comment" in a code block is not a heading
        elif not in_fence and (match := _MD_H1.match(line)):
            return match.group(1).strip()
    return ""


def _html_text(html: str) -> tuple[str, str]:
    try:
        soup = BeautifulSoup(html, "html.parser")
    except (ParserRejectedMarkup, RecursionError) as exc:  # bs4 builds iteratively; a guard
        raise _Skip(f"could not parse HTML: {_short(exc)}") from exc
    heading = soup.title or soup.find("h1")
    title = " ".join(heading.get_text(" ").split()) if heading else ""
    # An explicit stack rather than recursion: pages nest tags tens of thousands deep.
    parts: list[str] = []
    stack: list[Any] = [soup]
    while stack:
        node = stack.pop()
        if node is None:  # marks the end of a block element
            parts.append("\n")
        elif isinstance(node, Tag):
            if node.name in _HIDDEN_TAGS:
                continue
            if node.name in _BLOCK_TAGS:
                parts.append("\n")
                stack.append(None)
            stack.extend(reversed(node.contents))
        elif type(node) is NavigableString or type(node) is CData:
            parts.append(node)  # comments, doctypes and script/style strings are skipped
    # HTML collapses whitespace; each block becomes one paragraph.
    lines = (" ".join(line.split()) for line in "".join(parts).split("\n"))
    return title, "\n\n".join(line for line in lines if line)


def _pdf_text(data: bytes) -> tuple[str, str, dict[str, Any]]:
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not _opens_without_password(reader):
            raise _Skip("encrypted PDF; save a copy without a password and upload that")
        pages = [_storable_pdf_text(page.extract_text() or "") for page in reader.pages]
        title = _storable_pdf_text(str((reader.metadata.title if reader.metadata else None) or "")).strip()
    except _Skip:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf raises many types on malformed files
        raise _Skip(f"could not read PDF: {_short(exc)}") from exc
    body = "\n\n".join(page.strip() for page in pages if page.strip())
    if not body:
        raise _Skip("no extractable text (scanned PDF? run OCR first)")
    return title, body, {"format": "pdf", "pages": len(pages)}


def _storable_pdf_text(text: str) -> str:
    """Extracted PDF text without what the store cannot hold: NULs (an extraction artefact) are
    dropped, unpaired surrogates become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text.replace("\x00", ""))


def _opens_without_password(reader: PdfReader) -> bool:
    try:
        return bool(reader.decrypt(""))
    except Exception:  # noqa: BLE001 - e.g. AES without the crypto extra: still locked
        return False


def _parse_jsonl(name: str, text: str) -> ParsedFile:
    documents: list[SourceDocument] = []
    skipped: list[SkippedInput] = []
    first_line: dict[str, int] = {}
    # split("\n"), not splitlines(): JSON strings may hold raw U+2028 and friends.
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            doc_id, title, body, extra = _jsonl_record(line)
            if doc_id in first_line:
                raise _Skip(f"duplicate _id {doc_id!r} (first used on line {first_line[doc_id]}); kept the first")
        except _Skip as bad:
            skipped.append(SkippedInput(f"{name}:{lineno}", f"line {lineno}: {bad}"))
            continue
        first_line[doc_id] = lineno
        metadata = {"format": "jsonl", "line": lineno, **extra}  # the file's own keys win
        documents.append(SourceDocument(doc_id, title or doc_id, body, name, metadata))
    return ParsedFile(tuple(documents), tuple(skipped))


def _jsonl_record(line: str) -> tuple[str, str, str, dict[str, Any]]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise _Skip(f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    except ValueError as exc:  # e.g. an integer longer than Python will convert
        raise _Skip(f"invalid JSON ({_short(exc)})") from None
    except RecursionError:
        raise _Skip("invalid JSON (nested too deeply)") from None
    if not isinstance(record, dict):
        raise _Skip(f"expected a JSON object, got {_json_type(record)}")
    doc_id, body = record.get("_id"), record.get("text")
    title = "" if record.get("title") is None else record["title"]
    extra = {} if record.get("metadata") is None else record["metadata"]
    if doc_id is None or body is None:
        raise _Skip(f'missing "{"_id" if doc_id is None else "text"}"')
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
        raise _Skip(f'"_id" must be a string or a whole number, not {_json_type(doc_id)}')
    for key, value, wanted in (("text", body, str), ("title", title, str), ("metadata", extra, dict)):
        if not isinstance(value, wanted):
            expected = "an object" if wanted is dict else "a string"
            raise _Skip(f'"{key}" must be {expected}, not {_json_type(value)}')
    if not str(doc_id).strip() or not body.strip():
        raise _Skip(f'empty "{"text" if str(doc_id).strip() else "_id"}"')
    if (problem := _unstorable({"_id": doc_id, "text": body, "title": title, "metadata": extra})) is not None:
        raise _Skip(problem)
    if len(str(doc_id).encode()) > MAX_ID_BYTES:
        raise _Skip(f'"_id" is {len(str(doc_id).encode()):,} bytes long, over the {MAX_ID_BYTES:,}-byte limit')
    return str(doc_id), title.strip(), body, extra


def _unstorable(fields: dict[str, Any]) -> str | None:
    """Why a record cannot be stored as given: a NUL or unpaired surrogate in any string (keys
    included), or NaN / Infinity, which jsonb has no way to hold. Iterative: metadata nests deep."""
    for key, value in fields.items():
        stack = [value]
        while stack:
            item = stack.pop()
            problem = None
            if isinstance(item, str):
                problem = unstorable_char(item)
            elif isinstance(item, float) and not math.isfinite(item):
                problem = f"the number {item}, which JSON storage cannot hold"
            elif isinstance(item, dict):
                stack.extend(item)
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
            if problem is not None:
                return f'"{key}" contains {problem}; remove it'
    return None


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "true/false"
    names = {dict: "an object", list: "an array", str: "a string", int: "a number", float: "a decimal number"}
    return names.get(type(value), "null")


def _short(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:160] if lines else type(exc).__name__
