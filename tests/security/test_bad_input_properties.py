"""Bad input, generated: at least 2,000 cases per entry point users can feed, and not one
exception other than a WorkbenchError. Uploads are parsed and ingested (rejected ones write
nothing), queries are cleaned and searched, reviews land or are refused with the history
matching, export filters validate and select exactly what they say.

Each property runs inside a plain test that asserts how many cases it generated, so the
2,000 is checked, not assumed. Hypothesis examples are small on purpose (its buffer is 8 KB):
big inputs are built by repeating a small seed.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import PurePosixPath

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import text

from services.confidence import DEFAULT_PROFILE
from services.domain import RetrievalResult
from services.errors import ConflictError, InputError, NotFoundError, WorkbenchError
from services.export import DATE_FIELDS, VERDICTS, ExportFilters, export_bytes, export_records, parse_when, read_export
from services.extract import SUPPORTED_SUFFIXES, ParsedFile, parse_file
from services.ingest import ingest_uploads
from services.retrieval import clean_query, default_params, search
from services.review import ACTIONS, FLAG_REASONS, MAX_COMMENT_CHARS, review_history, submit_review
from services.runs import STATUSES
from services.text import unstorable_char
from tests.security._support import SQL_METACHARACTERS, save_runs, table_counts

CASES: Counter[str] = Counter()
MIN_CASES = 2_000
UPLOAD_LIMIT = 4_096  # a small max_upload_bytes, so "over the limit" costs kilobytes, not megabytes
MAX_QUERY_CHARS = 2_000

# Database round trips and model calls make examples slow; Hypothesis' timing checks do not apply.
SLOW_OK = hypothesis_settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))

@pytest.fixture(autouse=True, scope="module")
def _report_counts():  # type: ignore[no-untyped-def]
    yield
    print(f"\ngenerated cases: {dict(sorted(CASES.items()))}")  # shown with -s; the tests assert the minimums


# --- strategies: uploads ---------------------------------------------------------------------------

JUNK_SUFFIXES = (".exe", ".docx", ".zip", ".json", ".csv", ".jsonl.gz", ".", "", ". txt", ".md ", ".tx", ".html\x00")
WORDS = ("servo", "encoder", "battery", "grease", "reducer", "axis", "remaster", "alarm", "zone", "fence", "torque")
TEXT_SUFFIXES = tuple(s for s in SUPPORTED_SUFFIXES if s != ".pdf")
HOSTILE_STRINGS = SQL_METACHARACTERS + (
    "😀", "👩‍👩‍👧", "🇺🇸", "\u200b", "\ufeff", "\u202e", "\x00", "\t", "\r\n", "\x1b[31m", "\ud800", "\udce9", "\u2028",
)

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


# --- (c) queries -----------------------------------------------------------------------------------


query_pieces = st.one_of(
    st.text(max_size=30),
    st.sampled_from(HOSTILE_STRINGS),
    st.text(alphabet=st.characters(max_codepoint=0x1F), max_size=8),  # control characters
    st.text(alphabet=" \t\n\r\x0b\x0c\u00a0\u2003\u3000", max_size=8),  # whitespace only
    st.tuples(st.text(min_size=1, max_size=4), st.integers(1, 30_000)).map(lambda t: t[0] * t[1]),  # up to ~100 KB
    st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join),
)
queries = st.lists(query_pieces, max_size=5).map("".join)


def check_cleaned(query: str) -> str | None:
    try:
        cleaned = clean_query(query, max_chars=MAX_QUERY_CHARS)
    except InputError as exc:
        assert str(exc).strip()
        return None
    assert cleaned and cleaned == cleaned.strip() and len(cleaned) <= MAX_QUERY_CHARS
    assert unstorable_char(cleaned) is None and not any(ord(c) < 0x20 and c not in "\t\n\r" for c in cleaned)
    assert clean_query(cleaned, max_chars=MAX_QUERY_CHARS) == cleaned  # cleaning is idempotent
    return cleaned


def test_clean_query_cleans_or_refuses_every_generated_query():
    CASES["clean_query"] = 0

    @hypothesis_settings(SLOW_OK, max_examples=MIN_CASES + 100)
    @given(queries)
    def clean(query: str) -> None:
        CASES["clean_query"] += 1
        check_cleaned(query)

    clean()
    assert CASES["clean_query"] >= MIN_CASES


SEARCH_DOCS = {
    "srvo-062.md": "# SRVO-062 Encoder backup lost\nReplace the battery pack, then remaster the axis.",
    "grease.md": "# Reducer grease\nReplace the J2 reducer grease every 20,000 hours.",
    "dsz.md": "# DSZ safe zones\nDual-check safety zones fence the robot in; 'quoted' -- and; semicolons.",
}


@pytest.fixture()
def search_corpus(clean_db, engine):  # type: ignore[no-untyped-def]
    summary = ingest_uploads([(name, body.encode()) for name, body in SEARCH_DOCS.items()])
    assert summary.ingested == len(SEARCH_DOCS)
    return table_counts(engine)


def test_search_returns_hits_or_an_input_error_and_never_writes(search_corpus, engine):
    CASES["search_bm25"] = CASES["search_hybrid"] = 0

    def check(query: str, mode: str) -> None:
        try:
            result = search(query, default_params(mode=mode, k=5))
        except InputError:
            assert check_cleaned(query) is None, "search refuses exactly what clean_query refuses"
            return
        assert isinstance(result, RetrievalResult) and result.query == check_cleaned(query)
        assert [h.rank for h in result.hits] == list(range(1, len(result.hits) + 1)) and len(result.hits) <= 5
        assert {h.external_id for h in result.hits} <= set(SEARCH_DOCS)

    @hypothesis_settings(SLOW_OK, max_examples=300)
    @given(queries)
    def bm25(query: str) -> None:
        CASES["search_bm25"] += 1
        check(query, "bm25")

    @hypothesis_settings(SLOW_OK, max_examples=50)
    @given(queries)
    def hybrid(query: str) -> None:
        CASES["search_hybrid"] += 1
        check(query, "hybrid")

    bm25()
    hybrid()
    assert table_counts(engine) == search_corpus, "searching never writes"
    assert CASES["search_bm25"] >= 300 and CASES["search_hybrid"] >= 50


# --- (d) submit_review ------------------------------------------------------------------------------

texts = st.one_of(st.text(max_size=40), st.sampled_from(HOSTILE_STRINGS), st.sampled_from(["ana", "  ben  ", "", "   "]),
                  st.integers(MAX_COMMENT_CHARS - 2, MAX_COMMENT_CHARS + 2).map(lambda n: "c" * n))


@st.composite
def review_calls(draw: st.DrawFn) -> dict[str, object]:
    return {
        "run": draw(st.integers(0, 7)),  # 0-3: stored runs; 4-7: ids that do not exist
        "action": draw(st.one_of(st.sampled_from(list(ACTIONS) * 3), st.text(max_size=8), st.sampled_from(SQL_METACHARACTERS))),
        "reviewer": draw(texts),
        "comment": draw(texts),
        "flag_reason": draw(st.one_of(st.none(), st.sampled_from(FLAG_REASONS), texts)),
        "corrected_answer": draw(st.one_of(st.none(), texts)),
        "version": draw(st.one_of(st.just("current"), st.just("current"), st.integers(-(2**70), 2**70))),
    }


def test_submit_review_lands_or_refuses_and_history_matches(clean_db, engine):
    CASES["submit_review"] = 0
    run_ids = save_runs(4)
    missing = [0, -5, 2**70, max(run_ids) + 1000]
    versions = dict.fromkeys(run_ids, 0)
    landed: dict[int, list[dict[str, object]]] = {rid: [] for rid in run_ids}
    before = table_counts(engine)

    @hypothesis_settings(SLOW_OK, max_examples=MIN_CASES + 100)
    @given(review_calls())
    def review(call: dict[str, object]) -> None:
        CASES["submit_review"] += 1
        index = int(call["run"])  # type: ignore[call-overload]
        run_id = run_ids[index] if index < len(run_ids) else missing[index - len(run_ids)]
        version = call["version"]
        expected = versions.get(run_id, 0) if version == "current" else int(version)  # type: ignore[call-overload]
        fields = {k: call[k] for k in ("action", "reviewer", "comment", "flag_reason", "corrected_answer")}
        try:
            saved = submit_review(run_id, expected_version=expected, **fields)  # type: ignore[arg-type]
        except InputError as exc:
            assert str(exc).strip()
            return
        except NotFoundError:
            assert run_id not in versions
            return
        except ConflictError as exc:
            assert run_id in versions and expected != versions[run_id], "a save at the current version must land"
            assert str(exc).strip()
            return
        assert run_id in versions and expected == versions[run_id]
        versions[run_id] += 1
        assert saved.version == versions[run_id] and saved.new_status == ACTIONS[str(call["action"])]
        assert saved.comment == call["comment"] and saved.reviewer == str(call["reviewer"]).strip()
        landed[run_id].append(fields)

    review()
    assert CASES["submit_review"] >= MIN_CASES
    after = table_counts(engine)
    n_landed = sum(map(len, landed.values()))
    assert n_landed > 0
    assert after["review_history"] - before["review_history"] == n_landed
    assert {k: v for k, v in after.items() if k != "review_history"} == {k: v for k, v in before.items() if k != "review_history"}
    for rid in run_ids:  # every landed comment round-trips through the store byte for byte
        assert [h.comment for h in review_history(rid)] == [f["comment"] for f in landed[rid]]


# --- (e) export filters -------------------------------------------------------------------------------

offsets = st.integers(-23 * 60, 23 * 60).map(lambda m: timezone(timedelta(minutes=m)))
moments = st.one_of(st.none(), st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                                            timezones=st.one_of(st.none(), offsets)))
names = st.one_of(st.none(), st.text(max_size=20), st.sampled_from(HOSTILE_STRINGS),
                  st.sampled_from(["ana", "ben", DEFAULT_PROFILE.label, "default"]))
when_strings = st.one_of(
    st.text(max_size=20), st.sampled_from(HOSTILE_STRINGS),
    st.dates().map(str), st.datetimes().map(lambda d: d.isoformat()),
    st.sampled_from(["9999-12-31", "0001-01-01", "2025-02-30", "2025-05-31T25:00", "2025-05-31T14:00:00+99:00", "now"]),
)


junk = st.one_of(st.text(max_size=8), st.sampled_from(SQL_METACHARACTERS))


@st.composite
def export_calls(draw: st.DrawFn) -> dict[str, object]:
    """Mostly valid choices, so that many filter sets pass validation and reach the query."""
    valid_statuses = st.lists(st.sampled_from(STATUSES), max_size=3)
    return {
        "statuses": tuple(draw(st.one_of(valid_statuses, valid_statuses, valid_statuses, st.lists(junk, min_size=1, max_size=2)))),
        "verdict": draw(st.one_of(st.none(), st.none(), st.sampled_from(VERDICTS), junk)),
        "reviewer": draw(names), "profile": draw(names), "collection": draw(names),
        "since": draw(moments), "until": draw(moments),
        "date_field": draw(st.one_of(st.sampled_from(DATE_FIELDS * 4), junk)),
        "when": draw(when_strings), "end": draw(st.booleans()),
        "query": draw(st.integers(0, 3)) == 0,  # one in four valid filter sets also runs the query
        "fmt": draw(st.sampled_from(["csv", "jsonl", "parquet"])),
    }


def _selected(record: dict[str, object], filters: ExportFilters) -> bool:
    when = record["reviewed_at" if filters.date_field == "reviewed" else "created_at"]
    moment = datetime.fromisoformat(str(when)) if when else None
    return ((not filters.statuses or record["status"] in filters.statuses)
            and filters.verdict in (None, record["status"])
            and filters.reviewer in (None, record["reviewer"])
            and filters.profile in (None, record["weights_profile"])
            and filters.collection in (None, record["collection"])
            and (filters.since is None or (moment is not None and moment >= filters.since))
            and (filters.until is None or (moment is not None and moment < filters.until)))


def test_export_filters_validate_and_select_exactly_what_they_say(clean_db, engine):
    CASES["export_filters"] = CASES["export_queries"] = CASES["parse_when"] = 0
    run_ids = save_runs(6)
    for rid, reviewer in zip(run_ids[:3], ("ana", "ben", "' OR '1'='1")):
        submit_review(rid, expected_version=0, action="approve", reviewer=reviewer)
    submit_review(run_ids[3], expected_version=0, action="flag", reviewer="ana", flag_reason="wrong answer")
    everything = export_records()
    before = table_counts(engine)

    @hypothesis_settings(SLOW_OK, max_examples=MIN_CASES + 100)
    @given(export_calls())
    def export(call: dict[str, object]) -> None:
        CASES["export_filters"] += 1
        CASES["parse_when"] += 1
        try:
            bound = parse_when(str(call["when"]), end=bool(call["end"]))
            assert isinstance(bound, datetime)
        except InputError as exc:
            assert str(exc).strip()
        fields = {k: call[k] for k in ("statuses", "verdict", "reviewer", "profile", "collection", "since", "until", "date_field")}
        try:
            filters = ExportFilters(**fields)  # type: ignore[arg-type]
        except InputError as exc:
            assert str(exc).strip()
            return
        if not call["query"]:
            return
        CASES["export_queries"] += 1
        records = export_records(filters)
        assert [r["run_id"] for r in records] == [r["run_id"] for r in everything if _selected(r, filters)]
        fmt = str(call["fmt"])
        assert read_export(export_bytes(records, fmt), fmt) == records

    export()
    assert CASES["export_filters"] >= MIN_CASES and CASES["parse_when"] >= MIN_CASES and CASES["export_queries"] > 50
    assert table_counts(engine) == before, "exporting never writes"
    reviewer_injection = export_records(ExportFilters(reviewer="' OR '1'='1"))
    assert [r["run_id"] for r in reviewer_injection] == [run_ids[2]]  # the literal name, not a tautology

