"""Turn uploaded or found files into source documents, saying why any input was skipped."""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any

from services.corpus.extractors import (
    SkipError,
    html_text,
    jsonl_record,
    markdown_title,
    pdf_text,
    text_title,
    too_long_for_an_id,
)
from services.retrieval.text import unstorable_char

SUPPORTED_SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".jsonl")
DEFAULT_MAX_BYTES = 20_000_000


@dataclass(frozen=True)
class SourceDocument:
    """One document ready for chunking; `external_id` stays stable across re-ingests.

    `source` names the input as the user gave it; `origin` is where the document was read
    from on disk (the file's absolute path, plus `#<_id>` for a JSONL record), "" when that
    is not known (an upload). Together with the id it is what tells two documents apart.
    """

    external_id: str
    title: str
    text: str
    source: str
    metadata: dict[str, Any] = field(default_factory=dict)
    origin: str = ""


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


def parse_file(name: str, data: bytes, *, max_bytes: int = DEFAULT_MAX_BYTES) -> ParsedFile:
    """Parse one file's bytes; bad input never raises, it comes back as a SkippedInput."""
    try:
        return _parse(name, data, max_bytes)
    except SkipError as skip:
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


def parse_paths(paths: Sequence[Path], *, max_bytes: int = DEFAULT_MAX_BYTES,
                follow_links: bool = False) -> Iterator[ParsedFile]:
    """Yield one ParsedFile per file found under `paths`; never raises for bad input.

    A symbolic link to a file found inside a given directory is skipped unless `follow_links`:
    it may point anywhere (a root run once ingested the system's password file). A link given
    by name is followed, as the user asked for it.
    """
    given = set(map(Path, paths))
    for name, path in iter_paths(paths):
        if not follow_links and path not in given and path.is_symlink() and not path.is_dir():
            yield _skipped(name, "a symbolic link; links are not followed (--follow-links follows them)")
            continue
        parsed = _parse_path(name, path, max_bytes)
        where = os.path.abspath(path)
        records = PurePosixPath(name).suffix.lower() == ".jsonl"
        located = tuple(replace(doc, origin=f"{where}#{doc.external_id}" if records else where)
                        for doc in parsed.documents)
        yield ParsedFile(located, parsed.skipped)


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
    if (problem := too_long_for_an_id("the file name", name)) is not None:
        return f"{problem}; shorten it"
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
        raise SkipError(reason)
    suffix, stem = PurePosixPath(name).suffix.lower(), PurePosixPath(name).stem
    if suffix == ".pdf":
        title, body, metadata = pdf_text(data)
    else:
        text = _decode(data).replace("\r\n", "\n")
        if not text.strip():
            raise SkipError("no text found")
        if suffix == ".jsonl":
            return _parse_jsonl(name, text)
        text = text.replace("\r", "\n")
        if suffix in (".html", ".htm"):
            title, body, metadata = *html_text(text), {"format": "html"}
        elif suffix in (".md", ".markdown"):
            title, body, metadata = markdown_title(text), text, {"format": "markdown"}
        else:
            title, body, metadata = text_title(text), text, {"format": "text"}
        if not body.strip():
            raise SkipError("no text found")
    document = SourceDocument(name, title or stem, body, name, metadata)
    return ParsedFile((document,), ())


def _decode(data: bytes) -> str:
    if b"\x00" in data:
        utf16 = data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
        hint = " (it looks like UTF-16; re-save the file as UTF-8)" if utf16 else ""
        raise SkipError(f"binary content, not a text file{hint}")
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        offset = bom + exc.start
        raise SkipError(f"not valid UTF-8 (first bad byte at offset {offset}); re-save the file as UTF-8") from None


def _parse_jsonl(name: str, text: str) -> ParsedFile:
    documents: list[SourceDocument] = []
    skipped: list[SkippedInput] = []
    first_line: dict[str, int] = {}
    # split("\n"), not splitlines(): JSON strings may hold raw U+2028 and friends.
    for lineno, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            doc_id, title, body, extra = jsonl_record(line)
            if doc_id in first_line:
                raise SkipError(f"duplicate _id {doc_id!r} (first used on line {first_line[doc_id]}); kept the first")
        except SkipError as bad:
            skipped.append(SkippedInput(f"{name}:{lineno}", f"line {lineno}: {bad}"))
            continue
        first_line[doc_id] = lineno
        metadata = {"format": "jsonl", "line": lineno, **extra}  # the file's own keys win
        documents.append(SourceDocument(doc_id, title or doc_id, body, name, metadata))
    return ParsedFile(tuple(documents), tuple(skipped))
