"""Retrieval evaluation on loaded BEIR queries: nDCG@10, Recall@100, MRR@10, and how well the
confidence predicts "a relevant document is in the top 10" (AUROC, ECE), before and after
self-calibration (services.scoring.self_calibration, which never reads the qrels).

`evaluate` is the scoring step of the whole evaluation (services.evaluation.beir.evaluate_beir).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import ir_measures
import numpy as np
from ir_measures import RR, R, nDCG
from sklearn.metrics import roc_auc_score

from services.domain import RETRIEVAL_MODES
from services.errors import InputError
from services.retrieval import embedding
from services.retrieval.beir_files import EvalQuery
from services.retrieval.search import default_params, search_in_session
from services.scoring.calibration import calibration_metrics
from services.scoring.confidence import components_from_raw, overall, retrieval_metrics
from services.scoring.mapping import ConfidenceMapping
from services.scoring.weights import WeightsProfile
from services.settings import Settings, get_settings
from services.store import read_transaction

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
    check_modes(modes)
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


def check_modes(modes: Sequence[str]) -> None:
    """Refuse an empty choice or a mode that is not a retrieval mode, naming the ones there are."""
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
