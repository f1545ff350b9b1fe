"""How far an ingest has got: the documents to expect, counted before reading, and the rate and
time left that `workbench ingest` and the Corpus page show from its progress events."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

from services.corpus.extract import SUPPORTED_SUFFIXES, iter_paths

# Rates are read over the last WINDOW_S seconds: a resumed ingest skips its already-ingested
# documents in seconds, then embeds the rest at the encoder's pace; an average since the start
# would promise the first pace for the rest.
WINDOW_S = 30.0
MIN_SPAN_S = 1.0  # below this the rate is noise: no ETA yet


def expected_documents(paths: Sequence[Path], *, max_bytes: int) -> int:
    """Documents the paths will give, counted before parsing: a JSONL file's non-empty lines,
    one per other supported file. An estimate (a bad line or file is skipped, not written), so
    the total is only a guide for the bar and the ETA."""
    total = 0
    for name, path in iter_paths(paths):
        suffix = PurePosixPath(name).suffix.lower()
        if suffix == ".jsonl":
            try:
                if path.is_file() and path.stat().st_size <= max_bytes:
                    with open(path, "rb") as handle:
                        total += sum(1 for line in handle if line.strip())
            except OSError:
                continue  # parse_paths reports it, as a skipped input
        elif suffix in SUPPORTED_SUFFIXES:
            total += 1
    return total


def expected_upload_documents(files: Iterable[tuple[str, bytes]]) -> int:
    """As `expected_documents`, for in-memory (name, bytes) files."""
    return sum(sum(1 for line in data.splitlines() if line.strip()) if name.lower().endswith(".jsonl") else 1
               for name, data in files)


@dataclass(frozen=True)
class ProgressReading:
    """What a progress bar shows at one event."""

    documents_done: int
    documents_total: int | None  # exact at the end, else the count expected, else None
    chunks_embedded: int
    chunks_per_s: float | None  # None until MIN_SPAN_S of events
    eta_s: float | None
    skipped: int  # documents already ingested with the same content: not embedded again

    @property
    def fraction(self) -> float:
        if not self.documents_total:
            return 0.0
        return min(self.documents_done / self.documents_total, 1.0)

    def describe(self) -> str:
        """One line, e.g. '120 of ~300 documents · 35.2 chunks/s · ETA 1m05s · 40 skipped (already ingested)'."""
        of = f" of ~{self.documents_total:,}" if self.documents_total else ""
        rate = "… chunks/s" if self.chunks_per_s is None else f"{self.chunks_per_s:,.1f} chunks/s"
        return (f"{self.documents_done:,}{of} documents · {self.chunks_embedded:,} chunks embedded · {rate} · "
                f"ETA {format_duration(self.eta_s)} · {self.skipped:,} skipped (already ingested)")


class ProgressEvent(Protocol):
    """What the meter reads of an ingest's progress event (services.corpus.ingest.IngestProgress)."""

    @property
    def documents_done(self) -> int: ...
    @property
    def documents_guide(self) -> int | None: ...
    @property
    def chunks_embedded(self) -> int: ...
    @property
    def unchanged(self) -> int: ...


class ProgressMeter:
    """Turns an ingest's progress events into rates and an ETA over a sliding window.

    `clock` is injectable so tests need no sleeping."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, window_s: float = WINDOW_S) -> None:
        self._clock = clock
        self._window_s = window_s
        self._samples: deque[tuple[float, int, int]] = deque()  # (time, documents done, chunks embedded)

    def read(self, event: ProgressEvent) -> ProgressReading:
        documents_done, documents_total = event.documents_done, event.documents_guide
        chunks_embedded, skipped = event.chunks_embedded, event.unchanged
        now = self._clock()
        self._samples.append((now, documents_done, chunks_embedded))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self._window_s:
            self._samples.popleft()
        start, docs_then, chunks_then = self._samples[0]
        span = now - start
        rate = eta = None
        if span >= MIN_SPAN_S:
            rate = (chunks_embedded - chunks_then) / span
            docs_rate = (documents_done - docs_then) / span
            if documents_total is not None and docs_rate > 0:
                eta = max(documents_total - documents_done, 0) / docs_rate
        if documents_total is not None and documents_done >= documents_total:
            eta = 0.0
        return ProgressReading(documents_done, documents_total, chunks_embedded, rate, eta, skipped)


def format_duration(seconds: float | None) -> str:
    """'…' when unknown, else '45s', '3m05s', '2h07m'."""
    if seconds is None:
        return "…"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
