"""When an ingest should re-fit a collection's confidence mapping, and doing it without failing
the ingest.

`workbench ingest` and the Corpus page both ask `decide_recalibration` after an ingest: a
collection big enough (Settings.self_calibration_min_chunks, 0 = never) whose documents just
changed gets `self_calibrate` run for it. The ingest is committed by then, so a calibration
that cannot be done (too few usable pseudo-questions, all found) comes back as a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import text

from services.corpus.indexing import find_collection
from services.corpus.ingest import IngestSummary
from services.errors import WorkbenchError
from services.scoring.self_calibration import SelfCalibration, self_calibrate
from services.settings import Settings, get_settings
from services.store import transaction

AFTER_INGEST = "self-calibration after ingest"  # created_by of the profiles stored this way

# Chunk counts come from bm25_stats, which every ingest and removal keeps exact in its own
# transaction: a count(*) over chunks reads the whole partition (seconds at a million chunks),
# and one looked up by name inside the statement would plan every collection's partition.
_COLLECTIONS_SQL = text("""
SELECT c.name,
       (SELECT count(*) FROM documents d WHERE d.collection_id = c.id) AS documents,
       coalesce((SELECT s.n_chunks FROM bm25_stats s WHERE s.collection_id = c.id), 0) AS chunks
FROM collections c ORDER BY c.name
""")
CHUNKS_SQL = text("SELECT coalesce(max(n_chunks), 0) FROM bm25_stats WHERE collection_id = CAST(:cid AS integer)")


@dataclass(frozen=True)
class CollectionSize:
    name: str
    documents: int
    chunks: int


@dataclass(frozen=True)
class RecalibrationDecision:
    collection: str
    recalibrate: bool
    reason: str  # why (not), one sentence for the CLI and the page
    chunks: int


@dataclass(frozen=True)
class Recalibration:
    """What the after-ingest calibration did: stored `result`, or `warning` when it could not."""

    decision: RecalibrationDecision
    result: SelfCalibration | None = None
    warning: str | None = None


def list_collections(*, settings: Settings | None = None) -> list[CollectionSize]:
    """Every collection with its document and chunk counts, by name."""
    with transaction(settings) as session:
        return [CollectionSize(r.name, int(r.documents), int(r.chunks)) for r in session.execute(_COLLECTIONS_SQL)]


def recalibration_decision(*, collection: str, changed_documents: int, chunks: int,
                           min_chunks: int) -> RecalibrationDecision:
    """Recalibrate when documents were added or replaced and the collection holds at least
    `min_chunks` chunks (0: never). Below that, pseudo-questions are too few for a stable fit."""
    def decided(recalibrate: bool, reason: str) -> RecalibrationDecision:
        return RecalibrationDecision(collection, recalibrate, reason, chunks)

    if min_chunks <= 0:
        return decided(False, "automatic self-calibration is off (SELF_CALIBRATION_MIN_CHUNKS=0)")
    if changed_documents <= 0:
        return decided(False, "no document was added or replaced, so the calibration still holds")
    if chunks < min_chunks:
        return decided(False, f"'{collection}' holds {chunks:,} chunks; automatic self-calibration starts at "
                              f"{min_chunks:,} (SELF_CALIBRATION_MIN_CHUNKS)")
    return decided(True, f"'{collection}' holds {chunks:,} chunks and {changed_documents:,} documents changed")


def decide_recalibration(summary: IngestSummary, *, collection: str,
                         settings: Settings | None = None) -> RecalibrationDecision:
    """Should the ingest that produced `summary` re-fit `collection`'s mapping?"""
    settings = settings or get_settings()
    changed = summary.ingested + summary.replaced
    chunks = 0
    if settings.self_calibration_min_chunks > 0 and changed > 0:  # only count when the answer depends on it
        with transaction(settings) as session:
            cid = find_collection(session, collection)
            chunks = 0 if cid is None else int(session.scalar(CHUNKS_SQL, {"cid": cid}) or 0)
    return recalibration_decision(collection=collection, changed_documents=changed, chunks=chunks,
                                  min_chunks=settings.self_calibration_min_chunks)


def recalibrate(decision: RecalibrationDecision, *, created_by: str = AFTER_INGEST,
                on_progress: Callable[[int, int], None] | None = None,
                settings: Settings | None = None) -> Recalibration:
    """Run self-calibration when `decision` says so; a calibration that fails is a warning,
    since the ingest before it already stands."""
    if not decision.recalibrate:
        return Recalibration(decision)
    try:
        result = self_calibrate(decision.collection, created_by=created_by, on_progress=on_progress, settings=settings)
    except WorkbenchError as exc:
        return Recalibration(decision, warning=f"self-calibration of '{decision.collection}' was not stored: {exc}")
    return Recalibration(decision, result=result)


def describe_calibration(result: SelfCalibration) -> list[str]:
    """What was stored and the held-out figures per mode, as lines for the CLI and the pages."""
    lines = [f"stored {result.profile.label} (profile id {result.profile_id}) with '{result.collection}' mappings "
             f"fitted on {result.pseudo_queries} pseudo-questions (seed {result.seed})"]
    for m in result.modes:
        lines.append(f"{m.mode}: AUROC {_figure(m.before.auroc)} -> {_figure(m.after.auroc)}, "
                     f"ECE {m.before.ece:.3f} -> {m.after.ece:.3f} ({m.mapping.positives}/{m.mapping.n_fitted} found)")
    lines += [f"{mode}: not calibrated ({reason})" for mode, reason in result.skipped.items()]
    return lines


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
