"""Shared plumbing for bench scripts: a throwaway store, the SQuAD sample, timing, reporting.

Bench scripts print progress to stderr and, as their last stdout line, one JSON object.
They may read the shared SQuAD data; the repository never contains its text.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SQUAD_DIR = Path(os.environ.get("BENCH_SQUAD_DIR", "/work/shared/data/squad2-halfdev"))
_OWN_SETS = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class EvalSet:
    """A BEIR-format evaluation set: SQuAD half-dev, or one of ours under bench/data."""

    name: str
    corpus: Path
    queries: Path
    qrels: Path


EVAL_SETS = {
    "squad": EvalSet("squad", SQUAD_DIR / "corpus.jsonl", SQUAD_DIR / "queries.jsonl", SQUAD_DIR / "qrels" / "test.tsv"),
    **{name: EvalSet(name, _OWN_SETS / name / "corpus.jsonl", _OWN_SETS / name / "queries.jsonl",
                     _OWN_SETS / name / "qrels.tsv") for name in ("python-reference", "numpy-api")},
}

_STARTED = time.perf_counter()


def log(message: str) -> None:
    """A progress line on stderr, stamped with seconds since the script started."""
    print(f"[{time.perf_counter() - _STARTED:8.1f}s] {message}", file=sys.stderr, flush=True)


@contextmanager
def phase(name: str, timings: dict[str, float] | None = None) -> Iterator[None]:
    """Log the start and duration of a phase; record its seconds in `timings` if given."""
    log(f"{name} ...")
    started = time.perf_counter()
    yield
    seconds = time.perf_counter() - started
    if timings is not None:
        timings[name] = round(seconds, 2)
    log(f"{name}: {seconds:.1f} s (1-min load average {os.getloadavg()[0]:.1f})")


def emit(result: dict[str, Any]) -> None:
    """The machine-readable result: one JSON object, the last line on stdout."""
    sys.stdout.flush()
    print(json.dumps(result, sort_keys=False), flush=True)


def emit_timed(result: dict[str, Any], *, started: float, timings: dict[str, float]) -> None:
    """emit() the result with the wall time since `started` (a perf_counter reading) and the
    seconds of each phase added last."""
    result["wall_s"] = round(time.perf_counter() - started, 1)
    result["phase_s"] = timings
    emit(result)


# --- the store ---------------------------------------------------------------------------

def make_data_dir(requested: Path | None) -> tuple[Path, bool]:
    """The embedded server's data dir and whether this run created it.

    A fresh dir under /tmp by default: pgserver runs postgres as another user when we are
    root and must traverse every parent, hence 0755 and never root's home.
    """
    if requested is not None:
        existed = requested.exists()
        requested.mkdir(parents=True, exist_ok=True)
        return requested.resolve(), not existed
    created = Path(tempfile.mkdtemp(prefix="workbench-bench-", dir="/tmp"))
    created.chmod(0o755)
    return created, True


def bench_settings(data_dir: Path):  # type: ignore[no-untyped-def]
    """Settings for a bench run: DATABASE_URL from the environment wins, else the data dir."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from services.settings import Settings

    return Settings(workbench_data_dir=data_dir)


def prepare_store(requested: Path | None):  # type: ignore[no-untyped-def]
    """make_data_dir, exported as WORKBENCH_DATA_DIR, and this process's settings on it.

    Settings are read once per process, so the variable is set before the first settings
    object is built; what the bench starts (the API server, spawned reviewers, the app under
    AppTest) inherits it. DATABASE_URL from the environment still wins. Returns
    (data dir, whether this run created it, settings).
    """
    data_dir, created = make_data_dir(requested)
    os.environ["WORKBENCH_DATA_DIR"] = str(data_dir)
    from services.settings import get_settings

    get_settings.cache_clear()
    return data_dir, created, get_settings()


def describe(settings) -> str:  # type: ignore[no-untyped-def]
    from db import describe_store

    info = describe_store(settings)
    return f"{info.kind} {info.location}"


