"""Which query-performance signals earn a place in the confidence mapping, on several corpora.

    python bench/qpp.py [--sets squad,python-reference,numpy-api] [--pseudo 600] [--modes hybrid,bm25,dense]

For each BEIR set: ingest it, search every judged question (the label: a relevant document
in the top 10, from the qrels) and the set's own pseudo-questions (services.scoring.
pseudo_queries; the label needs no qrels). Then, per mode, the AUROC on the judged
questions of: the weighted confidence; each signal of services/scoring/qpp.py alone; and
the mapping fitted on the pseudo-questions alone with the weighted confidence plus that
signal (AUROC and ECE); and, for each kept signal, the kept set without it. A signal is kept
(qpp.SIGNALS) only when the kept set without it ranks or calibrates worse on the hybrid
mode of at least two corpora. Last line: the JSON of every figure.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import EVAL_SETS, emit, log, machine, phase, prepare_store, rounded, shutdown_store, today  # noqa: E402


def searched(texts: list[str], wanted: list[set[str]], passages: list[str | None], *, collection: str, mode: str,
             settings: Any, depth: int) -> list[dict[str, Any]]:
    """Every signal, the weighted confidence and the label of each searched text, searched
    `depth` deep in each leg (the judged questions as `workbench eval` searches them, the
    pseudo-questions as self-calibration does)."""
    from services.retrieval import embedding
    from services.retrieval.search import default_params, search_in_session
    from services.retrieval.text import tokenize
    from services.scoring import qpp
    from services.scoring.confidence import components_from_raw, overall, retrieval_metrics
    from services.scoring.self_calibration import came_back
    from services.scoring.weights import DEFAULT_PROFILE
    from services.store import transaction

    vectors = embedding.encode(settings.embedding_model, texts) if mode != "bm25" else [None] * len(texts)
    params = default_params(settings, mode=mode, k=depth, depth=depth, collection=collection)
    rows = []
    with transaction(settings) as session:
        for query, docs, passage, vector in zip(texts, wanted, passages, vectors):
            result = search_in_session(query, params, session=session, settings=settings, query_vector=vector)
            raw = retrieval_metrics(result, top=10)
            rows.append({"weighted": overall(components_from_raw(raw), DEFAULT_PROFILE),
                         "signals": qpp.all_signals(result.leg_scores, query_terms=len(tokenize(query)),
                                                    query_idf=result.query_idf),
                         "found": int(came_back(result, docs, passage))})
    return rows


def measure(real: list[dict[str, Any]], pseudo: list[dict[str, Any]]) -> dict[str, Any]:
    from sklearn.metrics import roc_auc_score

    from services.scoring import qpp
    from services.scoring.calibration import calibration_metrics
    from services.scoring.mapping import fit_mapping

    labels = [r["found"] for r in real]

    def mapped(features: tuple[str, ...], method: str = "logistic") -> tuple[float, float]:
        mapping = fit_mapping([p["weighted"] for p in pseudo], [p["signals"] for p in pseudo],
                              [p["found"] for p in pseudo], features=features, method=method)
        scores = [mapping(r["weighted"], r["signals"]) for r in real]
        return rounded(roc_auc_score(labels, scores)), rounded(calibration_metrics(scores, labels).ece)

    out: dict[str, Any] = {"judged": len(real), "judged_found": rounded(sum(labels) / len(labels)),
                           "pseudo": len(pseudo), "pseudo_found": rounded(sum(p["found"] for p in pseudo) / len(pseudo)),
                           "weighted_auroc": rounded(roc_auc_score(labels, [r["weighted"] for r in real])),
                           "weighted_ece": rounded(calibration_metrics([min(max(r["weighted"], 0), 1) for r in real], labels).ece),
                           "isotonic": mapped((), "isotonic"), "kept": mapped(qpp.SIGNALS), "signals": {}}
    for name in sorted({n for r in real for n in r["signals"]}):
        alone = [r["signals"].get(name, 0.0) for r in real]
        with_weighted = mapped((name,))
        out["signals"][name] = {"alone_auroc": rounded(roc_auc_score(labels, alone)),
                                "with_weighted_auroc": with_weighted[0], "with_weighted_ece": with_weighted[1]}
        if name in qpp.SIGNALS:  # what the kept set loses without it: (AUROC, ECE)
            out["signals"][name]["kept_without"] = mapped(tuple(s for s in qpp.SIGNALS if s != name))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sets", default=",".join(EVAL_SETS))
    parser.add_argument("--modes", default="hybrid,bm25,dense")
    parser.add_argument("--pseudo", type=int, default=600, help="pseudo-questions per set")
    parser.add_argument("--seed", type=int, default=0, help="of the pseudo-questions (0: what self-calibration uses)")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the data dir")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    data_dir, created, settings = prepare_store(args.data_dir)
    from services.corpus.ingest import ingest_paths
    from services.evaluation.beir import BeirFiles, load_judged_queries
    from services.evaluation.measures import DOC_DEPTH
    from services.scoring import qpp
    from services.scoring.pseudo_queries import sample_pseudo_queries
    from services.scoring.self_calibration import SEARCH_HITS
    from services.store import transaction

    results: dict[str, Any] = {}
    try:
        for name in args.sets.split(","):
            eval_set = EVAL_SETS[name]
            if not eval_set.corpus.exists():
                log(f"{name}: skipped, {eval_set.corpus} is not there")
                continue
            collection = f"qpp-{name}"
            with phase(f"{name}: ingest"):
                ingest_paths([eval_set.corpus], collection=collection)
            queries, qrels = load_judged_queries(BeirFiles(eval_set.queries, eval_set.qrels))
            with transaction() as session:
                pseudo = sample_pseudo_queries(session, collection=collection, n=args.pseudo, seed=args.seed)
            results[name] = {}
            for mode in args.modes.split(","):
                with phase(f"{name}: {mode}, {len(queries)} judged and {len(pseudo)} pseudo-questions"):
                    real = searched([q.text for q in queries], [{d for d, r in qrels[q.query_id].items() if r > 0}
                                                                 for q in queries], [None] * len(queries),
                                    collection=collection, mode=mode, settings=settings, depth=2 * DOC_DEPTH)
                    asked = searched([p.text for p in pseudo], [{p.document} for p in pseudo], [p.passage for p in pseudo],
                                     collection=collection, mode=mode, settings=settings, depth=SEARCH_HITS)
                results[name][mode] = measure(real, asked)
                log(f"{name} {mode}: {results[name][mode]}")
    finally:
        shutdown_store(settings, data_dir, remove=created and not args.keep)
    hybrid = [by_mode["hybrid"] for by_mode in results.values() if "hybrid" in by_mode]
    raised = {s: sum(1 for h in hybrid if s in h["signals"] and h["signals"][s]["with_weighted_auroc"] > h["weighted_auroc"])
              for s in qpp.all_signals({"bm25": [2.0, 1.0], "dense": [0.6, 0.5]}, query_terms=1, query_idf=1.0)}
    # A kept signal earns its place where the kept set without it ranks worse or calibrates worse.
    needed = {s: sum(1 for h in hybrid if h["signals"][s]["kept_without"][0] < h["kept"][0]
                     or h["signals"][s]["kept_without"][1] > h["kept"][1]) for s in qpp.SIGNALS}
    emit({"date": today(), "machine": machine(), "kept": list(qpp.SIGNALS), "pseudo_seed": args.seed,
          "corpora_where_signal_raises_hybrid_auroc": raised, "corpora_where_kept_signal_is_needed": needed,
          "sets": results})


if __name__ == "__main__":
    main()
