"""Ingest documents: chunk, embed and index them, one transaction per batch."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from services.corpus.batching import Batch, chunked_groups
from services.corpus.encode_pool import embedded_batches
from services.corpus.extract import ParsedFile, SkippedInput, SourceDocument, parse_file, parse_paths
from services.corpus.identity import same_origin
from services.corpus.indexing import (
    PreparedDocument,
    check_collection_name,
    content_hash,
    ensure_collection,
    insert_documents,
    known_documents,
    learn_origins,
    lock_collection,
    remove_document,
)
from services.corpus.progress import expected_documents, expected_upload_documents
from services.errors import InputError, WorkbenchError
from services.settings import Settings, get_settings
from services.store import transaction


@dataclass(frozen=True)
class IngestProgress:
    documents_done: int
    documents_total: int | None  # None while files are still being discovered
    chunks_done: int  # written
    current: str
    chunks_embedded: int = 0  # embedded so far, written or not: moves during one large document
    documents_expected: int | None = None  # counted before reading (services.corpus.progress): a guide
    unchanged: int = 0  # already ingested with the same content: skipped, not embedded again

    @property
    def documents_guide(self) -> int | None:
        """The exact total once known, else the count expected before reading."""
        return self.documents_total if self.documents_total is not None else self.documents_expected


@dataclass
class IngestSummary:
    """What happened to every input; `outcomes` has one line per file or document."""

    ingested: int = 0
    replaced: int = 0
    unchanged: int = 0
    chunks_added: int = 0
    skipped: list[SkippedInput] = field(default_factory=list)
    outcomes: list[dict[str, object]] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "ingested": self.ingested,
            "replaced": self.replaced,
            "unchanged": self.unchanged,
            "chunks_added": self.chunks_added,
            "skipped": [{"source": s.source, "reason": s.reason} for s in self.skipped],
            "outcomes": self.outcomes,
        }


ProgressCallback = Callable[[IngestProgress], None]


def ingest_paths(
    paths: Sequence[Path],
    *,
    collection: str = "default",
    on_progress: ProgressCallback | None = None,
    settings: Settings | None = None,
    follow_links: bool = False,
) -> IngestSummary:
    """Ingest files and directories (recursively). A given path that does not exist is an
    InputError before anything is read: a typo must not look like a finished ingest. Symbolic
    links to files found inside a directory are skipped unless `follow_links`."""
    settings = settings or get_settings()
    missing = [str(path) for path in paths if not os.path.lexists(path)]
    if missing:
        raise InputError(f"no such file or directory: {', '.join(missing)}; nothing was ingested")
    expected = None if on_progress is None else expected_documents(paths, max_bytes=settings.max_upload_bytes)
    parsed = parse_paths(paths, max_bytes=settings.max_upload_bytes, follow_links=follow_links)
    return _ingest_parsed(parsed, collection, on_progress, settings, expected)


def ingest_uploads(
    files: Sequence[tuple[str, bytes]],
    *,
    collection: str = "default",
    on_progress: ProgressCallback | None = None,
    settings: Settings | None = None,
) -> IngestSummary:
    """Ingest in-memory files (name, bytes), e.g. from an upload widget."""
    settings = settings or get_settings()
    parsed = (parse_file(name, data, max_bytes=settings.max_upload_bytes) for name, data in files)
    expected = None if on_progress is None else expected_upload_documents(files)
    return _ingest_parsed(parsed, collection, on_progress, settings, expected)


def ingest_documents(
    documents: Iterable[SourceDocument],
    *,
    collection: str = "default",
    on_progress: ProgressCallback | None = None,
    settings: Settings | None = None,
) -> IngestSummary:
    """Ingest already-parsed documents."""
    settings = settings or get_settings()
    given = tuple(documents)
    return _ingest_parsed([ParsedFile(given, ())], collection, on_progress, settings, len(given))


def _ingest_parsed(
    parsed_files: Iterable[ParsedFile],
    collection: str,
    on_progress: ProgressCallback | None,
    settings: Settings,
    expected: int | None = None,
) -> IngestSummary:
    check_collection_name(collection)
    summary = IngestSummary()
    done = saved = embedded = 0

    def report(total: int | None = None) -> None:
        if on_progress is not None:
            current = str(summary.outcomes[-1]["source"]) if summary.outcomes else ""
            on_progress(IngestProgress(done, total, summary.chunks_added, current, embedded, expected,
                                       summary.unchanged))

    def report_embedded(count: int) -> None:
        nonlocal embedded
        embedded += count
        report()

    groups = chunked_groups(parsed_files, collection, settings)
    try:
        with closing(embedded_batches(groups, settings, report_embedded)) as batches:
            for batch, prepared in batches:
                done += _write_batch(batch, prepared, collection, summary, settings)
                saved = summary.ingested + summary.replaced  # committed
                report()
    except WorkbenchError as exc:
        if saved:  # the error speaks of the failed batch; the ones before it stand
            raise type(exc)(f"{exc} (That was one batch: {saved} documents from earlier batches of this ingest were "
                            "saved; run the same ingest again to finish it.)") from exc
        raise
    report(total=done)
    return summary


def _write_batch(batch: Batch, prepared: list[PreparedDocument], collection: str, summary: IngestSummary,
                 settings: Settings) -> int:
    """Write one batch atomically; the hashes are checked again, under the collection lock."""
    summary.skipped.extend(batch.skipped)
    summary.outcomes.extend({"source": s.source, "status": "skipped", "reason": s.reason} for s in batch.skipped)
    docs = batch.documents
    if not docs:
        return 0
    with transaction(settings) as session:
        collection_id = ensure_collection(session, collection)
        # Locking the stats row serializes writers per collection: df counts and the
        # hash re-check below stay exact even with concurrent ingests.
        lock_collection(session, collection_id)
        known = known_documents(session, collection_id, [d.external_id for d in docs])
        # An id a concurrent ingest gave to a document from elsewhere: never replaced.
        taken = {d.external_id for d in docs if d.external_id in known and not same_origin(known[d.external_id].source, d.origin)}
        learnt: dict[str, str] = {}
        for doc in docs:
            stored = known.get(doc.external_id)
            if stored is not None and doc.external_id in taken:
                reason = (f"the id '{doc.external_id}' was taken meanwhile by the document from {stored.source}; "
                          "ingest again to store this one under its path")
                summary.skipped.append(SkippedInput(doc.source, reason))
                summary.outcomes.append({"source": doc.source, "status": "skipped", "reason": reason})
            elif stored is not None and stored.digest == content_hash(doc):
                summary.unchanged += 1
                summary.outcomes.append({"source": doc.source, "external_id": doc.external_id, "status": "unchanged"})
                if doc.origin and stored.source != doc.origin:
                    learnt[doc.external_id] = doc.origin
        learn_origins(session, collection_id, learnt)
        # Left out: content someone ingested meanwhile (or an earlier batch of this ingest).
        fresh = [prep for prep in prepared if prep.source.external_id not in taken
                 and getattr(known.get(prep.source.external_id), "digest", None) != prep.digest]
        for prep in fresh:
            outcome: dict[str, object] = {"source": prep.source.source, "external_id": prep.source.external_id,
                                          "status": "ingested", "chunks": len(prep.chunks)}
            previous = known.get(prep.source.external_id)
            if previous is not None:
                remove_document(session, collection_id, prep.source.external_id)
                outcome["status"] = "replaced"
                outcome["replaced"] = {"source": previous.source, "updated_at": previous.updated_at.isoformat(timespec="seconds")}
            summary.replaced += previous is not None
            summary.ingested += previous is None
            summary.chunks_added += len(prep.chunks)
            summary.outcomes.append(outcome)
        insert_documents(session, collection_id, fresh)
    return len(docs)
