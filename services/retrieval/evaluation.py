"""Retrieval evaluation on BEIR-format sets: nDCG@10, Recall@100, MRR@10, and how well the
confidence predicts "a relevant document is in the top 10" (AUROC, ECE), before and after
self-calibration (services.scoring.self_calibration, which never reads the qrels).

`evaluate_beir` is the whole evaluation the Evaluate page and `workbench eval` both run;
`evaluate` is its scoring step on queries already loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import ir_measures
import numpy as np
from ir_measures import RR, R, nDCG
from sklearn.metrics import roc_auc_score

from services.answering.llm.base import AnswerBackend
from services.corpus.indexing import find_collection, known_hashes
from services.corpus.ingest import IngestProgress, IngestSummary, ingest_paths
from services.domain import RETRIEVAL_MODES
from services.errors import InputError
from services.retrieval import embedding
from services.retrieval.beir_files import EvalQuery, load_qrels, load_queries, named, read_qrels, read_queries  # noqa: F401  (loaders re-exported)
from services.retrieval.search import default_params, search_in_session
from services.scoring.calibration import calibration_metrics
from services.scoring.confidence import components_from_raw, overall, retrieval_metrics
from services.scoring.mapping import ConfidenceMapping
from services.scoring.self_calibration import fit_collection
from services.scoring.weights import WeightsProfile
from services.settings import Settings, get_settings
from services.store import read_transaction, wait_for_reads

MEASURES = {"ndcg@10": nDCG @ 10, "recall@100": R @ 100, "mrr@10": RR @ 10}
DOC_DEPTH = 100  # documents ranked per query (Recall@100 needs 100)


@dataclass
class ModeReport:
    mode: str
    metrics: dict[str, float]
    confidence_auroc: float | None  # confidence vs "a relevant document is in the top 10"
    per_query: list[dict[str, object]] = field(default_factory=list)
    confidence_ece: float | None = None
    # The same two figures with a mapping self-calibration fitted on this collection (None: not run)
    self_calibrated: dict[str, object] | None = None

    def to_dict(self, *, with_queries: bool = False) -> dict[str, object]:
        data: dict[str, object] = {"mode": self.mode, **self.metrics, "confidence_auroc": self.confidence_auroc,
                                   "confidence_ece": self.confidence_ece}
        if self.self_calibrated is not None:
            data["self_calibrated"] = self.self_calibrated
        if with_queries:
            data["per_query"] = self.per_query
        return data


def evaluate(
    queries: Sequence[EvalQuery],
    qrels: dict[str, dict[str, int]],
    *,
    profile: WeightsProfile,
    modes: Sequence[str] = RETRIEVAL_MODES,
    collection: str = "default",
    on_progress: Callable[[int, int], None] | None = None,
    settings: Settings | None = None,
) -> list[ModeReport]:
    """Run every judged query through each mode; chunk hits are aggregated to documents.

    Each query's confidence is its top 10 hits scored with `profile` (pass the active one,
    services.scoring.profiles.active_profile, to match what Search and Ask show).
    """
    settings = settings or get_settings()
    _check_modes(modes)
    judged = [q for q in queries if qrels.get(q.query_id)]
    if not judged:
        raise InputError("none of the queries has a relevance judgement in the qrels file")
    vectors = embedding.encode(settings.embedding_model, [q.text for q in judged])
    total, done = len(judged) * len(modes), 0
    reports = []
    for mode in modes:
        params = default_params(settings, mode=mode, k=DOC_DEPTH * 2, depth=DOC_DEPTH * 2, collection=collection)
        run: dict[str, dict[str, float]] = {}
        per_query: list[dict[str, object]] = []
        with read_transaction(settings) as session:
            for query, vector in zip(judged, vectors):
                result = search_in_session(query.text, params, session=session, settings=settings, query_vector=vector)
                ranked = _documents_in_rank_order(result.hits)[:DOC_DEPTH]
                run[query.query_id] = {doc: float(len(ranked) - i) for i, doc in enumerate(ranked)}
                raw = retrieval_metrics(result, top=10)
                relevant = {d for d, rel in qrels[query.query_id].items() if rel > 0}
                per_query.append({
                    "query_id": query.query_id,
                    "confidence": overall(components_from_raw(raw), profile),
                    "qpp": raw["qpp"],
                    "hit_at_10": bool(relevant & set(ranked[:10])),
                })
                done += 1
                if on_progress is not None:
                    on_progress(done, total)
        metrics = _aggregate(qrels, run)
        reports.append(ModeReport(mode, metrics, _auroc(per_query), per_query, _ece(per_query)))
    return reports


def add_self_calibration(reports: Sequence[ModeReport], mappings: dict[str, ConfidenceMapping],
                         skipped: dict[str, str]) -> None:
    """Each report's AUROC and ECE again, with its mode's mapping applied to every query."""
    for report in reports:
        mapping = mappings.get(report.mode)
        if mapping is None:
            report.self_calibrated = {"skipped": skipped.get(report.mode, "no mapping was fitted for this mode")}
            continue
        after = [{**p, "confidence": mapping(float(p["confidence"]), p["qpp"])} for p in report.per_query]  # type: ignore[arg-type]
        report.self_calibrated = {"confidence_auroc": _auroc(after), "confidence_ece": _ece(after),
                                  "pseudo_queries": mapping.n_fitted, "pseudo_found": mapping.positives}


def _check_modes(modes: Sequence[str]) -> None:
    if not modes:
        raise InputError("choose at least one retrieval mode")
    unknown = [m for m in modes if m not in RETRIEVAL_MODES]
    if unknown:
        raise InputError(f"unknown mode(s) {', '.join(unknown)}; choose from {', '.join(RETRIEVAL_MODES)}")


def _documents_in_rank_order(hits) -> list[str]:  # type: ignore[no-untyped-def]
    """A document ranks where its best chunk ranks (max-score aggregation)."""
    seen: dict[str, None] = {}
    for hit in hits:
        seen.setdefault(hit.external_id, None)
    return list(seen)


def _aggregate(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, float]:
    judged_qrels = {q: docs for q, docs in qrels.items() if q in run}
    values = ir_measures.calc_aggregate(list(MEASURES.values()), judged_qrels, run)
    return {name: float(values[measure]) for name, measure in MEASURES.items()}


def _ece(per_query: list[dict[str, object]]) -> float:
    scores = [min(max(float(p["confidence"]), 0.0), 1.0) for p in per_query]  # type: ignore[arg-type]
    return calibration_metrics(scores, [int(bool(p["hit_at_10"])) for p in per_query]).ece


def _auroc(per_query: list[dict[str, object]]) -> float | None:
    labels = np.array([bool(p["hit_at_10"]) for p in per_query])
    if labels.all() or not labels.any():
        return None  # AUROC is undefined with one class
    scores = np.array([float(p["confidence"]) for p in per_query])  # type: ignore[arg-type]
    return float(roc_auc_score(labels, scores))


# --- the whole evaluation: files in, reports out ------------------------------------------

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
    _check_modes(modes)
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


def queue_evaluation_runs(
    queries: Sequence[EvalQuery],
    *,
    preset: str = "balanced",
    collection: str = "default",
    requested_by: str = "evaluation",
    on_progress: Callable[[int, int], None] | None = None,
    backend: AnswerBackend | None = None,
) -> list[int]:
    """Answer evaluated questions with the pipeline (source "eval") and put every run in the
    review queue as pending, returning the run ids in query order.

    Runs the pipeline would auto-accept are queued too: these runs exist to collect verdicts
    for calibration, and verdicts on the low-confidence runs alone would be a biased sample.
    """
    from services.answering import pipeline
    from services.answering.llm.backends import backend_for

    backend = backend or backend_for()
    run_ids: list[int] = []
    for done, query in enumerate(queries, start=1):
        run = pipeline.run(query.text, preset, backend=backend, collection=collection, source="eval",
                           force_pending=True, requested_by=requested_by)
        assert run.run_id is not None  # pipeline.run returns the stored run
        run_ids.append(run.run_id)
        if on_progress is not None:
            on_progress(done, len(queries))
    return run_ids
