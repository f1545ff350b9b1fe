"""Read one input per format: title and text of plain text, Markdown, HTML and PDF, the fields of a JSONL line."""

from __future__ import annotations

import io
import json
import math
import re
from typing import Any

from bs4 import BeautifulSoup, CData, NavigableString, Tag
from bs4.exceptions import ParserRejectedMarkup
from pypdf import PdfReader

from services.retrieval.text import unstorable_char

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
_MAX_ID_BYTES = 2_000
_SURROGATE = re.compile(r"[\ud800-\udfff]")


class SkipError(Exception):
    """Raised while reading an input to turn the whole file (or one JSONL line) into a skip; says why."""


def too_long_for_an_id(what: str, value: str) -> str | None:
    """Why `value` cannot be a document id because of its length, or None if it can."""
    size = len(value.encode())
    return f"{what} is {size:,} bytes long, over the {_MAX_ID_BYTES:,}-byte limit" if size > _MAX_ID_BYTES else None


def text_title(text: str) -> str:
    """A plain-text file's first non-blank line, if it is short enough to be a title."""
    first = next(line.strip() for line in text.split("\n") if line.strip())
    return first if len(first) <= _MAX_TXT_TITLE_CHARS else ""


def markdown_title(text: str) -> str:
    in_fence = False
    for line in text.split("\n"):
        if _MD_FENCE.match(line):
            in_fence = not in_fence  # a "# comment" in a code block is not a heading
        elif not in_fence and (match := _MD_H1.match(line)):
            return match.group(1).strip()
    return ""


def html_text(html: str) -> tuple[str, str]:
    try:
        soup = BeautifulSoup(html, "html.parser")
    except (ParserRejectedMarkup, RecursionError) as exc:  # bs4 builds iteratively; a guard
        raise SkipError(f"could not parse HTML: {_short(exc)}") from exc
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


def pdf_text(data: bytes) -> tuple[str, str, dict[str, Any]]:
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not _opens_without_password(reader):
            raise SkipError("encrypted PDF; save a copy without a password and upload that")
        pages = [_storable_pdf_text(page.extract_text() or "") for page in reader.pages]
        title = _storable_pdf_text(str((reader.metadata.title if reader.metadata else None) or "")).strip()
    except SkipError:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf raises many types on malformed files
        raise SkipError(f"could not read PDF: {_short(exc)}") from exc
    body = "\n\n".join(page.strip() for page in pages if page.strip())
    if not body:
        raise SkipError("no extractable text (scanned PDF? run OCR first)")
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


def jsonl_record(line: str) -> tuple[str, str, str, dict[str, Any]]:
    """One JSONL line's _id, title, text and metadata, each checked to be present, typed and storable."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise SkipError(f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    except ValueError as exc:  # e.g. an integer longer than Python will convert
        raise SkipError(f"invalid JSON ({_short(exc)})") from None
    except RecursionError:
        raise SkipError("invalid JSON (nested too deeply)") from None
    if not isinstance(record, dict):
        raise SkipError(f"expected a JSON object, got {_json_type(record)}")
    doc_id, body = record.get("_id"), record.get("text")
    title = "" if record.get("title") is None else record["title"]
    extra = {} if record.get("metadata") is None else record["metadata"]
    if doc_id is None or body is None:
        raise SkipError(f'missing "{"_id" if doc_id is None else "text"}"')
    if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
        raise SkipError(f'"_id" must be a string or a whole number, not {_json_type(doc_id)}')
    for key, value, wanted in (("text", body, str), ("title", title, str), ("metadata", extra, dict)):
        if not isinstance(value, wanted):
            expected = "an object" if wanted is dict else "a string"
            raise SkipError(f'"{key}" must be {expected}, not {_json_type(value)}')
    if not str(doc_id).strip() or not body.strip():
        raise SkipError(f'empty "{"text" if str(doc_id).strip() else "_id"}"')
    if (problem := _unstorable({"_id": doc_id, "text": body, "title": title, "metadata": extra})) is not None:
        raise SkipError(problem)
    if (problem := too_long_for_an_id('"_id"', str(doc_id))) is not None:
        raise SkipError(problem)
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