def shutdown_store(settings, data_dir: Path, *, remove: bool) -> None:  # type: ignore[no-untyped-def]
    """Close our connections; stop the embedded server and delete its data dir if asked."""
    from services.store import dispose_engines

    dispose_engines()
    if not settings.embedded or not remove:
        return
    import pgserver

    pgdata = (data_dir / "pgdata").resolve()
    server = pgserver.PostgresServer._instances.get(pgdata)
    if server is not None:
        server.cleanup()  # cleanup_mode="stop": stops postgres if we are its last user
    shutil.rmtree(data_dir, ignore_errors=True)
    log(f"removed {data_dir}")


# --- data --------------------------------------------------------------------------------

def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def paragraphs_of(eval_set: EvalSet) -> list[dict[str, Any]]:
    """An evaluation set's paragraphs: {_id, title, text, ...} in file order."""
    if not eval_set.corpus.exists():
        raise SystemExit(f"benchmark data not found: {eval_set.corpus} (set BENCH_SQUAD_DIR for SQuAD)")
    return read_jsonl(eval_set.corpus)


def squad_paragraphs() -> list[dict[str, Any]]:
    """The SQuAD 2.0 half-dev paragraphs: {_id, title, text, ...} in file order."""
    return paragraphs_of(EVAL_SETS["squad"])


def squad_questions() -> list[dict[str, Any]]:
    """The SQuAD 2.0 half-dev questions: {_id, text, metadata} in file order."""
    return read_jsonl(SQUAD_DIR / "queries.jsonl")


def squad_sample(per_class: int, *, seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`per_class` answerable and `per_class` unanswerable SQuAD questions, drawn at random
    with `seed`: the same questions in every bench that asks for the same size and seed."""
    return question_sample(EVAL_SETS["squad"], per_class, seed=seed)


def question_sample(eval_set: EvalSet, per_class: int, *,
                    seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Up to `per_class` answerable and unanswerable questions of a set, drawn with `seed`
    (SQuAD marks the unanswerable ones is_impossible, our sets answerable: false)."""
    import random

    def answerable(question: dict[str, Any]) -> bool:
        meta = question["metadata"]
        return not meta["is_impossible"] if "is_impossible" in meta else bool(meta["answerable"])

    questions = read_jsonl(eval_set.queries)
    rng = random.Random(seed)
    pools = [q for q in questions if answerable(q)], [q for q in questions if not answerable(q)]
    yes, no = (rng.sample(pool, min(per_class, len(pool))) for pool in pools)
    return yes, no


# --- numbers -----------------------------------------------------------------------------

def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), linear interpolation between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def rounded(value: float, digits: int = 3) -> float:
    return round(float(value), digits)


