"""Which stored document an incoming one is: its id, and where both came from."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from services.corpus.extract import SkippedInput, SourceDocument


@dataclass(frozen=True)
class StoredDocument:
    """What is stored under one id: its content hash, where it came from, when it was written."""

    digest: str
    source: str
    updated_at: datetime


def same_origin(stored: str, incoming: str) -> bool:
    """Two known locations must be equal. A document whose location is unknown (an upload, or
    one stored before locations were kept, holding its bare name) is taken to be the same one,
    as it always was: re-ingesting it stays idempotent."""
    return stored == incoming or not os.path.isabs(stored) or not os.path.isabs(incoming)


def candidate_ids(docs: Sequence[SourceDocument]) -> list[str]:
    """Every id the documents could be stored under: their own, and their origin (see `place_documents`)."""
    return [d.external_id for d in docs] + [d.origin for d in docs if d.origin]


def place_documents(docs: Sequence[SourceDocument], stored: Mapping[str, StoredDocument], claimed: dict[str, str]
                    ) -> tuple[list[SourceDocument], list[SkippedInput]]:
    """The documents under the ids they are stored by, and the repeats left out.

    A document whose id is held by one from elsewhere (stored, or `claimed` earlier in this
    ingest: id -> origin, updated here) is a different document: it is stored under its
    origin (its absolute path) instead of replacing the other. `stored` must hold the rows
    of `candidate_ids(docs)`.
    """
    placed: list[SourceDocument] = []
    skipped: list[SkippedInput] = []

    def holder(external_id: str) -> str | None:
        if external_id in claimed:
            return claimed[external_id]
        return stored[external_id].source if external_id in stored else None

    for doc in docs:
        held_by = holder(doc.external_id)
        if held_by is not None and not same_origin(held_by, doc.origin):
            doc = replace(doc, external_id=doc.origin)
        if doc.external_id in claimed:
            reason = f"duplicate document id '{doc.external_id}' in this ingest; the first one was kept"
            skipped.append(SkippedInput(doc.source, reason))
            continue
        claimed[doc.external_id] = doc.origin
        placed.append(doc)
    return placed, skipped
