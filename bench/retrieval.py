"""Retrieval benchmark: hybrid/BM25/dense latency at N chunks, BM25 against rank-bm25,
the cost of a confidence breakdown, and how close ingest runs to the bare embedding rate.

    python bench/retrieval.py --chunks 5000          # quick (a few minutes)
    python bench/retrieval.py                        # 100,000 chunks (15-30 minutes)
    python bench/retrieval.py --chunks 1000000 --data-dir /tmp/bench-1m --keep   # hours; then
    python bench/retrieval.py --chunks 1000000 --data-dir /tmp/bench-1m --reuse  # times it again

Progress goes to stderr; the last stdout line is one JSON object. The corpus is derived
from the paragraphs of one evaluation set (--corpus: the shared SQuAD 2.0 half-dev by
default, or one of ours under bench/data; see bench/_common.derive_chunks), the timed
queries are that set's questions; at
this size the dense vectors are a TF-IDF + SVD stand-in (the JSON says so), the
ingest ratio uses the real model on real paragraphs. Past 100k chunks rank-bm25 scores a
100k sample of the chunks with the whole collection's statistics (N, df, mean length), the
reference our scores must equal. By default the store is a fresh
embedded server in a new /tmp dir, deleted at the end (--keep keeps it); with
DATABASE_URL set the bench writes its own collections there (their own partitions: the
load builds only the bench collection's HNSW graph, no other collection's index is touched)
and deletes them at the end unless --keep.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (  # noqa: E402
    EVAL_SETS,
    bench_settings,
    bulk_load,
    collection_chunk_ids,
    derive_chunks,
    describe,
    emit_timed,
    log,
    machine,
    make_data_dir,
    median,
    paragraphs_of,
    percentile,
    phase,
    read_jsonl,
    reset_collection,
    rounded,
    server_cpu_by_process,
    shutdown_store,
    standin_vectors,
    today,
)

COLLECTION = "bench"
INGEST_COLLECTION = "bench_ingest"
SEED = 20240601
WARMUP_QUERIES = 10
RANK_BM25_SAMPLE = 100_000
# Issue 32.6 asks the BM25 leg for 20x rank-bm25 in CPU time (the wall-time ratio moves with the
# machine's load; the earlier 15x wall target is kept beside it).
TARGETS = {"hybrid_p50_ms": 15.0, "bm25_speedup_vs_rank_bm25": 15.0, "bm25_speedup_vs_rank_bm25_cpu": 20.0,
           "confidence_ms": 0.2, "ingest_ratio": 0.90}
TARGET_HYBRID_P50_MS_PAST_100K = 30.0  # issue 16: at a million chunks


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    wall = time.perf_counter()
    data_dir, created = make_data_dir(args.data_dir)
    settings = bench_settings(data_dir)
    log(f"store: {describe(settings)}; {args.chunks:,} chunks, {args.queries} queries")
    timings: dict[str, float] = {}
    result: dict[str, Any] = {}
    try:
        result = run(args, settings, timings)
    finally:
        if not settings.embedded and not args.keep:
            _drop_bench_collections(settings)
        shutdown_store(settings, data_dir, remove=created and not args.keep)
    emit_timed(result, started=wall, timings=timings)
    return 0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000, help="corpus size in chunks (default 100000)")
    parser.add_argument("--queries", type=int, default=200, help="timed queries per mode (default 200)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="embedded server data dir (default: a fresh dir under /tmp); ignored with DATABASE_URL")
    parser.add_argument("--corpus", choices=sorted(EVAL_SETS), default="squad",
                        help="the evaluation set whose paragraphs the chunks are derived from and whose questions "
                             "are timed (default squad)")
    parser.add_argument("--ingest-docs", type=int, default=300, help="paragraphs for the ingest ratio")
    parser.add_argument("--passes", type=int, default=3, help="passes over the queries per mode (default 3)")
    parser.add_argument("--confidence-reps", type=int, default=200, help="repetitions per query for confidence_ms")
    parser.add_argument("--ingest-rounds", type=int, default=4,
                        help="back-to-back ingest / bare-encode rounds; the median ratio counts (default 4)")
    parser.add_argument("--explain", action="store_true", help="print EXPLAIN ANALYZE even when targets are met")
    parser.add_argument("--keep", action="store_true", help="keep the data dir (or the bench collections)")
    parser.add_argument("--reuse", action="store_true",
                        help="time the bench collection a --keep run left (same --chunks) instead of loading it again")
    args = parser.parse_args(argv)
    if args.chunks < 1000 or args.queries < 1 or args.passes < 1 or args.ingest_rounds < 1:
        parser.error("--chunks must be at least 1000; --queries, --passes and --ingest-rounds at least 1")
    if args.reuse and args.data_dir is None and "DATABASE_URL" not in os.environ:
        parser.error("--reuse needs the --data-dir (or DATABASE_URL) of a run made with --keep")
    if args.reuse:
        args.keep = True  # what is reused is kept
    return args


def run(args: argparse.Namespace, settings, timings: dict[str, float]) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    from services.corpus.indexing import indexed_text
    from services.retrieval import embedding
    from services.store import get_engine

    with phase("start store and migrate", timings):
        get_engine(settings)
    memory = _ServerMemory(settings)
    with phase("load model (token counts, ingest ratio)", timings):
        model = embedding.load_model(settings.embedding_model)
    eval_set = EVAL_SETS[args.corpus]
    paragraphs = paragraphs_of(eval_set)
    with phase(f"derive {args.chunks:,} chunks from {len(paragraphs)} paragraphs", timings):
        chunks = derive_chunks(paragraphs, args.chunks, seed=SEED)
        texts = [indexed_text(title, body) for title, body in chunks]
    log(f"  mean chunk: {np.mean([len(b.split()) for _, b in chunks[:100_000]]):.0f} words")
    queries = _sample_queries(read_jsonl(eval_set.queries), args.queries + WARMUP_QUERIES)
    with phase("stand-in vectors: TF-IDF + SVD(384) + L2", timings):
        chunk_vectors, query_vectors = standin_vectors(texts, queries, dim=settings.embedding_dim, seed=SEED,
                                                       project_chunks=not args.reuse)
    usable = np.linalg.norm(query_vectors, axis=1) > 0
    queries = [q for q, ok in zip(queries, usable, strict=True) if ok][: args.queries + WARMUP_QUERIES]
    query_vectors = query_vectors[usable][: len(queries)]
    log(f"  {int((~usable).sum())} sampled queries dropped (no known word, zero vector)")
    if args.reuse:
        chunk_ids = collection_chunk_ids(settings, COLLECTION)
        if len(chunk_ids) != args.chunks:
            raise SystemExit(f"--reuse: collection {COLLECTION!r} holds {len(chunk_ids):,} chunks, not {args.chunks:,}")
        _check_reused_corpus(settings, {p["title"] for p in paragraphs}, args.corpus)
        log(f"  reusing the {len(chunk_ids):,} chunks loaded by an earlier run")
        build_s: dict[str, float] | str = "reused (see the run that loaded it)"
    else:
        with phase("token counts (the model's tokenizer)", timings):
            token_counts = _token_counts(model, chunks)
        log(f"  mean chunk: {np.mean(token_counts):.0f} tokens")
        chunk_ids = bulk_load(settings, collection=COLLECTION, chunks=chunks, vectors=chunk_vectors,
                              token_counts=token_counts, timings=timings)
        build_s = {name.removeprefix("load: ").split(" (")[0]: rounded(seconds, 1)
                   for name, seconds in timings.items() if name.startswith("load: ")}
    del chunk_vectors
    store = _store_facts(settings)
    log(f"  store: {store}")

    warm, timed = slice(0, WARMUP_QUERIES), slice(WARMUP_QUERIES, None)
    latencies: dict[str, list[float]] = {}
    best_of: dict[str, list[float]] = {}
    cpu_ms: dict[str, float | None] = {}
    cpu_split: dict[str, dict[str, float]] = {}
    results: dict[str, list[Any]] = {}
    load_before = os.getloadavg()[0]
    gc.collect()
    gc.freeze()  # keep collector passes over the big corpus lists out of the timings
    for mode in ("hybrid", "bm25", "dense"):
        with phase(f"time {mode} search x {len(queries[timed])}", timings):
            _time_mode(settings, mode, queries[warm], query_vectors[warm])
            latencies[mode], results[mode], cpu, split = _time_mode(settings, mode, queries[timed], query_vectors[timed])
            passes, cpus, splits = [latencies[mode]], [cpu], [split]
            for _ in range(args.passes - 1):
                more, _, cpu, split = _time_mode(settings, mode, queries[timed], query_vectors[timed])
                passes.append(more)
                cpus.append(cpu)
                splits.append(split)
            best_of[mode] = [min(samples) for samples in zip(*passes, strict=True)]
            cpu_ms[mode] = None if None in cpus else sum(cpus) / len(cpus)  # type: ignore[arg-type]
            cpu_split[mode] = {name: round(sum(s.get(name, 0.0) for s in splits) / len(splits), 3)
                               for name in sorted({name for s in splits for name in s})}
        log(f"  {mode}: p50 {median(latencies[mode]):.2f} ms, p95 {percentile(latencies[mode], 95):.2f} ms; "
            f"best of {args.passes} p50 {median(best_of[mode]):.2f} ms; CPU per query {cpu_ms[mode] or float('nan'):.2f} ms "
            f"{cpu_split[mode]}")
    gc.unfreeze()
    load_after = os.getloadavg()[0]

    hybrid_p50 = median(latencies["hybrid"])
    hybrid_target = TARGETS["hybrid_p50_ms"] if args.chunks <= 100_000 else TARGET_HYBRID_P50_MS_PAST_100K
    if args.explain or hybrid_p50 > hybrid_target:
        with phase("EXPLAIN (ANALYZE, BUFFERS) of the median hybrid query", timings):
            _explain(settings, queries[timed], query_vectors[timed], latencies["hybrid"])

    postings = _query_postings(settings, queries[timed])
    bm25_per_posting = [ms / n * 1e5 for ms, n in zip(latencies["bm25"], postings, strict=True) if n]
    log(f"  postings of a query's terms: median {median(postings):,.0f}; BM25 leg "
        f"{median(bm25_per_posting):.2f} ms per 100k of them")
    with phase("rank-bm25 reference (build + time)", timings):
        reference = _compare_rank_bm25(settings, texts, chunk_ids, queries[timed], results["bm25"])
    with phase("confidence scoring", timings):
        confidence = _time_confidence(results["hybrid"], args.confidence_reps)
    gc.collect()
    gc.freeze()  # the corpus lists again: at a million chunks the collector's passes over them cost ingest 1-3 s a round
    with phase(f"ingest ratio ({args.ingest_docs} {args.corpus} paragraphs, real model)", timings):
        ingest = _measure_ingest_ratio(settings, paragraphs[: args.ingest_docs], args.ingest_rounds,
                                       source=eval_set.corpus.name)
    gc.unfreeze()
    memory.stop()

    bm25_p50 = median(latencies["bm25"])
    speedup = reference["rank_bm25_p50_ms"] / bm25_p50
    cpu_speedup = None if cpu_ms["bm25"] is None else reference["rank_bm25_cpu_ms_mean"] / cpu_ms["bm25"]
    out: dict[str, Any] = {
        "n_chunks": args.chunks,
        "corpus": args.corpus,
        "hybrid_p50_ms": rounded(hybrid_p50, 2),
        "hybrid_p95_ms": rounded(percentile(latencies["hybrid"], 95), 2),
        "bm25_speedup_vs_rank_bm25": rounded(speedup, 1),
        "bm25_top10_agreement": rounded(reference["agreement"], 4),
        "confidence_ms": rounded(confidence["p50"], 4),
        "ingest_ratio": rounded(ingest["ratio"], 3),
        "bm25_p50_ms": rounded(bm25_p50, 2),
        "bm25_p95_ms": rounded(percentile(latencies["bm25"], 95), 2),
        "dense_p50_ms": rounded(median(latencies["dense"]), 2),
        "dense_p95_ms": rounded(percentile(latencies["dense"], 95), 2),
        "rank_bm25_p50_ms": rounded(reference["rank_bm25_p50_ms"], 1),
        "query_postings_p50": median(postings),
        "bm25_ms_per_100k_query_postings_p50": rounded(median(bm25_per_posting), 2),
        "build_s": build_s,
        "postings_size": store["postings_size"],
        "hnsw_size": store["hnsw_size"],
        "peak_server_rss_mb": memory.peak_mb(),
        "server_memory": "peak over the run of the embedded server's processes' summed PSS (resident memory with "
                         "shared pages, e.g. shared buffers, split among the processes sharing them, so counted "
                         "once), sampled every second; null with DATABASE_URL",
        f"hybrid_p50_ms_best_of_{args.passes}": rounded(median(best_of["hybrid"]), 2),
        f"bm25_p50_ms_best_of_{args.passes}": rounded(median(best_of["bm25"]), 2),
        f"dense_p50_ms_best_of_{args.passes}": rounded(median(best_of["dense"]), 2),
        "hybrid_cpu_ms_mean": _opt_round(cpu_ms["hybrid"]),
        "bm25_cpu_ms_mean": _opt_round(cpu_ms["bm25"]),
        "dense_cpu_ms_mean": _opt_round(cpu_ms["dense"]),
        # where each mode's CPU went: the bench process ("client"), the session's backend, and any
        # other server process busy meanwhile: the slices' connections ("postgres: backend") past
        # search_slice_min_chunks, an autovacuum worker, the checkpointer
        "cpu_ms_split": cpu_split,
        "rank_bm25_cpu_ms_mean": rounded(reference["rank_bm25_cpu_ms_mean"], 1),
        "bm25_speedup_vs_rank_bm25_cpu": None if cpu_speedup is None else rounded(cpu_speedup, 1),
        "bm25_max_abs_score_diff": reference["max_abs_diff"],
        "bm25_scores_compared": reference["compared"],
        "rank_bm25_reference": reference["note"],
        "confidence_p95_ms": rounded(confidence["p95"], 4),
        "confidence_cpu_ms": rounded(confidence["cpu_p50"], 4),
        "n_queries": len(latencies["hybrid"]),
        # searches of this collection run their BM25 leg in this many chunk id ranges at once
        "search_slices": settings.search_slices if args.chunks >= settings.search_slice_min_chunks else 1,
        "dense_vectors": f"stand-in TF-IDF+SVD {settings.embedding_dim}-d (not {settings.embedding_model})",
        "ingest": ingest["detail"],
        "store": store,
        "timing": "wall time of search_in_session per query in one read session, query vector precomputed; "
                  f"{WARMUP_QUERIES} other queries warm up each mode; p50/p95 from the first pass over the "
                  f"queries, best_of = per-query minimum over {args.passes} passes; *_cpu_ms_mean = CPU seconds "
                  "of this process + the embedded server per query (what an idle machine would take, "
                  "as the data is in memory), unaffected by other processes",
        "load_avg_1m_during_timing": [round(load_before, 2), round(load_after, 2)],
        "machine": machine(),
        "date": today(),
    }
    # Targets are read from the figures as measured, not as printed: a CPU ratio of 19.97 prints 20.0.
    out["targets_met"] = {
        "hybrid_p50_ms": hybrid_p50 <= hybrid_target,
        "bm25_speedup_vs_rank_bm25": speedup >= TARGETS["bm25_speedup_vs_rank_bm25"],
        "bm25_speedup_vs_rank_bm25_cpu": (cpu_speedup or 0) >= TARGETS["bm25_speedup_vs_rank_bm25_cpu"],
        "confidence_ms": confidence["p50"] <= TARGETS["confidence_ms"],
        "ingest_ratio": ingest["ratio"] >= TARGETS["ingest_ratio"],
    }
    return out


class _ServerMemory:
    """Samples the embedded server's memory in a thread, for the peak over the run."""

    def __init__(self, settings, interval_s: float = 1.0) -> None:  # type: ignore[no-untyped-def]
        import threading

        from db.embedded import postgres_pid

        self._pid = postgres_pid(settings.workbench_data_dir) if settings.embedded else None
        self._peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(interval_s,), daemon=True)
        if self._pid is not None:
            self._thread.start()

    def _sample(self, interval_s: float) -> None:
        import psutil

        while not self._done.wait(interval_s):
            try:
                postmaster = psutil.Process(self._pid)
                processes = [postmaster, *postmaster.children(recursive=True)]
            except psutil.Error:
                continue
            total = 0
            for process in processes:
                try:
                    total += process.memory_full_info().pss
                except psutil.Error:
                    continue  # exited meanwhile
            self._peak = max(self._peak, total)

    def stop(self) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()

    def peak_mb(self) -> float | None:
        return None if self._pid is None else rounded(self._peak / 2**20, 1)


