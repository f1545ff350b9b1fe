"""Exports stream: runs are read a batch at a time through one snapshot and written as they come,
so memory does not grow with the store (bench/volume.py measures the peak at a million runs;
here the structure that makes it flat is pinned, not a timing)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from sqlalchemy import event
from typer.testing import CliRunner

from services.cli import app
from services.review.export import ExportFilters, count_export_records, export_records, iter_export_records
from services.review.export_formats import PARQUET_ROW_GROUP, read_export, write_records
from services.store import get_engine
from tests.services.test_export import make_run, store


@pytest.fixture()
def five_runs(clean_db) -> list[int]:  # type: ignore[no-untyped-def]
    return store(*(make_run(f"Question {i}?") for i in range(5)))


def _batches_read() -> tuple[list[list[int]], Any]:
    """The run ids of each batch's iterations query, as they are sent."""
    seen: list[list[int]] = []

    def before(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        if "FROM run_iterations" in statement:
            ids = parameters["run_ids"] if isinstance(parameters, dict) else parameters[0]
            seen.append(list(ids))

    return seen, before


def test_records_are_read_a_batch_at_a_time_as_they_are_consumed(five_runs):
    seen, before = _batches_read()
    event.listen(get_engine(), "before_cursor_execute", before)
    try:
        records = iter_export_records(batch=2)
        assert seen == []  # a generator: nothing is read before the first record is asked for
        first = next(records)
        assert first["run_id"] == five_runs[0] and seen == [five_runs[:2]]
        rest = list(records)
    finally:
        event.remove(get_engine(), "before_cursor_execute", before)
    assert [r["run_id"] for r in [first, *rest]] == five_runs
    assert seen == [five_runs[:2], five_runs[2:4], five_runs[4:]]  # never more than a batch held


def test_streamed_records_equal_the_listed_ones_and_the_count_matches(five_runs):
    listed = export_records()
    assert list(iter_export_records(batch=2)) == listed
    assert count_export_records() == 5 == len(listed)
    assert count_export_records(ExportFilters(statuses=("approved",))) == 0
    assert [r["run_id"] for r in export_records(limit=2)] == five_runs[:2]


class _Sink(io.BytesIO):
    """A file that notes how many records had been pulled when each write came."""

    def __init__(self, pulled: list[int]) -> None:
        super().__init__()
        self.pulled, self.at_write = pulled, []  # type: ignore[var-annotated]

    def write(self, data: Any) -> int:
        self.at_write.append(self.pulled[0])
        return super().write(data)


def _counted(records, pulled):  # type: ignore[no-untyped-def]
    """The records, one at a time, counting in pulled[0] how many were taken so far."""
    for record in records:
        pulled[0] += 1
        yield record


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_text_formats_write_each_record_before_the_next_is_read(five_runs, fmt):
    records = export_records()
    pulled = [0]
    sink = _Sink(pulled)
    assert write_records(_counted(records, pulled), fmt, sink) == 5
    assert max(sink.at_write) == 5 and sink.at_write[-1] <= 5
    first_record_write = next(i for i, n in enumerate(sink.at_write) if n >= 1)
    assert sink.at_write[first_record_write] == 1  # written before the second record was pulled
    assert read_export(sink.getvalue(), fmt) == records


def test_parquet_holds_at_most_one_row_group_of_records(five_runs):
    records = export_records() * (PARQUET_ROW_GROUP // 5 + 1)  # more than one row group
    pulled = [0]
    sink = _Sink(pulled)
    assert write_records(_counted(records, pulled), "parquet", sink) == len(records)
    group_writes = [n for n in sink.at_write if n > 0]
    assert group_writes[0] <= PARQUET_ROW_GROUP < len(records)  # the first group went out before the rest was read
    assert read_export(sink.getvalue(), "parquet") == records


def test_the_cli_streams_every_run_to_the_file(five_runs, tmp_path):
    target = tmp_path / "all.jsonl"
    result = CliRunner().invoke(app, ["export", "-o", str(target), "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    assert "exported 5 records" in result.output
    assert [json.loads(line)["run_id"] for line in target.read_text().splitlines()] == five_runs


def test_the_export_pages_command_line_selects_what_the_page_selected(clean_db, tmp_path):
    """Past DOWNLOAD_MAX_RUNS the Export page gives a `workbench export` line instead of a download:
    run as given, it writes the runs the page's filters select."""
    import shlex
    from datetime import UTC, datetime

    from app_pages.export import export_command
    from services.review.queue import submit_review

    ids = store(make_run("Old?"), created_at=datetime(2025, 4, 1, tzinfo=UTC))
    ids += store(make_run("In May?"), make_run("Also May?"), created_at=datetime(2025, 5, 3, tzinfo=UTC))
    submit_review(ids[1], expected_version=0, action="approve", reviewer="o'neil; rm -rf")
    filters = ExportFilters(statuses=("approved",), reviewer="o'neil; rm -rf", since=datetime(2025, 5, 1, tzinfo=UTC),
                            until=datetime(2025, 6, 1, tzinfo=UTC))
    args = shlex.split(export_command(filters))
    assert args[:2] == ["workbench", "export"]
    target = tmp_path / "export.jsonl"
    args[args.index("-o") + 1] = str(target)
    result = CliRunner().invoke(app, args[1:])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["run_id"] for line in target.read_text().splitlines()] == [ids[1]]
    assert [r["run_id"] for r in export_records(filters)] == [ids[1]]
