"""Pipeline benchmark: answerable-vs-unanswerable AUROC of final confidence, per-stage
latency per preset, and the share of runs per route; offline backend unless --backend says
otherwise (openai-compatible: the server at LLM_BASE_URL serving LLM_MODEL, see README).

    python bench/pipeline.py [--per-class 500] [--presets minimal,balanced,research]
                             [--backend offline|openai-compatible] [--set squad|python-reference|numpy-api]
                             [--self-calibrate] [--variants whole,strips,fallback-off,fallback-on,gaps-off,gaps-on]

--variants runs the first preset once per variant (issue 30): `whole` (the preset as it is),
`strips` (the answer composed from CRAG's knowledge strips), and `fallback-off` / `fallback-on`
on a corpus split in two: the asked collection holds half the documents (whole SQuAD articles,
or every other document of our sets) and the default collection, holding them all, is with
fallback-on the fallback CRAG's corrective actions search; `gaps-on` / `gaps-off` (the whole
corpus) with and without seed 000's gaps as additional context (each refined iteration's gap
queries searched on their own, their passages given to the generator after the question's).
Each case reports answer recall
(an answerable question's gold answer in the final answer), the AUROC of the final confidence
and of the judge's P(supported), answerable vs unanswerable, the mean number of iterations and
their distribution, p50 per stage, and the 1-minute load average before and after the case.

Last stdout line: {"auroc_answerable", "p50_ms_by_stage", "route_share", ...}, or
{"backend", "skipped": reason} when the chosen backend's server does not answer. Each
preset's AUROC comes with a bootstrap 95% interval: at 100 questions a class one sample
can differ from another by 0.05, more than most changes worth measuring.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (  # noqa: E402
    EVAL_SETS,
    emit,
    log,
    machine,
    median,
    phase,
    prepare_store,
    question_sample,
    rounded,
    shutdown_store,
    today,
)

STAGES = ("retrieval", "scoring", "crag", "fallback", "gap_context", "generation", "reflection", "judging", "grading", "gaps", "decision")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--per-class", type=int, default=500, help="answerable and unanswerable questions each")
    parser.add_argument("--presets", default="minimal,balanced,research")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the data dir")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--backend", choices=("offline", "openai-compatible"), default="offline")
    parser.add_argument("--set", dest="eval_set", choices=sorted(EVAL_SETS), default="squad",
                        help="whose corpus and questions (ours have fewer questions: up to --per-class a class)")
    parser.add_argument("--self-calibrate", action="store_true",
                        help="self-calibrate the corpus after ingest, so retrieval confidence is its fitted mapping")
    parser.add_argument("--variants", default="", help="whole,strips,fallback-off,fallback-on,gaps-off,gaps-on: the first preset "
                        "under each (see above) instead of every preset as it is")
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    skipped = unavailable_reason(args.backend)
    if skipped is not None:  # checked before the store starts and SQuAD is ingested
        log(f"skipped: the {args.backend} backend cannot run: {skipped}")
        emit({"backend": args.backend, "skipped": skipped})
        return
    data_dir, created, settings = prepare_store(args.data_dir)
    settings = settings.model_copy(update={"llm_backend": args.backend})
    from sklearn.metrics import roc_auc_score

    from services.answering import pipeline
    from services.answering.llm.backends import backend_for
    from services.corpus.ingest import ingest_paths

    timings: dict[str, float] = {}
    eval_set = EVAL_SETS[args.eval_set]
    try:
        with phase(f"ingest the {eval_set.name} corpus (real model)", timings):
            ingest_paths([eval_set.corpus])
        if args.self_calibrate:
            from services.scoring.self_calibration import self_calibrate

            with phase("self-calibrate the corpus", timings):
                self_calibrate("default", created_by="bench/pipeline.py")
        answerable, unanswerable = question_sample(eval_set, args.per_class, seed=args.seed)
        sample = [(q, 1) for q in answerable] + [(q, 0) for q in unanswerable]
        cases = bench_cases(args, eval_set, settings, timings)
        results: dict[str, dict] = {}
        for name, (preset, config, collection) in cases.items():
            # A fresh backend per case: the offline backend caches sentence embeddings, and a
            # case timed after another would otherwise find them already computed.
            backend = backend_for(settings)
            scores, labels, routes, iterations = [], [], Counter(), Counter()
            supported, found = [], 0
            load_before = os.getloadavg()
            with_gap_context = 0  # runs where a gap query's passages reached the generator
            stage_ms: dict[str, list[float]] = {s: [] for s in STAGES}
            with phase(f"{name}: {len(sample)} questions", timings):
                for i, (question, label) in enumerate(sample, 1):
                    run = pipeline.run(question["text"], preset, backend=backend, source="bench", settings=settings,
                                       config=config, collection=collection)
                    scores.append(run.final_confidence)
                    supported.append(run.p_supported if run.p_supported is not None else 0.0)
                    found += label and has_gold_answer(question, run.final_answer)
                    labels.append(label)
                    routes[" -> ".join(run.route)] += 1
                    iterations[len(run.iterations)] += 1
                    with_gap_context += any((h.origin or "").startswith("gap:") for it in run.iterations for h in it.hits)
                    for stage in STAGES:
                        spent = [it.latency_ms[stage] for it in run.iterations if stage in it.latency_ms]
                        if spent:
                            stage_ms[stage].append(sum(spent))
                    if i % 20 == 0:
                        log(f"  {name}: {i}/{len(sample)}")
            pos = [s for s, y in zip(scores, labels) if y]
            neg = [s for s, y in zip(scores, labels) if not y]
            results[name] = {
                "auroc_answerable": rounded(roc_auc_score(labels, scores)),
                "auroc_ci95": [rounded(v) for v in bootstrap_auroc_interval(labels, scores, seed=args.seed)],
                "auroc_p_supported": rounded(roc_auc_score(labels, supported)),
                "auroc_p_supported_ci95": [rounded(v) for v in bootstrap_auroc_interval(labels, supported,
                                                                                        seed=args.seed)],
                "answer_recall": rounded(found / len(answerable)) if answerable else None,
                "mean_confidence_answerable": rounded(sum(pos) / len(pos)),
                "mean_confidence_unanswerable": rounded(sum(neg) / len(neg)),
                "p50_ms_by_stage": {s: rounded(median(v), 1) for s, v in stage_ms.items() if v},
                "route_share": {r: rounded(c / len(sample)) for r, c in routes.most_common()},
                "mean_iterations": rounded(sum(n * c for n, c in iterations.items()) / len(sample)),
                "iterations_share": {n: rounded(c / len(sample)) for n, c in sorted(iterations.items())},
                "runs_with_gap_context": with_gap_context,
                # The 1-minute load before and after the case: the machine is shared, timings read with it.
                "load_1min": [rounded(load_before[0], 1), rounded(os.getloadavg()[0], 1)],
            }
            log(f"{name}: {results[name]}")
        headline = results.get("balanced") or next(iter(results.values()))
        emit({
            "auroc_answerable": headline["auroc_answerable"],
            "auroc_ci95": headline["auroc_ci95"],
            "p50_ms_by_stage": {p: r["p50_ms_by_stage"] for p, r in results.items()},
            "route_share": {p: r["route_share"] for p, r in results.items()},
            "by_preset": {p: {k: v for k, v in r.items() if k not in ("p50_ms_by_stage", "route_share")}
                          for p, r in results.items()},
            "set": eval_set.name,
            "questions": {"answerable": len(answerable), "unanswerable": len(unanswerable)},
            "backend": backend.label,
            "self_calibrated": args.self_calibrate,
            "variants": args.variants or None,
            "timings_s": timings,
            "machine": machine(),
            "date": today(),
        })
    finally:
        shutdown_store(settings, data_dir, remove=created and not args.keep)


VARIANTS = ("whole", "strips", "fallback-off", "fallback-on", "gaps-off", "gaps-on")
# The split corpus: the asked half, and the whole corpus (the default collection) as its fallback.
HALF, FULL = "half", "default"


def bench_cases(args: argparse.Namespace, eval_set, settings, timings: dict[str, float]) -> dict:  # type: ignore[no-untyped-def]
    """name -> (preset, config or None, collection): every preset as it is, or the first preset
    under each variant (ingesting the split corpus when a fallback variant asks for it)."""
    import dataclasses

    from services.answering.presets import configured

    presets = args.presets.split(",")
    if not args.variants:
        return {p: (p, None, "default") for p in presets}
    variants = args.variants.split(",")
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"unknown variants {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    preset, base = presets[0], configured(presets[0], settings)
    if {"fallback-off", "fallback-on"} & set(variants):
        ingest_split(eval_set, timings)
    options = {"whole": (dataclasses.replace(base, fallback_collection=None), "default"),
               "strips": (dataclasses.replace(base, fallback_collection=None, generate_from_strips=True), "default"),
               "fallback-off": (dataclasses.replace(base, fallback_collection=None), HALF),
               "fallback-on": (dataclasses.replace(base, fallback_collection=FULL, enable_fallback=True), HALF),
               "gaps-off": (dataclasses.replace(base, fallback_collection=None, gaps_as_context=False), "default"),
               "gaps-on": (dataclasses.replace(base, fallback_collection=None, gaps_as_context=True), "default")}
    return {f"{preset}/{v}": (preset, options[v][0], options[v][1]) for v in variants}


def ingest_split(eval_set, timings: dict[str, float]) -> None:  # type: ignore[no-untyped-def]
    """Half the documents into HALF (FULL, all of them, is ingested already). SQuAD is split by article (an article's
    paragraphs answer each other's questions), our sets document by document."""
    import json
    import tempfile

    from bench._common import read_jsonl
    from services.corpus.ingest import ingest_paths

    documents = read_jsonl(eval_set.corpus)
    titles = sorted({d.get("title", "") for d in documents})
    by_article = len(titles) > 10 and len(titles) < len(documents) / 2
    kept_titles = set(titles[::2])
    half = [d for i, d in enumerate(documents) if (d.get("title", "") in kept_titles if by_article else i % 2 == 0)]
    with tempfile.TemporaryDirectory() as folder, phase(f"ingest the split corpus ({len(half)} of "
                                                        f"{len(documents)} documents asked)", timings):
        path = Path(folder) / "corpus.jsonl"
        path.write_text("".join(json.dumps(d) + "\n" for d in half), encoding="utf-8")
        ingest_paths([path], collection=HALF)


def has_gold_answer(question: dict, answer: str) -> bool:  # type: ignore[type-arg]
    """An answerable question's gold answer (SQuAD's answers, our sets' answer) in the answer."""
    meta = question["metadata"]
    golds = meta.get("answers") or ([meta["answer"]] if meta.get("answer") else [])
    text = answer.lower()
    return any(str(gold).lower() in text for gold in golds)


def unavailable_reason(backend: str) -> str | None:
    """Why `backend` cannot answer here, or None; the offline one always can."""
    if backend == "offline":
        return None
    from services.answering.llm.openai_backend import unreachable_reason
    from services.settings import Settings

    settings = Settings()
    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    reason = unreachable_reason(settings.llm_base_url, api_key=key)
    return reason or (None if settings.llm_model else "LLM_MODEL is not set")


def bootstrap_auroc_interval(labels: list[int], scores: list[float], *, seed: int,
                             rounds: int = 1000) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of AUROC over resamples of the questions, each class
    resampled on its own so every resample keeps the sample's balance."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    y, s = np.asarray(labels), np.asarray(scores)
    positive, negative = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    values = []
    for _ in range(rounds):
        picked = np.concatenate([rng.choice(positive, positive.size), rng.choice(negative, negative.size)])
        values.append(roc_auc_score(y[picked], s[picked]))
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


if __name__ == "__main__":
    main()