def _opt_round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else rounded(value, digits)


def _sample_queries(questions: list[dict[str, Any]], n: int) -> list[str]:
    """A seeded sample of the set's questions (answerable and not), with spares for zero vectors."""
    texts = [q["text"] for q in questions]
    return random.Random(SEED).sample(texts, min(len(texts), n + 20))[: n + 20]


_A_DOCUMENT_TITLE = """
SELECT d.title FROM documents d JOIN collections c ON c.id = d.collection_id WHERE c.name = :name LIMIT 1
"""


def _check_reused_corpus(settings, titles: set[str], corpus: str) -> None:  # type: ignore[no-untyped-def]
    """--reuse times what an earlier run loaded: stop if that was derived from another corpus."""
    from sqlalchemy import text

    from services.store import transaction

    with transaction(settings) as session:
        title = session.execute(text(_A_DOCUMENT_TITLE), {"name": COLLECTION}).scalar()
    if title not in titles:
        raise SystemExit(f"--reuse: collection {COLLECTION!r} was not derived from --corpus {corpus} "
                         f"(it holds a document titled {title!r}); load it again without --reuse")


def _time_mode(settings, mode: str, queries: list[str], vectors: np.ndarray):  # type: ignore[no-untyped-def]
    """Wall ms per query, the results, and CPU ms per query: the total (client + server; None if
    unknown) and where it went ({} if unknown): this process, the backend that ran the searches,
    and each other server process that used CPU meanwhile (an autovacuum worker after a load)."""
    from sqlalchemy import text

    from services.retrieval.search import default_params, search_in_session
    from services.store import transaction

    params = default_params(settings, mode=mode, k=10, collection=COLLECTION)
    latencies, results = [], []
    with transaction(settings) as session:
        backend = session.execute(text("SELECT pg_backend_pid()")).scalar_one()
        server_before = server_cpu_by_process(settings, settings.workbench_data_dir)
        client_before = time.process_time()
        for query, vector in zip(queries, vectors, strict=True):
            started = time.perf_counter()
            result = search_in_session(query, params, session=session, settings=settings, query_vector=vector)
            latencies.append((time.perf_counter() - started) * 1000)
            results.append(result)
        client = time.process_time() - client_before
        server_after = server_cpu_by_process(settings, settings.workbench_data_dir)
    if server_before is None or server_after is None:
        return latencies, results, None, {}
    per_query = 1000 / len(queries)
    split = {"client": client * per_query}
    for pid, (role, seconds) in server_after.items():
        used = (seconds - server_before.get(pid, (role, 0.0))[1]) * per_query
        name = "searching backend" if pid == backend else role
        if used > 0:
            split[name] = split.get(name, 0.0) + used
    return latencies, results, sum(split.values()), split


