"""Bad uploads, generated: at least 2,000 files through `parse_file` and 2,000 more through
`ingest_uploads`, and not one exception other than a WorkbenchError. Every file is read or
skipped with a reason; what the parser hands on, the store can hold; a batch whose files are all
rejected writes nothing. Each property runs inside a plain test that asserts how many cases it
generated. Hypothesis examples are small on purpose (its buffer is 8 KB): big inputs are built by
repeating a short seed, and the 25 MB / 50,000-deep cases are named ones (test_bad_input_cases.py).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import PurePosixPath

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import text

from services.corpus.extract import SUPPORTED_SUFFIXES, ParsedFile, parse_file
from services.corpus.ingest import ingest_uploads
from services.errors import WorkbenchError
from services.retrieval.text import unstorable_char
from tests.security._support import HOSTILE_STRINGS, MIN_CASES, SLOW_OK, WORDS

CASES: Counter[str] = Counter()
UPLOAD_LIMIT = 4_096  # a small max_upload_bytes, so "over the limit" costs kilobytes, not megabytes


@pytest.fixture(autouse=True, scope="module")
def _report_counts():  # type: ignore[no-untyped-def]
    yield
    print(f"\ngenerated cases: {dict(sorted(CASES.items()))}")  # shown with -s; the tests assert the minimums


# --- strategies: uploads ---------------------------------------------------------------------------

JUNK_SUFFIXES = (".exe", ".docx", ".zip", ".json", ".csv", ".jsonl.gz", ".", "", ". txt", ".md ", ".tx", ".html\x00")
TEXT_SUFFIXES = tuple(s for s in SUPPORTED_SUFFIXES if s != ".pdf")

stems = st.one_of(st.text(max_size=16), st.sampled_from(HOSTILE_STRINGS), st.integers(0, 3000).map(lambda n: "n" * n))


def named(suffixes: tuple[str, ...]) -> st.SearchStrategy[str]:
    return st.tuples(stems, st.sampled_from(suffixes)).map("".join)


def repeated(seed: st.SearchStrategy[bytes], low: int, high: int) -> st.SearchStrategy[bytes]:
    """Data of low..high bytes from a short random seed (big inputs without big examples)."""
    return st.tuples(seed, st.integers(low, high)).map(lambda t: (t[0] * (t[1] // len(t[0]) + 1))[:t[1]])


words = st.lists(st.sampled_from(WORDS), min_size=2, max_size=10).map(" ".join)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=12),
                         st.sampled_from(HOSTILE_STRINGS))
json_values = st.recursive(json_scalars, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids,
                                                                                                   max_size=3), max_leaves=8)
records = st.fixed_dictionaries({}, optional={
    "_id": st.one_of(st.text(max_size=10), st.integers(), json_values, st.sampled_from(HOSTILE_STRINGS)),
    "text": st.one_of(words, st.text(max_size=40), json_values, st.sampled_from(HOSTILE_STRINGS)),
    "title": st.one_of(st.text(max_size=12), json_values),
    "metadata": st.one_of(st.dictionaries(st.text(max_size=6), json_values, max_size=3), json_values),
    "extra": json_values,
})
jsonl_lines = st.one_of(
    records.map(json.dumps),  # escapes: NUL, lone surrogates and NaN arrive as \u0000, \ud800, NaN
    records.map(lambda r: json.dumps(r, ensure_ascii=False)),
    json_values.map(json.dumps),
    st.text(max_size=40),
    st.sampled_from(['{"_id": 1e999, "text": "x"}', '{"_id": "x", "text": "y", "metadata": {"m": Infinity}}',
                     '{"_id": "' + "9" * 5000 + '", "text": "long id"}', "9" * 5000, "[" * 3000 + "]" * 3000,
                     '{"_id": true, "text": "bool id"}', '{"_id": "dup", "text": "first"}', '{"_id": "dup", "text": "again"}',
                     '{"_id": "x", "text": "   "}', "", "   ", "\ufeff{}"]),
)
jsonl = st.tuples(st.lists(jsonl_lines, max_size=6), st.sampled_from(["\n", "\r\n", "\r"])).map(lambda t: t[1].join(t[0]))
html_fragments = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["p", "div", "script", "style", "title", "h1", "table", "td", "br", "noscript", "template", "pre"]).flatmap(
        lambda tag: st.sampled_from([f"<{tag}>", f"</{tag}>", f"<{tag} class='x' onload=\"y\">"])),
    st.sampled_from(["&#0;", "&#xD800;", "&amp", "&#x110000;", "<", ">", "&", "<!DOCTYPE html>", "<![CDATA[x]]>", "<!--",
                     "-->", "<?xml version='1.0'?>", "<svg><script>alert(1)</script></svg>"]),
    st.integers(0, 500).map(lambda n: "<div>" * n + "deep" + "</div>" * n),  # 50,000 deep: a named case
)
html = st.lists(html_fragments, max_size=12).map("".join)
encodings = st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32", "latin-1", "cp1252", "shift_jis"])
text_bytes = st.one_of(
    st.text(max_size=60).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.tuples(st.text(max_size=40), encodings).map(lambda t: t[0].encode(t[1], "replace")),
    st.sampled_from(HOSTILE_STRINGS).map(lambda s: s.encode("utf-8", "surrogatepass")),
)
binary = st.one_of(
    st.binary(max_size=120),
    st.tuples(st.sampled_from([b"%PDF-1.4\n", b"PK\x03\x04", b"\x1f\x8b\x08", b"\xef\xbb\xbf", b"\xff\xfe", b"\x89PNG\r\n"]),
              st.binary(max_size=80)).map(b"".join),
)
any_data = st.one_of(binary, text_bytes, html.map(str.encode), jsonl.map(lambda s: s.encode("utf-8", "surrogatepass")),
                     repeated(st.binary(min_size=1, max_size=8), UPLOAD_LIMIT - 2, UPLOAD_LIMIT + 200),
                     st.sampled_from([b"", b"   ", b"\n\r\n\t ", b"\x00"]))
any_file = st.tuples(named(SUPPORTED_SUFFIXES + JUNK_SUFFIXES), any_data)


def _with_nul(data: bytes) -> bytes:
    return data[: len(data) // 2] + b"\x00" + data[len(data) // 2:]


# Files that must be refused, by construction (each kind has a reason the parser must give).
bad_jsonl_line = st.one_of(st.text(alphabet="{[:,\"x ", min_size=1, max_size=20).filter(lambda s: s.strip() and not _parses(s)),
                           st.sampled_from(['{"text": "no id"}', '{"_id": "x"}', '[1, 2]', '"just a string"', "42",
                                            '{"_id": "n", "text": "nul \\u0000"}', '{"_id": "s", "text": "\\ud800"}',
                                            '{"_id": "m", "text": "t", "metadata": {"k": NaN}}', '{"_id": {}, "text": "t"}',
                                            '{"_id": "x", "text": 5}', '{"_id": "", "text": "t"}', "[" * 5000]))
rejected_file = st.one_of(
    st.tuples(named(JUNK_SUFFIXES).filter(lambda n: PurePosixPath(n).suffix.lower() not in SUPPORTED_SUFFIXES),
              any_data),  # unsupported extension
    st.tuples(named(SUPPORTED_SUFFIXES), st.just(b"")),  # empty
    st.tuples(named(TEXT_SUFFIXES), st.binary(max_size=60).map(_with_nul)),  # binary
    st.tuples(named(TEXT_SUFFIXES), st.text(min_size=1, max_size=30).map(lambda s: s.encode("utf-16"))),  # UTF-16: NULs
    st.tuples(named(TEXT_SUFFIXES), st.text(min_size=1, max_size=30).map(lambda s: "é".encode("latin-1") + s.encode())),
    st.tuples(named(TEXT_SUFFIXES), st.sampled_from([b"   ", b"\n\n", b"\t \r\n"])),  # blank
    st.tuples(named(SUPPORTED_SUFFIXES), repeated(st.binary(min_size=1, max_size=8), UPLOAD_LIMIT + 1, UPLOAD_LIMIT + 500)),
    st.tuples(named((".html", ".htm")), st.sampled_from([b"<script>x()</script>", b"<style>p{}</style><!-- c -->",
                                                         b"<head><title>t</title></head>"])),
    st.tuples(named((".jsonl",)), st.lists(bad_jsonl_line, min_size=1, max_size=4).map(lambda ls: "\n".join(ls).encode())),
    st.tuples(named((".pdf",)), binary),
    st.tuples(st.sampled_from(["nul\x00.txt", "caf\udce9.md", "x" * 2_100 + ".txt"]), words.map(str.encode)),
)
valid_file = st.one_of(
    st.tuples(st.sampled_from([".md", ".txt", ".html", ".markdown"]), words).map(lambda t: (f"ok{t[0]}", t[1].encode())),
    words.map(lambda w: ("ok.jsonl", json.dumps({"_id": f"doc-{w.split()[0]}", "text": w}).encode())),
)


def _parses(line: str) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True


@st.composite
def upload_batches(draw: st.DrawFn) -> list[tuple[str, bytes, str]]:
    """8-12 files named uniquely by position; about 1 in 16 is a tiny valid document."""
    files = []
    for i in range(draw(st.integers(8, 12))):
        kind = draw(st.sampled_from(["rejected"] * 9 + ["any"] * 6 + ["valid"]))
        name, data = draw({"rejected": rejected_file, "any": any_file, "valid": valid_file}[kind])
        files.append((f"{i}-{name}", data, kind))
    return files


# --- invariants ----------------------------------------------------------------------------------------


def assert_storable(value: object) -> None:
    """What the parser hands on, the store can hold: no NUL, no lone surrogate, no NaN."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            assert unstorable_char(item) is None, repr(item)[:200]
        elif isinstance(item, float):
            assert math.isfinite(item)
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def check_parsed(name: str, parsed: ParsedFile) -> None:
    assert isinstance(parsed, ParsedFile)
    assert parsed.documents or parsed.skipped, "every file is either read or skipped with a reason"
    for skip in parsed.skipped:
        assert skip.reason.strip() and (skip.source == name or skip.source.startswith(f"{name}:"))
    for doc in parsed.documents:
        assert doc.text.strip() and str(doc.external_id).strip() and doc.source == name
        assert_storable([doc.external_id, doc.title, doc.text, doc.source, doc.metadata])
    if not name.lower().endswith(".jsonl") or (parsed.skipped and parsed.skipped[0].source == name):
        assert len(parsed.documents) + len(parsed.skipped) == 1