def machine() -> str:
    """CPU model, cores and memory, for reading numbers from different machines side by side."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        import psutil

        memory = f", {psutil.virtual_memory().total / 2**30:.0f} GiB RAM"
    except ImportError:
        pass
    system = f"{platform.system()} {platform.release()}, Python {platform.python_version()}"
    return f"{cpu}, {os.cpu_count()} cores{memory}, {system}"


def today() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- a large corpus from a small one -----------------------------------------------------

CHUNK_MAX_WORDS = 150  # about the 200 model tokens real chunks are packed to


def derive_chunks(paragraphs: list[dict[str, Any]], n: int, *, seed: int) -> list[tuple[str, str]]:
    """`n` distinct (title, chunk text) pairs recombined from the paragraphs' sentences,
    grouped by title.

    Each chunk is a run of 2-5 consecutive sentences of one article, plus (usually) a run
    of 0-3 sentences from elsewhere in the same article, cut to CHUNK_MAX_WORDS words:
    vocabulary, term co-occurrence and the title travelling with each chunk stay those of
    the source articles, so document frequencies and lengths look like a real corpus.
    Deterministic for a given seed.
    """
    import random

    from services.corpus.chunking import split_sentences

    articles: dict[str, list[str]] = {}
    for paragraph in paragraphs:
        articles.setdefault(paragraph["title"], []).extend(split_sentences(paragraph["text"]))
    titles = sorted(articles)
    cumulative: list[int] = []
    for title in titles:
        cumulative.append((cumulative[-1] if cumulative else 0) + len(articles[title]))
    rng = random.Random(seed)
    seen: set[str] = set()
    chunks: list[tuple[str, str]] = []
    attempts = 0
    while len(chunks) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise SystemExit(f"could not derive {n:,} distinct chunks from {len(paragraphs)} paragraphs")
        title = rng.choices(titles, cum_weights=cumulative)[0]
        sentences = articles[title]
        start = rng.randrange(len(sentences))
        picked = sentences[start:start + rng.randint(2, 5)]
        extra = rng.randint(0, 3)
        if extra:
            other = rng.randrange(len(sentences))
            picked += [s for s in sentences[other:other + extra] if s not in picked]
        words, kept = 0, []
        for sentence in picked:
            words += len(sentence.split())
            if kept and words > CHUNK_MAX_WORDS:
                break
            kept.append(sentence)
        body = " ".join(kept)
        if body not in seen:
            seen.add(body)
            chunks.append((title, body))
    chunks.sort(key=lambda pair: pair[0])  # grouped by article, generation order within it
    return chunks


def standin_vectors(
    chunk_texts: list[str], query_texts: list[str], *, dim: int, seed: int, fit_on: int = 100_000,
    project_chunks: bool = True,
) -> tuple[Any, Any]:
    """Unit-length `dim`-d vectors from TF-IDF + truncated SVD (LSA), fitted on the chunks.

    A stand-in for the sentence model when embedding the whole corpus would take an hour:
    same dimension and norm, text-derived neighbourhoods, so the HNSW index and the SQL do
    the same work. The model is fitted on a seeded sample of at most `fit_on` chunks (the
    vocabulary and topics of a million recombined chunks are those of any 100k of them) and
    applied to all of them in blocks, so memory stays that of one block (or to none of them
    when only the queries' vectors are wanted: the chunk vectors are None). Queries whose
    words are all unseen get a zero vector.
    """
    import random

    import numpy as np
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.preprocessing import normalize

    sample = (chunk_texts if len(chunk_texts) <= fit_on
              else random.Random(seed).sample(chunk_texts, fit_on))
    vectorizer = TfidfVectorizer(sublinear_tf=True, min_df=2, dtype=np.float32)
    svd = TruncatedSVD(n_components=dim, random_state=seed)
    svd.fit(vectorizer.fit_transform(sample))

    def project(texts: list[str]) -> Any:
        return normalize(svd.transform(vectorizer.transform(texts))).astype(np.float32)

    if not project_chunks:
        return None, project(query_texts)
    chunk_vectors = np.empty((len(chunk_texts), dim), dtype=np.float32)
    for start in range(0, len(chunk_texts), fit_on):
        chunk_vectors[start:start + fit_on] = project(chunk_texts[start:start + fit_on])
    return chunk_vectors, project(query_texts)


# --- loading a corpus fast -----------------------------------------------------------------

CHUNKS_PER_DOCUMENT = 8
POSTINGS_BATCH_CHUNKS = 5_000

_RESERVE_IDS = "SELECT nextval(pg_get_serial_sequence(:table, 'id')) FROM generate_series(1, :n)"
_COPY_DOCUMENTS = (
    "COPY documents (id, collection_id, external_id, title, source, content_hash, metadata) FROM STDIN"
)
_COPY_CHUNKS = (
    "COPY {table} (id, document_id, collection_id, ordinal, text, token_count, embedding) "
    "FROM STDIN WITH (FORMAT BINARY)"
)
# The partition's HNSW index (the definition of db/migrations/versions/0001_store.py, pgvector
# defaults m=16, ef_construction=64): building it once after the load is far faster than row
# by row. Attaching the partition adopts it as its part of the parents' chunks_embedding_hnsw.
_HNSW_INDEX = "CREATE INDEX {table}_embedding_idx ON {table} USING hnsw (embedding vector_cosine_ops)"
_PARTITION_HNSW = """
SELECT i.indexrelid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am a ON a.oid = c.relam WHERE i.indrelid = CAST(:table AS regclass) AND a.amname = 'hnsw'
"""
_SHARED_TABLES = ("collections", "documents", "bm25_terms", "bm25_stats")


def reset_collection(session, name: str) -> int:  # type: ignore[no-untyped-def]
    """A new, empty collection called `name` (an old one and all its rows are deleted)."""
    from sqlalchemy import text

    session.execute(text("DELETE FROM collections WHERE name = :name"), {"name": name})
    return int(session.execute(text("INSERT INTO collections (name) VALUES (:name) RETURNING id"),
                               {"name": name}).scalar_one())


def bulk_load(  # type: ignore[no-untyped-def]
    settings, *, collection: str, chunks: list[tuple[str, str]], vectors, token_counts: list[int],
    timings: dict[str, float],
) -> list[int]:
    """Load a corpus the way ingest would leave it; return the chunk ids (in `chunks` order).

    `chunks` are (title, text) pairs grouped by title; consecutive chunks of one title are
    packed into documents of CHUNKS_PER_DOCUMENT. The collection's chunks partition is
    detached for the load, so its HNSW graph is built once over the loaded rows and no other
    collection's index is touched: documents and chunks go in by COPY, postings, terms and
    stats through services.corpus.indexing (the statements ingest runs). Then the graph is
    built, the partition attached, and the tables VACUUM ANALYZEd, so index-only scans and
    plans see a settled store (what autovacuum would get to eventually).
    """
    import hashlib

    from sqlalchemy import text

    from services.corpus.indexing import index_chunks, indexed_text, lock_collection
    from services.store import get_engine, transaction

    documents: list[tuple[str, list[int]]] = []  # (title, chunk indexes)
    for index, (title, _body) in enumerate(chunks):
        if not documents or documents[-1][0] != title or len(documents[-1][1]) == CHUNKS_PER_DOCUMENT:
            documents.append((title, []))
        documents[-1][1].append(index)

    if settings.embedded:
        _relax_checkpoints(settings)
    with transaction(settings) as session:  # short: the parent is locked while detaching
        collection_id = reset_collection(session, collection)
        table = f"chunks_{collection_id}"
        session.execute(text(f"ALTER TABLE chunks DETACH PARTITION {table}"))
        hnsw = session.execute(text(_PARTITION_HNSW), {"table": table}).scalar_one()
        session.execute(text(f"DROP INDEX {hnsw}"))
        session.commit()
    with transaction(settings) as session:
        with phase("load: documents and chunks (COPY)", timings):
            lock_collection(session, collection_id)
            reserve = text(_RESERVE_IDS)
            document_ids = session.execute(reserve, {"table": "documents", "n": len(documents)}).scalars().all()
            chunk_ids = session.execute(reserve, {"table": "chunks", "n": len(chunks)}).scalars().all()
            raw = session.connection().connection.driver_connection
            with raw.cursor() as cursor:
                with cursor.copy(_COPY_DOCUMENTS) as copy:
                    for document_id, (title, members) in zip(document_ids, documents, strict=True):
                        body = "\n".join(chunks[i][1] for i in members)
                        digest = hashlib.sha256(f"{title}\x00{body}".encode()).hexdigest()
                        copy.write_row((document_id, collection_id, f"{collection}-{document_id}", title,
                                        "bench", digest, "{}"))
                with cursor.copy(_COPY_CHUNKS.format(table=table)) as copy:
                    copy.set_types(["int8", "int4", "int4", "int4", "text", "int4", "vector"])
                    for document_id, (_title, members) in zip(document_ids, documents, strict=True):
                        for ordinal, i in enumerate(members):
                            copy.write_row((chunk_ids[i], document_id, collection_id, ordinal, chunks[i][1],
                                            token_counts[i], vectors[i]))
        with phase("load: BM25 postings, terms, stats (services.corpus.indexing.index_chunks)", timings):
            for start in range(0, len(chunks), POSTINGS_BATCH_CHUNKS):
                stop = min(start + POSTINGS_BATCH_CHUNKS, len(chunks))
                index_chunks(session, collection_id, chunk_ids[start:stop],
                             [indexed_text(title, body) for title, body in chunks[start:stop]])
                if stop % (20 * POSTINGS_BATCH_CHUNKS) == 0 or stop == len(chunks):
                    log(f"  postings for {stop:,}/{len(chunks):,} chunks")
        with phase("load: commit", timings):
            session.commit()

    engine = get_engine(settings)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        with phase("load: HNSW index build", timings):
            workers = str(max(1, (os.cpu_count() or 2) - 1))  # the leader builds too
            # The graph of a million 384-d vectors is about 2 GB; built outside memory it is
            # several times slower.
            conn.execute(text("SELECT set_config('maintenance_work_mem', '6GB', false)"))
            conn.execute(text("SELECT set_config('max_parallel_maintenance_workers', :n, false)"), {"n": workers})
            conn.execute(text(_HNSW_INDEX.format(table=table)))
        with phase("load: attach the partition", timings):
            conn.execute(text(f"ALTER TABLE chunks ATTACH PARTITION {table} FOR VALUES IN ({collection_id})"))
        with phase("load: VACUUM ANALYZE", timings):
            tables = (table, f"bm25_postings_{collection_id}", *_SHARED_TABLES)
            conn.execute(text(f"VACUUM (ANALYZE) {', '.join(tables)}"))
    return list(chunk_ids)


def collection_chunk_ids(settings, collection: str) -> list[int]:  # type: ignore[no-untyped-def]
    """A loaded collection's chunk ids in load order (bulk_load hands them out ascending)."""
    from sqlalchemy import text

    from services.store import transaction

    with transaction(settings) as session:
        return list(session.execute(text(
            "SELECT c.id FROM chunks c JOIN collections k ON k.id = c.collection_id "
            "WHERE k.name = :name ORDER BY c.id"), {"name": collection}).scalars())


def _relax_checkpoints(settings) -> None:  # type: ignore[no-untyped-def]
    """Spread the embedded bench server's checkpoints for a load of many GB: with the default
    1 GB max_wal_size a checkpoint, and a full-page image of every page touched after it,
    would come every few seconds of the load."""
    from sqlalchemy import text

    from services.store import get_engine

    with get_engine(settings).connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("ALTER SYSTEM SET max_wal_size = '16GB'"))
        conn.execute(text("ALTER SYSTEM SET checkpoint_timeout = '30min'"))
        conn.execute(text("SELECT pg_reload_conf()"))


