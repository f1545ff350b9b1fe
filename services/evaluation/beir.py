"""The whole evaluation the Evaluate page and `workbench eval` both run: BEIR files in (queries,
qrels, optionally a corpus to ingest first), one report per retrieval mode out.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from services.corpus.indexing import find_collection, known_hashes
from services.corpus.ingest import IngestProgress, IngestSummary, ingest_paths
from services.domain import RETRIEVAL_MODES
from services.errors import InputError
from services.evaluation.measures import ModeReport, add_self_calibration, check_modes, evaluate
from services.retrieval.beir_files import EvalQuery, named, read_qrels, read_queries
from services.scoring.self_calibration import fit_collection
from services.scoring.weights import WeightsProfile
from services.settings import Settings
from services.store import read_transaction, wait_for_reads


@dataclass(frozen=True)
class BeirFiles:
    queries: Path
    qrels: Path
    corpus: Path | None = None  # ingested into the collection first when given


@dataclass(frozen=True)
class EvaluationOutcome:
    collection: str
    profile: WeightsProfile  # what each query's confidence was scored with
    reports: list[ModeReport]  # in the order the modes were asked for
    queries: list[EvalQuery]  # the judged queries that were evaluated, in file order
    ingest: IngestSummary | None  # None when no corpus was given
    warnings: list[str] = field(default_factory=list)  # every query, judgement or document left out, by id


def load_judged_queries(files: BeirFiles, limit: int | None = None,
                        warnings: list[str] | None = None) -> tuple[list[EvalQuery], dict[str, dict[str, int]]]:
    """The queries that have a relevance judgement, in file order (the first `limit`; None: all).
    What is left out is appended to `warnings` (when given), one line per line or kind of id."""
    if limit is not None and limit < 1:
        raise InputError(f"the query limit must be at least 1 (got {limit}); leave it out to evaluate every query")
    qrels, qrels_warnings = read_qrels(files.qrels)
    query_file = read_queries(files.queries)
    queries = [q for q in query_file.queries if qrels.get(q.query_id)]
    if not queries:
        raise InputError("none of the queries has a relevance judgement in the qrels file")
    if warnings is not None:
        unjudged = [q.query_id for q in query_file.queries if not qrels.get(q.query_id)]
        asked = {q.query_id for q in query_file.queries}
        unasked = [query_id for query_id in qrels if query_id not in asked]
        warnings.extend(query_file.warnings + qrels_warnings)
        if unjudged:
            warnings.append(f"{len(unjudged)} queries have no relevance judgement and were left out: {named(unjudged)}")
        if unasked:
            warnings.append(f"{len(unasked)} judged query ids are not in {files.queries} (or were left out): {named(unasked)}")
    return queries[:limit], qrels


def _unknown_documents(queries: Sequence[EvalQuery], qrels: dict[str, dict[str, int]], collection: str,
                       settings: Settings | None) -> list[str]:
    """Judged document ids the collection does not hold: they can only ever score 0."""
    judged = sorted({doc for q in queries for doc in qrels[q.query_id]})
    with read_transaction(settings) as session:
        collection_id = find_collection(session, collection)
        known = set() if collection_id is None else set(known_hashes(session, collection_id, judged))
    return [doc for doc in judged if doc not in known]


def evaluate_beir(
    files: BeirFiles,
    *,
    collection: str,
    profile: WeightsProfile,
    modes: Sequence[str] = RETRIEVAL_MODES,
    limit: int | None = None,
    on_ingest_progress: Callable[[IngestProgress], None] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    self_calibration: int = 0,
    on_calibration_progress: Callable[[int, int], None] | None = None,
    settings: Settings | None = None,
) -> EvaluationOutcome:
    """Check the inputs, ingest the corpus (if given; unchanged documents are skipped), then
    evaluate every mode. Cheap checks come first, so a bad file fails before a long ingest.

    With `self_calibration` > 0, that many pseudo-questions of the collection fit each mode's
    mapping (nothing is stored) and every report gets its figures after the mapping too.
    The weighted sums before are `profile`'s weights, without any mapping it holds."""
    collection = collection.strip()
    if not collection:
        raise InputError("give a collection name to evaluate in")
    check_modes(modes)
    warnings: list[str] = []
    queries, qrels = load_judged_queries(files, limit, warnings)
    summary = None
    if files.corpus is not None:
        summary = ingest_paths([files.corpus], collection=collection, on_progress=on_ingest_progress, settings=settings)
        if summary.ingested + summary.replaced + summary.unchanged == 0:
            reasons = "; ".join(f"{s.source}: {s.reason}" for s in summary.skipped[:3])
            raise InputError(f"no documents could be read from the corpus {files.corpus} ({reasons})")
        wait_for_reads(settings)  # the searches below may run on a replica
    if unknown := _unknown_documents(queries, qrels, collection, settings):
        warnings.append(f"{len(unknown)} judged documents are not in the collection {collection!r} and score 0 "
                        f"wherever they are relevant: {named(unknown)}")
    reports = evaluate(queries, qrels, profile=profile, modes=modes, collection=collection, on_progress=on_progress,
                       settings=settings)
    if self_calibration > 0:
        try:
            _pseudo, calibrated, skipped = fit_collection(collection, modes=modes, n=self_calibration, profile=profile,
                                                 on_progress=on_calibration_progress, settings=settings)
        except InputError as exc:  # too small a corpus to ask itself enough questions: say so, keep the figures
            for report in reports:
                report.self_calibrated = {"skipped": str(exc)}
        else:
            add_self_calibration(reports, {c.mode: c.mapping for c in calibrated}, skipped)
    return EvaluationOutcome(collection, profile, reports, queries, summary, warnings)