# --- (a) parse_file ----------------------------------------------------------------------------------


def test_parse_file_reads_or_explains_every_generated_file():
    CASES["parse_file"] = 0

    @hypothesis_settings(SLOW_OK, max_examples=MIN_CASES + 100)
    @given(st.one_of(any_file, rejected_file, valid_file))
    def parse(file: tuple[str, bytes]) -> None:
        name, data = file
        CASES["parse_file"] += 1
        check_parsed(name, parse_file(name, data, max_bytes=UPLOAD_LIMIT))

    parse()
    assert CASES["parse_file"] >= MIN_CASES


# --- (b) ingest_uploads -----------------------------------------------------------------------------


_CORPUS_COUNTS = text("""
SELECT (SELECT count(*) FROM collections), (SELECT count(*) FROM documents), (SELECT count(*) FROM chunks),
       (SELECT count(*) FROM bm25_terms), (SELECT count(*) FROM bm25_postings), (SELECT count(*) FROM bm25_stats)
""")


def test_ingest_uploads_writes_nothing_for_rejected_files(clean_db, engine, settings):
    CASES["ingest_files"] = CASES["ingest_batches"] = CASES["ingest_valid"] = 0
    small = settings.model_copy(update={"max_upload_bytes": UPLOAD_LIMIT})

    def corpus_counts() -> tuple[int, ...]:
        with engine.connect() as conn:
            return tuple(conn.execute(_CORPUS_COUNTS).one())

    @hypothesis_settings(SLOW_OK, max_examples=260)
    @given(upload_batches())
    def ingest(batch: list[tuple[str, bytes, str]]) -> None:
        CASES["ingest_batches"] += 1
        CASES["ingest_files"] += len(batch)
        CASES["ingest_valid"] += sum(kind == "valid" for *_, kind in batch)
        before = corpus_counts()
        try:
            summary = ingest_uploads([(name, data) for name, data, _ in batch], settings=small)
        except WorkbenchError:
            assert corpus_counts() == before, "a failed ingest leaves the corpus as it was"
            raise
        after = corpus_counts()
        for name, _, kind in batch:
            mine = [o for o in summary.outcomes if o["source"] == name or str(o["source"]).startswith(f"{name}:")]
            assert mine, f"no outcome for {name!r}"
            assert all(o["status"] != "skipped" or str(o.get("reason", "")).strip() for o in mine)
            if kind == "rejected":
                assert all(o["status"] == "skipped" for o in mine), mine
            if kind == "valid":  # read, unless another file in the batch has the same document id
                assert all(o["status"] != "skipped" or "duplicate" in str(o["reason"]) for o in mine), mine
        assert after[1] - before[1] == summary.ingested
        if all(o["status"] == "skipped" for o in summary.outcomes):
            assert after == before, "nothing is written when every file is rejected"

    ingest()
    assert CASES["ingest_files"] >= MIN_CASES and CASES["ingest_valid"] > 0
