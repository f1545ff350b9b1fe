"""Readers: good records with their line numbers, bad ones with line numbers and reasons."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from services.errors import InputError
from services.intake.readers import MAX_RECORD_BYTES, NumberedRun, RecordError, detect_format, iter_records

CONTEXTS = [{"text": "Replace the pulsecoder battery with power on.", "document_id": "srvo-062.md", "rank": 1,
             "bm25_score": 6.1, "dense_similarity": 0.62},
            {"text": "Remaster the axis after a battery loss.", "rank": 2, "score": 0.4}]


def _split(items):  # type: ignore[no-untyped-def]
    items = list(items)
    return [i for i in items if isinstance(i, NumberedRun)], [i for i in items if isinstance(i, RecordError)]


def mixed_jsonl() -> bytes:
    """Lines 1, 3 and 8 are good; 2, 4, 5, 6, 7, 9 are bad in different ways; line 10 is blank."""
    good = {"question": "How do I clear SRVO-062?", "answer": "Replace the battery [1].", "contexts": CONTEXTS}
    lines = [
        json.dumps({**good, "trace_id": "t-1"}).encode(),
        b'{"question": "broken", "answer": ',  # malformed JSON
        json.dumps({**good, "trace_id": "t-3", "metadata": {"app": "bot", "timestamp": "2026-03-01T10:00:00+01:00"}}).encode(),
        json.dumps({"question": "no answer field"}).encode(),
        json.dumps({**good, "contexts": [{"text": "x", "scor": 1}]}).encode(),  # misspelt field
        "caf\u00e9".encode("latin-1") + b' "not utf-8"',
        json.dumps([good]).encode(),  # an array, not an object
        json.dumps({**good, "trace_id": "t-8", "contexts": []}).encode(),
        json.dumps({**good, "contexts": [{"text": "t", "rank": "first"}]}).encode(),  # wrong type
        b"   ",
    ]
    return b"\n".join(lines) + b"\n"


def test_mixed_jsonl_returns_the_good_records_and_each_bad_line_with_its_reason():
    records, errors = _split(iter_records(mixed_jsonl(), fmt="jsonl"))
    assert [(r.line, r.run.trace_id) for r in records] == [(1, "t-1"), (3, "t-3"), (8, "t-8")]
    assert records[0].run.contexts[0].bm25_score == 6.1
    assert records[1].run.metadata.app == "bot"
    reasons = {e.line: e.reason for e in errors}
    assert sorted(reasons) == [2, 4, 5, 6, 7, 9]
    assert reasons[2].startswith("not valid JSON")
    assert reasons[4] == "answer: required field missing"
    assert "contexts.0.scor: unknown field" in reasons[5]
    assert reasons[6].startswith("not UTF-8 text (byte 0xe9 at column 4)")
    assert reasons[7] == "expected a JSON object (one record per line), got an array"
    assert reasons[9].startswith("contexts.0.rank: Input should be a valid integer")
    assert str(errors[0]).startswith("line 2: not valid JSON")


def test_jsonl_from_a_path_with_a_byte_order_mark_and_crlf(tmp_path: Path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"question": "q1", "answer": "a1"}).encode() + b"\r\n"
                     + json.dumps({"question": "q2", "answer": "a2"}).encode() + b"\r\n")
    records, errors = _split(iter_records(path))
    assert errors == [] and [r.run.question for r in records] == ["q1", "q2"]


def test_binary_and_oversized_lines_are_reported_and_reading_goes_on():
    big = json.dumps({"question": "q", "answer": "x" * (MAX_RECORD_BYTES + 10)}).encode()
    deep = b'{"question": "q", "answer": "a", "metadata": {"extra": {"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}}"
    data = (b"\x00\x01\x02garbage\n" + big + b"\n" + deep + b"\n"
            + json.dumps({"question": "after", "answer": "a"}).encode() + b"\n")
    records, errors = _split(iter_records(data, fmt="jsonl"))
    assert [(e.line, e.reason.split(" (")[0]) for e in errors] == [
        (1, "binary data"), (2, f"the line is over {MAX_RECORD_BYTES:,} bytes; split the record or shorten its contexts"),
        (3, "not valid JSON: nested too deeply")]
    assert [(r.line, r.run.question) for r in records] == [(4, "after")]


def test_a_parquet_file_named_jsonl_is_refused_with_a_hint():
    buffer = io.BytesIO()
    pq.write_table(pa.table({"question": ["q"], "answer": ["a"]}), buffer)
    with pytest.raises(InputError, match="this is a Parquet file"):
        list(iter_records(buffer.getvalue(), fmt="jsonl"))


def _csv_bytes(header: list[str], rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")


def test_csv_round_trip_with_json_contexts_and_metadata_columns():
    data = _csv_bytes(["question", "answer", "trace_id", "contexts", "app", "timestamp"], [
        ["How do I clear SRVO-062?", "Replace the battery.\nThen remaster.", "c-1", json.dumps(CONTEXTS), "bot", "2026-03-01T10:00:00Z"],
        ["No contexts here", "", "", "", "", ""],
        ["Bad contexts", "a", "c-3", "[{\"text\": ", "", ""],
        ["", "an answer without a question", "c-4", "", "", ""],
        ["Too few cells"],
    ])
    records, errors = _split(iter_records(data, fmt="csv"))
    first, second = records
    assert first.line == 2 and first.run.trace_id == "c-1" and first.run.answer == "Replace the battery.\nThen remaster."
    assert [c.model_dump(exclude_none=True) for c in first.run.contexts] == CONTEXTS
    assert first.run.metadata.app == "bot" and first.run.metadata.timestamp is not None
    # The first record spans lines 2-3 (a newline inside a quoted cell): the next starts on line 4.
    assert (second.line, second.run.answer, second.run.trace_id, second.run.contexts) == (4, "", None, [])
    assert [(e.line, e.reason.split(":")[0]) for e in errors] == [
        (5, "column contexts is not valid JSON"), (6, "question"), (7, "1 cells where the header has 6 columns")]
    assert "must not be empty" in errors[1].reason


def test_csv_rows_that_are_not_utf8_are_reported_alone():
    data = _csv_bytes(["question", "answer"], [["fine", "ok"]]) + "caf\u00e9,x\r\n".encode("latin-1") + b"also fine,ok\r\n"
    records, errors = _split(iter_records(data, fmt="csv"))
    assert [r.line for r in records] == [2, 4]
    assert [(e.line, e.reason) for e in errors] == [(3, "not UTF-8 text; save the file as UTF-8")]


@pytest.mark.parametrize(("header", "message"), [
    (["question", "answer", "qustion"], "unknown column"),
    (["question", "contexts"], "missing column"),
    (["question", "answer", "metadata", "app"], "not both"),
])
def test_a_bad_csv_header_spoils_the_whole_file(header, message):
    with pytest.raises(InputError, match=message):
        list(iter_records(_csv_bytes(header, [["q"] * len(header)]), fmt="csv"))


def test_parquet_round_trip_with_json_columns_and_native_columns(tmp_path: Path):
    as_json = pa.table({"question": ["q1", "q2"], "answer": ["a1", None], "trace_id": ["p-1", None],
                        "contexts": [json.dumps(CONTEXTS), None], "metadata": [json.dumps({"app": "bot"}), None]})
    path = tmp_path / "runs.parquet"
    pq.write_table(as_json, path)
    records, errors = _split(iter_records(path))
    assert [(r.line, r.run.trace_id, len(r.run.contexts)) for r in records] == [(1, "p-1", 2)]
    assert records[0].run.metadata.app == "bot"
    assert [(e.line, e.reason) for e in errors] == [(2, "answer: required field missing")]

    native = pa.table({"question": ["q3"], "answer": ["a3"],
                       "contexts": pa.array([CONTEXTS]), "metadata": pa.array([{"app": "bot", "user": "u1"}])})
    buffer = io.BytesIO()
    pq.write_table(native, buffer)
    records, errors = _split(iter_records(buffer.getvalue(), fmt="parquet"))
    assert errors == []
    assert [c.model_dump(exclude_none=True) for c in records[0].run.contexts] == CONTEXTS
    assert records[0].run.metadata.user == "u1"


def test_a_file_that_is_not_parquet_is_refused():
    with pytest.raises(InputError, match="not a readable Parquet file"):
        list(iter_records(b"question,answer\nq,a\n", fmt="parquet"))


def test_format_comes_from_the_suffix_or_is_given():
    assert detect_format("runs.JSONL") == "jsonl" and detect_format("x.ndjson") == "jsonl"
    assert detect_format("runs.csv") == "csv" and detect_format("runs.parquet") == "parquet"
    assert detect_format("runs.txt", "CSV") == "csv"
    with pytest.raises(InputError, match="cannot tell the format"):
        detect_format("runs.txt")
    with pytest.raises(InputError, match="unknown format"):
        detect_format("runs.jsonl", "xml")
    with pytest.raises(InputError, match="cannot read"):
        list(iter_records(Path("/nonexistent/runs.jsonl")))
