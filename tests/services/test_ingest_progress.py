"""Ingest progress: documents expected before reading, chunks/s and ETA over a sliding window (a
fake clock, no sleeping), and the skipped count of a re-run, from the real ingest's events."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.corpus.ingest import IngestProgress, ingest_paths
from services.corpus.progress import (
    ProgressMeter,
    expected_documents,
    expected_upload_documents,
    format_duration,
)


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _event(done: int, embedded: int, *, expected: int | None = 100, unchanged: int = 0) -> IngestProgress:
    return IngestProgress(done, None, embedded, "", embedded, expected, unchanged)


def test_rate_and_eta_come_from_the_recent_window_not_the_average_since_the_start() -> None:
    clock = _Clock()
    meter = ProgressMeter(clock=clock, window_s=10.0)
    first = meter.read(_event(0, 0))
    assert first.chunks_per_s is None and first.eta_s is None and "ETA …" in first.describe()
    # A resumed ingest: 50 already-ingested documents skipped in one second...
    clock.now += 1.0
    skipped = meter.read(_event(50, 0, unchanged=50))
    assert skipped.eta_s == pytest.approx(1.0)  # 50 left at 50 documents a second
    # ...then the rest embedded at 2 documents (4 chunks) a second.
    for step in range(1, 16):
        clock.now += 1.0
        reading = meter.read(_event(50 + 2 * step, 4 * step, unchanged=50))
    assert reading.chunks_per_s == pytest.approx(4.0)
    assert reading.eta_s == pytest.approx((100 - 80) / 2.0)  # the skip burst has left the window
    assert reading.fraction == pytest.approx(0.8)
    text = reading.describe()
    assert "80 of ~100 documents" in text and "4.0 chunks/s" in text and "ETA 10s" in text
    assert "50 skipped (already ingested)" in text


def test_the_exact_total_replaces_the_estimate_at_the_end() -> None:
    clock = _Clock()
    meter = ProgressMeter(clock=clock)
    meter.read(_event(0, 0, expected=5))
    clock.now += 2.0
    done = meter.read(IngestProgress(4, 4, 6, "", 6, 5, 0))  # one expected document was a bad line
    assert (done.documents_total, done.fraction, done.eta_s) == (4, 1.0, 0.0)


@pytest.mark.parametrize(("seconds", "shown"), [(None, "…"), (4.4, "4s"), (65, "1m05s"), (7620, "2h07m")])
def test_durations_read_at_a_glance(seconds: float | None, shown: str) -> None:
    assert format_duration(seconds) == shown


def test_documents_are_expected_per_jsonl_line_and_per_supported_file(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\nalpha\n")
    (tmp_path / "notes.xyz").write_text("not ingested")
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "corpus.jsonl").write_text('{"_id": "1", "text": "x"}\n\n{"_id": "2", "text": "y"}\n')
    assert expected_documents([tmp_path], max_bytes=10_000) == 3
    assert expected_documents([tmp_path], max_bytes=10) == 1  # too big to ingest: not expected
    assert expected_upload_documents([("a.txt", b"one"), ("c.jsonl", b'{"_id": "1"}\n{"_id": "2"}\n')]) == 3


def test_a_re_run_reports_its_already_ingested_documents_as_skipped(clean_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for name in ("boiler", "coffee", "fleet"):
        (tmp_path / f"{name}.md").write_text(f"# {name}\n\nThe {name} checklist is read before every shift.\n")
    first: list[IngestProgress] = []
    ingest_paths([tmp_path], collection="progress", on_progress=first.append)
    assert first[-1].documents_expected == 3 and first[-1].unchanged == 0 and first[-1].chunks_embedded == 3
    (tmp_path / "drill.md").write_text("# drill\n\nThe fire drill starts when the bell rings twice.\n")
    again: list[IngestProgress] = []
    summary = ingest_paths([tmp_path], collection="progress", on_progress=again.append)
    assert (summary.unchanged, summary.ingested) == (3, 1)
    last = again[-1]
    assert (last.documents_done, last.documents_total, last.unchanged, last.chunks_embedded) == (4, 4, 3, 1)
    assert ProgressMeter().read(last).skipped == 3
