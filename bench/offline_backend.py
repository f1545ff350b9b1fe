"""Offline answer backend: latency on the demo corpus, answer recall and reflection AUROC on SQuAD 2.0.

    python bench/offline_backend.py                 # 200 + 200 SQuAD questions (~10 minutes)
    python bench/offline_backend.py --squad 50      # quick

Latency: generate + reflect for each demo question against its 5 best chunks of the demo
corpus (chunked as ingest does, ranked by the real model in memory), with a fresh backend
and cleared caches per query, so every sentence is segmented and embedded anew.

SQuAD: each answerable question gets its gold paragraph plus 4 other paragraphs (of the
same article where it has enough, so distractors are on topic), the gold at a random
position. Answer recall = share of answers containing any gold answer string; the
extraction ceiling = share where some candidate sentence contains one. Reflection AUROC
separates answerable from unanswerable questions given the same kind of context (and,
separately, given the gold paragraph alone). Progress on stderr; last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import emit, log, machine, median, percentile, rounded, squad_paragraphs, squad_questions, today  # noqa: E402

DEMO_DIR = Path(__file__).resolve().parents[1] / "services" / "demo_data"


def hits_of(texts: list[tuple[str, str]]) -> list[Any]:
    from services.domain import Hit

    return [Hit(i + 1, i + 1, external_id, external_id, text, i + 1, 1.0 / (i + 1))
            for i, (external_id, text) in enumerate(texts)]


def demo_latency(model: str) -> dict[str, Any]:
    from services.answering.offline import OfflineBackend
    from services.corpus.chunking import chunk_text
    from services.judging import _lexical
    from services.retrieval.embedding import encode, token_counter

    count = token_counter(model)
    chunks: list[tuple[str, str]] = []
    for path in sorted((DEMO_DIR / "corpus").glob("*.md")):
        chunks.extend((f"{path.name}#{c.ordinal}", c.text) for c in chunk_text(path.read_text(), count_tokens=count))
    chunk_vectors = encode(model, [t for _, t in chunks])
    questions = [json.loads(line) for line in (DEMO_DIR / "questions.jsonl").read_text().splitlines() if line]
    timings, cpu, sentences = [], [], []
    for question in questions:
        query = question["text"]
        order = np.argsort(-(chunk_vectors @ encode(model, [query])[0]), kind="stable")[:5]
        hits = hits_of([chunks[i] for i in order])
        _lexical.segment_chunk.cache_clear()
        backend = OfflineBackend(model)
        started, cpu_started = time.perf_counter(), time.process_time()
        generation = backend.generate(query, hits)
        backend.reflect(query, generation.answer, hits)
        timings.append((time.perf_counter() - started) * 1000)
        cpu.append((time.process_time() - cpu_started) * 1000)
        sentences.append(sum(len(_lexical.segment_chunk(h.text)) for h in hits))
    log(f"demo latency: median {median(timings):.0f} ms wall, {median(cpu):.0f} ms CPU over {len(timings)} queries")
    return {"queries": len(timings), "chunks_per_query": 5, "chunk_sentences_median": median(sentences),
            "generate_reflect_ms_median": rounded(median(timings), 1),
            "generate_reflect_ms_p90": rounded(percentile(timings, 90), 1),
            # CPU time of this process (all its threads): less sensitive to a busy machine.
            "generate_reflect_cpu_ms_median": rounded(median(cpu), 1),
            "corpus_chunks": len(chunks)}


def contexts(question: dict[str, Any], by_id: dict[str, dict[str, Any]], by_title: dict[str, list[str]],
             all_ids: list[str], rng: random.Random) -> list[tuple[str, str]]:
    gold = question["metadata"]["gold_doc"]
    title = by_id[gold]["title"]
    pool = [p for p in by_title[title] if p != gold]
    others = rng.sample(pool, 4) if len(pool) >= 4 else pool + rng.sample([p for p in all_ids if p != gold], 4 - len(pool))
    ids = others[:]
    ids.insert(rng.randrange(5), gold)
    return [(i, by_id[i]["text"]) for i in ids]


def squad(n: int, seed: int, model: str, skip: int) -> dict[str, Any]:
    from sklearn.metrics import roc_auc_score

    from services.answering.offline import OfflineBackend
    from services.judging import _lexical
    from services.judging._sentences import answer_sentences

    paragraphs = squad_paragraphs()
    by_id = {p["_id"]: p for p in paragraphs}
    by_title: dict[str, list[str]] = {}
    for p in paragraphs:
        by_title.setdefault(p["title"], []).append(p["_id"])
    questions = squad_questions()
    random.Random(seed).shuffle(questions)
    answerable = [q for q in questions if not q["metadata"]["is_impossible"]][skip:skip + n]
    impossible = [q for q in questions if q["metadata"]["is_impossible"]][skip:skip + n]
    rng = random.Random(seed + 1)
    backend = OfflineBackend(model)

    found = ceiling = empty = 0
    words: list[int] = []
    scores: dict[str, list[float]] = {"answerable": [], "unanswerable": []}
    gold_only: dict[str, list[float]] = {"answerable": [], "unanswerable": []}
    parts: dict[str, dict[str, list[float]]] = {k: {"grounding": [], "coverage": [], "relevance": []} for k in scores}
    started = time.perf_counter()
    for label, group in (("answerable", answerable), ("unanswerable", impossible)):
        for index, question in enumerate(group):
            query = question["text"]
            hits = hits_of(contexts(question, by_id, by_title, list(by_id), rng))
            generation = backend.generate(query, hits)
            reflection = backend.reflect(query, generation.answer, hits)
            scores[label].append(reflection.reflection_score)
            plain = " ".join(answer_sentences(generation.answer))
            support = reflection.sentence_support
            parts[label]["grounding"].append(float(np.mean(support)) if support else 0.0)
            parts[label]["coverage"].append(_lexical.coverage(_lexical.query_terms(query), plain) if plain else 0.0)
            parts[label]["relevance"].append(backend._relevance(query, plain))
            gold = [h for h in hits if h.external_id == question["metadata"]["gold_doc"]]
            alone = backend.generate(query, gold)
            gold_only[label].append(backend.reflect(query, alone.answer, gold).reflection_score)
            if label == "answerable":
                answers = [a.lower() for a in question["metadata"]["answers"]]
                text = generation.answer.lower()
                found += any(a in text for a in answers)
                segments = [s.quote.lower() for h in hits for s in _lexical.segment_chunk(h.text) if s.answerable]
                ceiling += any(a in s for a in answers for s in segments)
                empty += not generation.answer
                words.append(len(plain.split()))
            if (index + 1) % 50 == 0:
                log(f"{label}: {index + 1}/{len(group)} ({time.perf_counter() - started:.0f} s)")

    labels = [1] * len(scores["answerable"]) + [0] * len(scores["unanswerable"])

    def auroc(a: list[float], b: list[float]) -> float:
        return rounded(roc_auc_score(labels, a + b))

    return {
        "answerable": len(answerable), "unanswerable": len(impossible),
        "context": "gold paragraph + 4 others (same article when possible), gold at a random position",
        "answer_recall": rounded(found / len(answerable)),
        "extraction_ceiling": rounded(ceiling / len(answerable)),
        "empty_answers": empty,
        "answer_words_median": median([float(w) for w in words]),
        "reflection_mean_answerable": rounded(float(np.mean(scores["answerable"]))),
        "reflection_mean_unanswerable": rounded(float(np.mean(scores["unanswerable"]))),
        "reflection_auroc": auroc(scores["answerable"], scores["unanswerable"]),
        "component_auroc": {k: auroc(parts["answerable"][k], parts["unanswerable"][k]) for k in parts["answerable"]},
        "gold_only_reflection_auroc": auroc(gold_only["answerable"], gold_only["unanswerable"]),
        "gold_only_mean": {k: rounded(float(np.mean(v))) for k, v in gold_only.items()},
        "needs_regeneration_rate": {k: rounded(float(np.mean([s < 0.8 for s in v]))) for k, v in scores.items()},
        "seconds": rounded(time.perf_counter() - started, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--squad", type=int, default=200, help="answerable and unanswerable questions each")
    parser.add_argument("--skip", type=int, default=0, help="start this far into the shuffled questions")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--no-latency", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from services.answering.offline import MODEL_ID, PROMPT_VERSION

    result: dict[str, Any] = {"bench": "offline_backend", "method": MODEL_ID, "prompt_version": PROMPT_VERSION,
                              "machine": machine(), "when": today(), "load_average": os.getloadavg()[0]}
    if not args.no_latency:
        result["demo_latency"] = demo_latency(args.model)
    if args.squad:
        result["squad"] = squad(args.squad, args.seed, args.model, args.skip)
    result["load_average_end"] = os.getloadavg()[0]
    emit(result)


if __name__ == "__main__":
    main()
