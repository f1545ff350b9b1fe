"""Shared fixtures: one real embedded PostgreSQL per test session, the real model."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

# The SQuAD 2.0 half-dev set sits beside the checkout (../shared); a clone elsewhere names
# it with WORKBENCH_SQUAD_DIR. Tests that need it skip, saying where they looked.
SHARED_DATA = Path(os.environ.get("WORKBENCH_SQUAD_DIR")
                   or Path(__file__).resolve().parents[2] / "shared" / "data" / "squad2-halfdev")

# A data dir outside root's home with traversable parents (pgserver runs postgres as
# another user when tests run as root); set before any settings object is built.
_DATA_DIR = Path(tempfile.mkdtemp(prefix="workbench-test-", dir="/tmp"))
_DATA_DIR.chmod(0o755)
os.environ["WORKBENCH_DATA_DIR"] = str(_DATA_DIR)
os.environ.pop("DATABASE_URL", None)
os.environ.pop("ANTHROPIC_API_KEY", None)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Refusals are answered at once in tests (many send no key on purpose); the delay itself is
# tested on its own app (tests/api/test_api_authenticate_first.py).
os.environ["API_REFUSAL_DELAY_MS"] = "0"
# No background matrix load racing the tests' TRUNCATEs; the preload is tested on its own
# (tests/pages/test_tuning_kept_matrix.py).
os.environ["TUNING_PRELOAD"] = "false"


@pytest.fixture(scope="session")
def settings():  # type: ignore[no-untyped-def]
    from services.settings import get_settings

    get_settings.cache_clear()
    return get_settings()


@pytest.fixture(scope="session")
def engine(settings):  # type: ignore[no-untyped-def]
    from services.store import dispose_engines, get_engine

    yield get_engine(settings)
    dispose_engines()


CORPUS_TABLES = ("collections", "documents", "chunks", "bm25_terms", "bm25_postings", "bm25_stats")
# Tables, not their partitions: a collection's chunks_<id> and bm25_postings_<id> belong to
# the corpus tables (truncating them emptied the session's SQuAD collection).
_OTHER_TABLES_SQL = """
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname <> 'alembic_version'
"""
# A table needs emptying when it holds rows or its id sequence has moved since the last
# RESTART IDENTITY (tests may count on ids from 1). TRUNCATE costs ~50 ms even on empty
# tables, and most tests leave these untouched.
_USED_SEQUENCE_TABLES_SQL = """
SELECT DISTINCT t.relname FROM pg_sequences s
JOIN pg_class sc ON sc.relname = s.sequencename
JOIN pg_depend d ON d.objid = sc.oid AND d.deptype IN ('a', 'i')
JOIN pg_class t ON t.oid = d.refobjid
WHERE s.schemaname = 'public' AND s.last_value IS NOT NULL
"""
_CLEAR_DEFAULT_CORPUS = (
    "DELETE FROM collections WHERE name NOT IN ('default', 'squad')",  # cascades to their rows
    "DELETE FROM documents WHERE collection_id = (SELECT id FROM collections WHERE name = 'default')",
    "DELETE FROM bm25_terms WHERE collection_id = (SELECT id FROM collections WHERE name = 'default')",
    "DELETE FROM bm25_stats WHERE collection_id = (SELECT id FROM collections WHERE name = 'default')",
)


@pytest.fixture()
def clean_db(engine) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Empty the store before the test, except the session's SQuAD collection."""
    with engine.begin() as conn:
        for statement in _CLEAR_DEFAULT_CORPUS:
            conn.execute(text(statement))
        others = [r[0] for r in conn.execute(text(_OTHER_TABLES_SQL)) if r[0] not in CORPUS_TABLES]
        used = {r[0] for r in conn.execute(text(_USED_SEQUENCE_TABLES_SQL))}
        holding = [name for name in others if name in used or conn.execute(text(f"SELECT EXISTS (SELECT 1 FROM {name})")).scalar()]
        if holding:
            conn.execute(text(f"TRUNCATE {', '.join(holding)} RESTART IDENTITY CASCADE"))
    yield


@pytest.fixture(scope="session")
def squad_dir() -> Path:
    if not (SHARED_DATA / "corpus.jsonl").exists():
        pytest.skip(f"shared dataset not found at {SHARED_DATA} (set WORKBENCH_SQUAD_DIR to its folder)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def squad_collection(engine, squad_dir: Path) -> str:  # type: ignore[no-untyped-def]
    """The SQuAD half-dev corpus ingested once per session into its own collection."""
    from services.corpus.ingest import ingest_paths

    ingest_paths([squad_dir / "corpus.jsonl"], collection="squad")
    return "squad"


# What makes a test slow is what it needs, so the mark follows the need: a test that reads
# SQuAD half-dev (thousands of questions or hundreds of paragraphs to ingest) or drives a
# browser is slow wherever it is written; `make test-fast` leaves these out.
# So are the modules that start, kill and restart PostgreSQL servers and app processes, the
# property-based sweeps over hundreds of generated inputs, the pipeline-quality checks on
# the demo questions, and the API's end-to-end assessment (a real server and its worker):
# seconds per test by design.
_SLOW_FIXTURES = {"squad_dir", "squad_collection"}
_SLOW_MODULES = {"test_faults.py", "test_processes.py", "test_concurrent_reviews.py", "test_embedded.py",
                 "test_bad_input_properties.py", "test_bad_input_upload_properties.py", "test_demo_questions.py",
                 "test_api_assessment.py", "test_read_replica.py"}


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    for item in items:
        needs_slow = _SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))
        if needs_slow or item.get_closest_marker("e2e") or item.path.name in _SLOW_MODULES:
            item.add_marker(pytest.mark.slow)


def pytest_sessionfinish(session, exitstatus):  # type: ignore[no-untyped-def]
    import pgserver

    from services.store import dispose_engines

    dispose_engines()
    # Stop the session's server (if we are its last user) before its data dir goes away.
    server = pgserver.PostgresServer._instances.get((_DATA_DIR / "pgdata").resolve())
    if server is not None:
        server.cleanup()
    shutil.rmtree(_DATA_DIR, ignore_errors=True)