def _query_postings(settings, queries: list[str]) -> list[int]:  # type: ignore[no-untyped-def]
    """Per query, the postings of its terms in the bench collection (the sum of their df): what
    an exhaustive BM25 leg would read, the yardstick its time should grow with, not faster."""
    from sqlalchemy import text

    from services.retrieval.text import tokenize
    from services.store import transaction

    with transaction(settings) as session:
        return [int(session.execute(text(_QUERY_POSTINGS), {"name": COLLECTION, "terms": tokenize(query)}).scalar_one())
                for query in queries]


_QUERY_POSTINGS = """
SELECT coalesce(sum(t.df), 0) FROM unnest(CAST(:terms AS text[])) AS u(term)
JOIN bm25_terms t ON t.term = u.term JOIN collections c ON c.id = t.collection_id AND c.name = :name
"""


def _store_facts(settings) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    from services.store import transaction

    with transaction(settings) as session:
        row = session.execute(text(_STORE_FACTS), {"name": COLLECTION}).mappings().one()
        return dict(row)


# Chunks and postings are partitioned by collection (migration 0009): a parent's own size is 0,
# its partitions hold the rows and indexes.
_STORE_FACTS = """
SELECT current_setting('server_version') AS postgres,
       (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS pgvector,
       current_setting('shared_buffers') AS shared_buffers,
       current_setting('work_mem') AS work_mem,
       (SELECT count(*) FROM bm25_postings) AS postings,
       (SELECT count(*) FROM bm25_terms t JOIN collections c ON c.id = t.collection_id
        WHERE c.name = :name) AS terms,
       pg_size_pretty(_sizes.postings) AS postings_size,
       pg_size_pretty(_sizes.chunks) AS chunks_size,
       pg_size_pretty(_sizes.hnsw) AS hnsw_size
FROM (SELECT (SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('bm25_postings')) AS postings,
             (SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('chunks')) AS chunks,
             (SELECT sum(pg_relation_size(relid)) FROM pg_partition_tree('chunks_embedding_hnsw')) AS hnsw) _sizes
"""


