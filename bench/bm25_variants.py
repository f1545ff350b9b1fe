"""Compare versions of the BM25 statement on a store bench/retrieval.py kept, query by query.

    python bench/retrieval.py --corpus python-reference --data-dir /tmp/bench-pyref --keep
    cp services/retrieval/search_sql.py /tmp/before.py     # then edit the working copy
    python bench/bm25_variants.py --corpus python-reference --data-dir /tmp/bench-pyref \\
        /tmp/before.py services/retrieval/search_sql.py

Each file is a copy of services/retrieval/search_sql.py; its STATEMENTS["bm25"] (and, past
settings.search_slice_min_chunks, its SLICE_STATEMENT) is run through search_in_session in BM25
mode, as the bench's BM25 leg is. The versions take turns on every question (the first version
first on one question, the second first on the next), so a host whose speed drifts over
minutes, as a shared one does, slows them alike: whole-bench runs of one statement six minutes
apart read 14.6 and 21.9 ms a search, while this order's passes agree within 1-2%. The CPU
counted is this process's plus the searching backends' time on a core (/proc/<pid>/schedstat, in
nanoseconds; the /proc tick counts psutil reads are 10 ms coarse): the session's backend and,
for a sliced search, the embedded server's other client backends (the slices' connections). So
the store must be the embedded one.

Prints each pass's mean CPU per search and, as the last stdout line, one JSON object: the
mean per version, its ratio to the first, and how many questions' hits differ from the first
version's (ids, or scores by more than 1e-9; sums added in another order can order tied chunks
otherwise).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import (  # noqa: E402
    EVAL_SETS,
    bench_settings,
    emit,
    log,
    machine,
    read_jsonl,
    server_cpu_by_process,
    today,
)
from bench.retrieval import COLLECTION, WARMUP_QUERIES, _sample_queries  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("versions", nargs="+", type=Path, help="copies of services/retrieval/search_sql.py")
    parser.add_argument("--data-dir", type=Path, required=True, help="the embedded store bench/retrieval.py kept")
    parser.add_argument("--corpus", choices=sorted(EVAL_SETS), default="squad",
                        help="the set that store was loaded from: its questions are searched (default squad)")
    parser.add_argument("--queries", type=int, default=200, help="questions a pass (default 200, the bench's)")
    parser.add_argument("--passes", type=int, default=3, help="passes over the questions (default 3)")
    args = parser.parse_args(argv)
    if args.queries < 1 or args.passes < 1:
        parser.error("--queries and --passes must be at least 1")
    missing = [str(path) for path in args.versions if not path.is_file()]
    if missing:
        parser.error(f"no such file: {', '.join(missing)}")
    if not (args.data_dir / "pgdata").is_dir():
        parser.error(f"{args.data_dir} holds no embedded store: run bench/retrieval.py --data-dir {args.data_dir} --keep")
    emit(compare(args))
    return 0


def compare(args: argparse.Namespace) -> dict[str, Any]:
    from sqlalchemy import text

    from services.retrieval import search
    from services.retrieval.search import default_params, search_in_session
    from services.store import transaction

    settings = bench_settings(args.data_dir)
    if not settings.embedded:
        raise SystemExit("bench/bm25_variants.py reads the searching backend's CPU from /proc: unset DATABASE_URL")
    versions = [_load(path) for path in args.versions]
    names = [str(path) for path in args.versions]
    questions = _sample_queries(read_jsonl(EVAL_SETS[args.corpus].queries), args.queries + WARMUP_QUERIES)
    # the bench's sample, before it drops the questions its stand-in vectors know no word of
    warm, timed = questions[:WARMUP_QUERIES], questions[WARMUP_QUERIES:WARMUP_QUERIES + args.queries]
    params = default_params(settings, mode="bm25", k=10, collection=COLLECTION)
    kept = search.STATEMENTS["bm25"], search.SLICE_STATEMENT

    def use(version) -> None:  # type: ignore[no-untyped-def]
        search.STATEMENTS["bm25"], search.SLICE_STATEMENT = version.STATEMENTS["bm25"], version.SLICE_STATEMENT

    cpu_ns = [[0] * len(names) for _ in range(args.passes)]
    hits: list[list[Any]] = [[None] * len(names) for _ in timed]
    try:
        with transaction(settings) as session:
            backend = session.execute(text("SELECT pg_backend_pid()")).scalar_one()
            for version in versions:  # each is prepared and planned before it is timed
                use(version)
                for question in warm:
                    search_in_session(question, params, session=session, settings=settings)
            backends = _client_backends(settings) | {backend}  # the slices' connections are open now
            for done in range(args.passes):
                for i, question in enumerate(timed):
                    for v in [*range(i % len(names), len(names)), *range(i % len(names))]:
                        use(versions[v])
                        server, client = _on_cpu_ns(backends), time.process_time_ns()
                        result = search_in_session(question, params, session=session, settings=settings)
                        cpu_ns[done][v] += time.process_time_ns() - client + _on_cpu_ns(backends) - server
                        hits[i][v] = [(hit.chunk_id, hit.bm25_score or 0.0) for hit in result.hits]
                log(f"pass {done + 1}: " + ", ".join(
                    f"{name} {ns / 1e6 / len(timed):.2f} ms" for name, ns in zip(names, cpu_ns[done], strict=True)))
    finally:
        search.STATEMENTS["bm25"], search.SLICE_STATEMENT = kept
    means = [sum(row[v] for row in cpu_ns) / 1e6 / len(timed) / args.passes for v in range(len(names))]
    return {
        "corpus": args.corpus,
        "queries": len(timed),
        "passes": args.passes,
        "cpu_ms_per_search": {name: round(mean, 3) for name, mean in zip(names, means, strict=True)},
        "ratio_to_first": {name: round(mean / means[0], 3) for name, mean in zip(names, means, strict=True)},
        "questions_with_other_hits": {name: sum(not _same_hits(row[v], row[0]) for row in hits) for v, name in enumerate(names)},
        "cpu": "this process + the searching backends, on-core time a search, versions alternated question by question",
        "machine": machine(),
        "date": today(),
    }


def _same_hits(these: list[tuple[int, float]], those: list[tuple[int, float]]) -> bool:
    """The same chunks in the same order, with scores within 1e-9."""
    return [chunk for chunk, _ in these] == [chunk for chunk, _ in those] and all(
        abs(one - other) <= 1e-9 for (_, one), (_, other) in zip(these, those, strict=True))


def _load(path: Path):  # type: ignore[no-untyped-def]
    """A copy of search_sql.py, imported under a name of its own."""
    spec = importlib.util.spec_from_file_location(f"bm25_variant_{abs(hash(path.resolve()))}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if "bm25" not in getattr(module, "STATEMENTS", {}):
        raise SystemExit(f"{path}: no STATEMENTS['bm25']: give a copy of services/retrieval/search_sql.py")
    return module


def _client_backends(settings) -> set[int]:  # type: ignore[no-untyped-def]
    """The embedded server's client backends: a sliced search runs its slices on pooled connections."""
    processes = server_cpu_by_process(settings, settings.workbench_data_dir) or {}
    return {pid for pid, (role, _) in processes.items() if role == "postgres: backend"}


def _on_cpu_ns(pids: set[int]) -> int:
    """Nanoseconds the processes have run on a core (the first field of their schedstat)."""
    total = 0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
        except FileNotFoundError:
            continue  # a pooled connection closed meanwhile
    return total


if __name__ == "__main__":
    raise SystemExit(main())