# --- CPU time, the measure that other processes on a shared machine do not inflate ---------

def server_cpu_seconds(settings, data_dir: Path) -> float | None:  # type: ignore[no-untyped-def]
    """User + system CPU seconds used so far by the embedded server (postmaster and children).

    None with DATABASE_URL: the server may be on another host.
    """
    processes = server_cpu_by_process(settings, data_dir)
    return None if processes is None else sum(seconds for _, seconds in processes.values())


def server_cpu_by_process(settings, data_dir: Path) -> dict[int, tuple[str, float]] | None:  # type: ignore[no-untyped-def]
    """pid -> (what the process is, CPU seconds so far) for the embedded server's postmaster and
    live children: what the server's CPU went to (a backend's query, an autovacuum worker, the
    checkpointer). None with DATABASE_URL or when the server is not running."""
    if not settings.embedded:
        return None
    import psutil

    from db.embedded import postgres_pid

    pid = postgres_pid(data_dir)
    if pid is None:
        return None
    found = {}
    postmaster = psutil.Process(pid)
    for process in [postmaster, *postmaster.children(recursive=True)]:
        try:
            times, title = process.cpu_times(), " ".join(process.cmdline())
        except psutil.Error:
            continue  # exited meanwhile
        found[process.pid] = (_process_role(title, is_postmaster=process.pid == pid), times.user + times.system)
    return found


def _process_role(title: str, *, is_postmaster: bool) -> str:
    """'postgres: checkpointer', 'postgres: autovacuum worker', 'postgres: backend' from a
    process title such as 'postgres: bench bench [local] idle in transaction'."""
    if is_postmaster:
        return "postgres: postmaster"
    role = title.removeprefix("postgres: ").strip()
    if "[local]" in role or "(" in role:  # a client connection: 'user db [local] state' or 'user db host(port) state'
        return "postgres: backend"
    return f"postgres: {role}"
