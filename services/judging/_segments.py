"""A chunk read as the offline backend quotes it: its sentences and table rows, each in the
form it is quoted in, shown in and matched with."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from services.corpus.chunking import split_sentences
from services.judging._words import WORD
from services.retrieval.text import tokenize

_LEADING_MARKER = re.compile(r"^\s*(?:#{1,6}|[-*+]|\d{1,3}[.)])\s+")
_HEADING = re.compile(r"^\s*#{1,6}\s")
_TABLE_SEPARATOR = re.compile(r"\|(?:\s*:?-{3,}:?\s*\|)+")
# Bold written with underscores ("__note well__"), told from a name written as code
# ("__init__", "aiterator.__anext__", "x.__iadd__(y)"): the markup is never part of a word.
_UNDERSCORE_BOLD = re.compile(r"(?<![\w.])__(?=\S)((?:(?!__).)+?)(?<=\S)__(?![\w.(])")
_MIN_ANSWER_TOKENS = 3
# A question (FAQ headings), a code fence, or a piece of a table cut loose from its rows.
_NOT_A_STATEMENT = re.compile(r"\?\W*$|```|\|[^|]*\|")


@dataclass(frozen=True)
class Segment:
    """One sentence (or table row) of a chunk, in the three forms the backend needs."""

    quote: str  # exactly as it appears in the chunk text
    display: str  # as it reads inside an answer
    scoring: str  # markup-free text that is embedded and matched
    answerable: bool  # a statement worth extracting (not a heading, fragment or separator)
    heading: bool


def clean(text: str) -> str:
    """Text without Markdown markup: what is embedded and matched."""
    text = _LEADING_MARKER.sub("", text)
    text = _UNDERSCORE_BOLD.sub(_unbold, text)
    text = text.replace("**", "").replace("`", "").replace("|", " ")
    return " ".join(text.split())


def _unbold(match: re.Match[str]) -> str:
    inner = match.group(1)
    return inner if not inner.isidentifier() else match.group(0)  # "__init__" stays a name


def facts(text: str) -> frozenset[str]:
    """Numbers and codes (words with a digit, upper-case words): what makes two similar
    sentences, like two rows of one table, say different things."""
    return frozenset(w for w in WORD.findall(text) if any(c.isdigit() for c in w) or (w.isupper() and len(w) > 1))


@lru_cache(maxsize=4096)
def segment_chunk(text: str) -> tuple[Segment, ...]:
    """The sentences and table rows of a chunk, in order, each locatable in `text`."""
    segments: list[Segment] = []
    offset = 0
    for is_table, run in _runs(text):
        start = text.index(run, offset)
        found = _table_rows(run) if is_table else _prose(run)
        for quote, display in found:
            scoring = clean(display)
            tokens = tokenize(scoring)
            letters = sum(ch.isalnum() for ch in scoring)
            heading = bool(_HEADING.match(quote))
            answerable = (not heading and len(tokens) >= _MIN_ANSWER_TOKENS
                          and letters >= 0.5 * len(scoring.replace(" ", "")) and not _NOT_A_STATEMENT.search(
                              display if is_table else quote))
            segments.append(Segment(quote, display, scoring, answerable, heading))
        offset = start + len(run)
    return tuple(segments)


def _runs(text: str) -> list[tuple[bool, str]]:
    """Consecutive table lines and consecutive other lines, as contiguous slices of `text`."""
    runs: list[tuple[bool, list[str]]] = []
    for line in text.splitlines(keepends=True):
        is_table = line.lstrip().startswith("|")
        if runs and runs[-1][0] == is_table:
            runs[-1][1].append(line)
        else:
            runs.append((is_table, [line]))
    return [(is_table, "".join(lines)) for is_table, lines in runs if "".join(lines).strip()]


def _prose(run: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    cursor, pending = 0, ""
    for sentence in (s for block in _blocks(run) for s in split_sentences(block)):
        # pysbd ends a sentence at the "." inside `$INTP_CFG.$MAX_CALL_DEPTH`: rejoin code spans.
        pending = f"{pending} {sentence}" if pending else sentence
        if pending.count("`") % 2:
            continue
        span = _locate(pending, run, cursor)
        if span is not None:  # pysbd changed the text: a sentence we cannot quote is not used
            quote = run[span[0]:span[1]]
            found.append((quote, _LEADING_MARKER.sub("", " ".join(quote.split()))))
            cursor = span[1]
        pending = ""
    return found


# A line that goes on with the sentence above it: in lower case, or with a parenthesis opening on
# a word ("(complex numbers can be formed ...)" after "There are no complex literals"; 36 such
# wraps in python-reference and numpy-api), not a list's "(a)" or "(ii)".
_GOES_ON = re.compile(r"[a-z]|\((?![a-z]\)|[ivx]+\))[a-z]")


def _blocks(run: str) -> list[str]:
    """Lines, rejoined only where a hard wrap continues a sentence: chunking joins the blocks
    of a chunk with a newline, so a line break there ends a list item or paragraph."""
    blocks: list[str] = []
    for line in run.splitlines():
        if blocks and _GOES_ON.match(line) and not re.search(r"[.!?:]\W*$", blocks[-1]):
            blocks[-1] += " " + line
        else:
            blocks.append(line)
    return blocks


def _locate(sentence: str, text: str, start: int) -> tuple[int, int] | None:
    index = text.find(sentence, start)
    if index >= 0:
        return index, index + len(sentence)
    # split_sentences normalizes whitespace and we rejoin its pieces with a space: the
    # chunk may hard-wrap inside a sentence, or have no space where pysbd cut.
    match = re.compile(r"\s*".join(map(re.escape, sentence.split()))).search(text, start)
    return match.span() if match else None


def _table_rows(run: str) -> list[tuple[str, str]]:
    """Rows of a Markdown table (one row per line, or rows joined on one line by chunking).

    A row reads "Header: value; Header: value" in an answer, so it stays meaningful alone.
    """
    separator = _TABLE_SEPARATOR.search(run)
    columns = separator.group(0).count("|") - 1 if separator else 0
    pattern = re.compile(rf"\|(?:[^|\n]*\|){{{columns}}}" if columns else r"\|[^\n]*\|")
    header: list[str] = []
    rows: list[tuple[str, str]] = []
    for match in pattern.finditer(run):
        cells = [c.strip() for c in match.group(0).strip().strip("|").split("|")]
        if all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
            continue
        if separator and match.end() <= separator.start():
            header = cells
            continue
        pairs = [f"{h}: {v}" if h else v for h, v in zip(header or [""] * len(cells), cells, strict=False) if v]
        rows.append((match.group(0), "; ".join(pairs)))
    return rows