def _explain(settings, queries: list[str], vectors: np.ndarray, latencies: list[float]) -> None:  # type: ignore[no-untyped-def]
    """Print EXPLAIN (ANALYZE, BUFFERS) of each mode's SQL for the median-latency hybrid query."""
    from sqlalchemy import text

    from services.retrieval.search import clean_query, default_params, statement_values
    from services.retrieval.search_sql import SQL_BY_MODE
    from services.store import transaction

    pick = int(np.argsort(latencies)[len(latencies) // 2])
    query = clean_query(queries[pick], max_chars=settings.max_query_chars)
    params = default_params(settings, k=10, collection=COLLECTION)
    with transaction(settings) as session:
        values = statement_values(query, params, session=session, settings=settings, query_vector=vectors[pick])
        log(f"  query: {query!r} -> terms {values['terms']}")
        for mode in ("hybrid", "bm25", "dense"):
            plan = session.execute(text("EXPLAIN (ANALYZE, BUFFERS) " + SQL_BY_MODE[mode]), values).scalars().all()
            print(f"--- {mode} ---\n" + "\n".join(plan), file=sys.stderr, flush=True)


def _token_counts(model, chunks: list[tuple[str, str]], block: int = 20_000) -> list[int]:  # type: ignore[no-untyped-def]
    """Model tokens per chunk body, tokenized in blocks: a million chunks' token ids at once
    would take gigabytes of Python ints."""
    counts: list[int] = []
    for start in range(0, len(chunks), block):
        ids = model.tokenizer([body for _, body in chunks[start:start + block]], add_special_tokens=False)["input_ids"]
        counts.extend(len(row) for row in ids)
    return counts


def _compare_rank_bm25(settings, texts: list[str], chunk_ids: list[int], queries: list[str],  # type: ignore[no-untyped-def]
                       ours: list[Any]) -> dict[str, Any]:
    """rank-bm25 (with Lucene's idf, the formula our SQL computes) as the reference for our BM25 leg.

    Up to RANK_BM25_SAMPLE chunks it indexes them all. Past that it indexes a seeded sample
    of RANK_BM25_SAMPLE chunks and scores them with the whole collection's statistics (N, each
    query term's df, the mean length, from our tables and checked against the texts): a
    sampled chunk then has the score it has in the whole collection, so our score of every
    hit that falls in the sample must equal it, and the sampled chunks that beat our 10th
    score must be among our hits. Times get_scores + top 10 per query (over the sample, so
    past 100k rank-bm25 is timed on a tenth or less of what we search: the speedup is a floor).
    """
    from rank_bm25 import BM25Okapi
    from sqlalchemy import text

    from services.retrieval.text import tokenize
    from services.store import transaction

    n = len(texts)
    picked = (range(n) if n <= RANK_BM25_SAMPLE
              else sorted(random.Random(SEED).sample(range(n), RANK_BM25_SAMPLE)))
    tokenized = [tokenize(texts[i]) for i in picked]
    reference = BM25Okapi(tokenized, k1=settings.bm25_k1, b=settings.bm25_b)
    del tokenized
    query_terms = [tokenize(query) for query in queries]
    with transaction(settings) as session:
        stats = session.execute(text(_COLLECTION_STATS), {"name": COLLECTION}).mappings().one()
        df = dict(session.execute(text(_TERM_DF), {"name": COLLECTION,
                                                   "terms": sorted({t for ts in query_terms for t in ts})}).all())
    full_n, full_avgdl = stats["n_chunks"], stats["total_dl"] / stats["n_chunks"]
    if n <= RANK_BM25_SAMPLE:
        assert full_n == reference.corpus_size and abs(full_avgdl - reference.avgdl) < 1e-9, (stats, reference.avgdl)
    # The whole collection's statistics in place of the sample's (get_scores reads only avgdl
    # and idf; corpus_size sizes its score array, so it stays the sample's).
    reference.avgdl = full_avgdl
    reference.idf = {term: math.log(1.0 + (full_n - d + 0.5) / (d + 0.5)) for term, d in df.items()}
    log(f"  rank-bm25 index over {len(picked):,} of {n:,} chunks, scored with the collection's N and df")

    position = {chunk_ids[i]: j for j, i in enumerate(picked)}
    sample_ids = [chunk_ids[i] for i in picked]
    times, agreements, max_diff, compared = [], [], 0.0, 0
    cpu_before = time.process_time()
    for terms, result in zip(query_terms, ours, strict=True):
        started = time.perf_counter()
        scores = reference.get_scores(terms)
        np.argsort(-scores, kind="stable")[:10]  # the top 10 a caller takes: part of the timed work
        times.append((time.perf_counter() - started) * 1000)
        ours_in_sample = {hit.chunk_id for hit in result.hits if hit.chunk_id in position}
        cut = min(hit.bm25_score for hit in result.hits) if len(result.hits) >= 10 else 0.0
        beaten = {sample_ids[j] for j in np.flatnonzero(scores > cut + 1e-9)}
        tied = {sample_ids[j] for j in np.flatnonzero(np.abs(scores - cut) <= 1e-9)} if cut else set()
        expected = beaten | (ours_in_sample & tied)  # a tie at the cut may fall either side
        agreements.append(len(expected & ours_in_sample) / max(len(expected), len(ours_in_sample), 1)
                          if expected or ours_in_sample else 1.0)
        for hit in result.hits:
            if hit.chunk_id in position:
                max_diff = max(max_diff, abs(hit.bm25_score - scores[position[hit.chunk_id]]))
                compared += 1
    cpu_ms = (time.process_time() - cpu_before) * 1000 / len(queries)  # includes the cheap comparison
    log(f"  rank-bm25 p50 {median(times):.1f} ms; top-10 agreement {np.mean(agreements):.4f}; "
        f"max |score diff| {max_diff:.2e} over {compared} scores")
    note = ("all chunks" if n <= RANK_BM25_SAMPLE else
            f"a seeded sample of {len(picked):,} chunks scored with the collection's N, df and mean length; "
            "timed over the sample only, so the speedup is a floor")
    return {"rank_bm25_p50_ms": median(times), "rank_bm25_cpu_ms_mean": cpu_ms, "compared": compared,
            "agreement": float(np.mean(agreements)), "max_abs_diff": max_diff, "note": note}


_COLLECTION_STATS = """
SELECT s.n_chunks, s.total_dl FROM bm25_stats s JOIN collections c ON c.id = s.collection_id WHERE c.name = :name
"""
_TERM_DF = """
SELECT t.term, t.df FROM bm25_terms t JOIN collections c ON c.id = t.collection_id
WHERE c.name = :name AND t.term = ANY(:terms)
"""


def _time_confidence(results: list[Any], reps: int) -> dict[str, float]:
    """Median and p95 over queries of one score_retrieval call, in ms (wall and CPU).

    Per query: `reps` calls in 5 blocks; the fastest block's mean counts, so a block in
    which another process took the CPU does not.
    """
    from services.scoring.confidence import score_retrieval
    from services.scoring.weights import DEFAULT_PROFILE

    for result in results[:5]:
        score_retrieval(result, DEFAULT_PROFILE)
    block = max(1, reps // 5)
    wall, cpu = [], []
    for result in results:
        wall_blocks, cpu_blocks = [], []
        for _ in range(5):
            started, cpu_started = time.perf_counter(), time.process_time()
            for _ in range(block):
                score_retrieval(result, DEFAULT_PROFILE)
            wall_blocks.append((time.perf_counter() - started) * 1000 / block)
            cpu_blocks.append((time.process_time() - cpu_started) * 1000 / block)
        wall.append(min(wall_blocks))
        cpu.append(min(cpu_blocks))
    log(f"  score_retrieval: median {median(wall):.4f} ms, p95 {percentile(wall, 95):.4f} ms; "
        f"CPU median {median(cpu):.4f} ms")
    return {"p50": median(wall), "p95": percentile(wall, 95), "cpu_p50": median(cpu)}


def _measure_ingest_ratio(settings, paragraphs: list[dict[str, Any]], rounds: int, *, source: str) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Ingest throughput / bare encode throughput on the very chunk texts ingest produced.

    Each round times one ingest (into a fresh collection) and one bare encode back to back,
    alternating which goes first (ABBA), and gives one ratio; the median round counts. On a
    shared machine the load drifts, so only measurements taken side by side are compared.
    The bare encode is sentence-transformers' own `encode`, in forward passes of the size ingest's
    encoder uses (encode_pool's ENCODE_BATCH, or a smaller EMBEDDING_BATCH_SIZE): padding differs
    with the pass size, and what is compared is ingest's own work, not a batch size. Each round also
    times the product's encoder (services.retrieval.embedding.encode, the direct token-sorted pass
    ingest itself runs) on the same texts: `ratio_vs_direct_pass`.
    """
    from sqlalchemy import text

    from services.corpus.chunking import chunk_text
    from services.corpus.encode_pool import ENCODE_BATCH
    from services.corpus.extract import SourceDocument
    from services.corpus.indexing import indexed_text
    from services.corpus.ingest import ingest_documents
    from services.retrieval import embedding
    from services.store import transaction

    docs = [SourceDocument(p["_id"], p["title"], p["text"], source) for p in paragraphs]
    model_name, batch_size = settings.embedding_model, min(settings.embedding_batch_size, ENCODE_BATCH)
    # Warm up everything ingest touches: model, tokenizer, sentence splitter, DB pool.
    count_tokens = embedding.token_counter(model_name)
    embedding.encode(model_name, [indexed_text(d.title, d.text) for d in docs[:64]], batch_size=batch_size)

    def timed_ingest() -> float:
        with transaction(settings) as session:
            reset_collection(session, INGEST_COLLECTION)
        started = time.perf_counter()
        summary = ingest_documents(docs, collection=INGEST_COLLECTION, settings=settings)
        seconds = time.perf_counter() - started
        if chunk_texts:
            assert summary.chunks_added == len(chunk_texts), (summary.chunks_added, len(chunk_texts))
        return seconds

    def timed_encode() -> float:
        started = time.perf_counter()
        embedding.load_model(model_name).encode(chunk_texts, batch_size=batch_size, normalize_embeddings=True)
        return time.perf_counter() - started

    def timed_direct() -> float:
        started = time.perf_counter()
        embedding.encode(model_name, chunk_texts, batch_size=batch_size)
        return time.perf_counter() - started

    load_before = os.getloadavg()[0]
    chunk_texts: list[str] = []
    ingest_runs: list[float] = [timed_ingest()]
    with transaction(settings) as session:
        rows = session.execute(text(_INGESTED_TEXTS), {"name": INGEST_COLLECTION}).all()
    chunk_texts = [indexed_text(title, body) for _, title, body in rows]
    encode_runs: list[float] = [timed_encode()]
    direct_runs: list[float] = [timed_direct()]
    log(f"  round 1: ingest {ingest_runs[0]:.2f} s, bare encode {encode_runs[0]:.2f} s, direct {direct_runs[0]:.2f} s")
    for round_ in range(1, rounds):
        if round_ % 2:
            direct_runs.append(timed_direct())
            encode_runs.append(timed_encode())
            ingest_runs.append(timed_ingest())
        else:
            ingest_runs.append(timed_ingest())
            encode_runs.append(timed_encode())
            direct_runs.append(timed_direct())
        log(f"  round {round_ + 1}: ingest {ingest_runs[-1]:.2f} s, bare encode {encode_runs[-1]:.2f} s, "
            f"direct {direct_runs[-1]:.2f} s")

    started = time.perf_counter()
    for doc in docs:
        chunk_text(doc.text, count_tokens=count_tokens, max_tokens=settings.chunk_tokens,
                   overlap_tokens=settings.chunk_overlap_tokens)
    chunking_s = time.perf_counter() - started

    n = len(chunk_texts)
    ratios = [e / i for e, i in zip(encode_runs, ingest_runs, strict=True)]
    ratio = median(ratios)
    log(f"  {len(docs)} docs -> {n} chunks: per-round ratios {', '.join(f'{r:.3f}' for r in ratios)}; "
        f"median {ratio:.3f}")
    return {"ratio": ratio, "detail": {
        "documents": len(docs), "chunks": n, "rounds": rounds, "round_ratios": [round(r, 3) for r in ratios],
        "ingest_chunks_per_s_median": round(median([n / s for s in ingest_runs]), 1),
        "encode_chunks_per_s_median": round(median([n / s for s in encode_runs]), 1),
        "ratio_vs_direct_pass": round(median([d / i for d, i in zip(direct_runs, ingest_runs, strict=True)]), 3),
        "runs_s": {"ingest": [round(x, 2) for x in ingest_runs], "encode": [round(x, 2) for x in encode_runs],
                   "direct": [round(x, 2) for x in direct_runs]},
        "encode_batch": batch_size, "chunking_s": round(chunking_s, 2),
        "load_avg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "note": "ratio = median over rounds of bare-encode seconds / ingest seconds, measured back to back "
                "(ABBA order); ingested next to the bench collection (HNSW index populated)",
    }}


_INGESTED_TEXTS = """
SELECT d.external_id, d.title, c.text FROM chunks c JOIN documents d ON d.id = c.document_id
JOIN collections k ON k.id = c.collection_id
WHERE k.name = :name ORDER BY d.id, c.ordinal
"""


def _drop_bench_collections(settings) -> None:  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    from services.store import transaction

    with phase("drop the bench collections"):
        with transaction(settings) as session:
            session.execute(text("DELETE FROM collections WHERE name IN (:a, :b)"),
                            {"a": COLLECTION, "b": INGEST_COLLECTION})


if __name__ == "__main__":
    sys.exit(main())
