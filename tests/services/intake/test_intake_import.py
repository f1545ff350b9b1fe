"""Importing files into the intake: good lines land, bad ones are reported, re-imports add nothing."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import text

from services.intake.importing import import_file
from services.store import transaction
from tests.services.intake.test_intake_readers import CONTEXTS, mixed_jsonl


def _stored(settings) -> list[tuple]:  # type: ignore[no-untyped-def,type-arg]
    with transaction(settings) as session:
        return [tuple(r) for r in session.execute(text(
            "SELECT trace_id, source, status, payload -> 'question', jsonb_array_length(payload -> 'contexts') "
            "FROM run_intake ORDER BY id"))]


def test_mixed_jsonl_lands_the_good_lines_and_reports_the_bad_ones(clean_db, settings, tmp_path: Path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(mixed_jsonl())
    summary = import_file(path, settings=settings)
    assert (summary.accepted, summary.duplicates, summary.error_count) == (3, 0, 6)
    assert [e.line for e in summary.errors] == [2, 4, 5, 6, 7, 9]
    assert _stored(settings) == [("t-1", "import", "queued", "How do I clear SRVO-062?", 2),
                                 ("t-3", "import", "queued", "How do I clear SRVO-062?", 2),
                                 ("t-8", "import", "queued", "How do I clear SRVO-062?", 0)]
    with transaction(settings) as session:
        ids = [r[0] for r in session.execute(text("SELECT id FROM run_intake ORDER BY id"))]
    assert list(summary.intake_ids) == ids
    assert summary.to_dict()["errors"][0] == {"line": 2, "reason": summary.errors[0].reason}


def test_reimporting_the_same_trace_ids_adds_nothing(clean_db, settings, tmp_path: Path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(mixed_jsonl())
    import_file(path, settings=settings)
    before = _stored(settings)
    again = import_file(path, settings=settings, batch_records=2)  # batch edges do not matter either
    assert (again.accepted, again.duplicates, again.error_count, again.intake_ids) == (0, 3, 6, ())
    assert _stored(settings) == before


def test_csv_and_parquet_imports_land_like_jsonl(clean_db, settings):
    csv_bytes = ("question,answer,trace_id,contexts\n"
                 f"From CSV,yes,c-1,\"{json.dumps(CONTEXTS).replace(chr(34), chr(34) * 2)}\"\n").encode()
    assert import_file(csv_bytes, fmt="csv", settings=settings).accepted == 1
    buffer = io.BytesIO()
    pq.write_table(pa.table({"question": ["From Parquet"], "answer": ["yes"], "trace_id": ["p-1"],
                             "contexts": pa.array([CONTEXTS])}), buffer)
    assert import_file(buffer.getvalue(), fmt="parquet", settings=settings).accepted == 1
    assert _stored(settings) == [("c-1", "import", "queued", "From CSV", 2), ("p-1", "import", "queued", "From Parquet", 2)]


def test_many_records_stream_through_in_batches(clean_db, settings):
    lines = [json.dumps({"question": f"q{i}", "answer": "a", "trace_id": f"bulk-{i}"}) for i in range(2_500)]
    summary = import_file(("\n".join(lines) + "\n").encode(), fmt="jsonl", settings=settings, batch_records=1_000)
    assert (summary.accepted, summary.error_count) == (2_500, 0)
    with transaction(settings) as session:
        assert session.execute(text("SELECT count(DISTINCT trace_id) FROM run_intake")).scalar_one() == 2_500
