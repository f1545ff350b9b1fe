"""Faults: an ingest killed mid-way, the database going away mid-session, a failing LLM
backend. Each leaves the store whole and the app able to carry on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from db.embedded import embedded_uri, handle_pids, postgres_pid
from services.cli import app
from services.errors import DatabaseRefusedError, DatabaseUnavailableError
from services.review.queue import current_review_state, review_history, submit_review
from services.settings import get_settings
from services.store import get_engine, transaction
from tests.reliability._workers import ROOT, Child, children, fresh_data_dir

# --- SIGKILL mid-ingest ---------------------------------------------------------------------

KILLED_COLLECTION = "killed"
KILLED_DOCUMENTS = 160  # five ingest batches
SMALL_CHUNKS = {"CHUNK_TOKENS": "20", "CHUNK_OVERLAP_TOKENS": "0"}  # several chunks per small file

_DOCUMENT_CHUNKS = """
SELECT d.external_id, array_agg(c.ordinal ORDER BY c.ordinal) FILTER (WHERE c.id IS NOT NULL) AS ordinals
FROM documents d LEFT JOIN chunks c ON c.document_id = d.id
WHERE d.collection_id = :cid GROUP BY d.external_id
"""
_STATS_DRIFT = """
SELECT s.n_chunks - (SELECT count(*) FROM chunks c WHERE c.collection_id = :cid) AS n_chunks_drift,
       s.total_dl - (SELECT coalesce(sum(dl), 0) FROM (SELECT DISTINCT p.chunk_id, p.dl FROM bm25_postings p
                     JOIN chunks c ON c.id = p.chunk_id WHERE c.collection_id = :cid) lens) AS total_dl_drift
FROM bm25_stats s WHERE s.collection_id = :cid
"""
_DF_DRIFT = """
SELECT t.term, t.df, count(p.chunk_id) AS postings FROM bm25_terms t LEFT JOIN bm25_postings p ON p.term_id = t.id
WHERE t.collection_id = :cid GROUP BY t.id, t.term, t.df HAVING t.df <> count(p.chunk_id)
"""
_UNINDEXED_CHUNKS = """
SELECT count(*) FROM chunks c WHERE c.collection_id = :cid
AND NOT EXISTS (SELECT 1 FROM bm25_postings p WHERE p.chunk_id = c.id)
"""


def _write_documents(root: Path) -> None:
    root.mkdir()
    for i in range(KILLED_DOCUMENTS):
        steps = " ".join(f"Step {k} of procedure {i} turns the bleed valve {k} quarter turns." for k in range(2 + i % 2))
        (root / f"procedure-{i:03d}.md").write_text(f"# Procedure {i}\n\n{steps}\n", encoding="utf-8")


def _expected_chunks(root: Path, settings) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Chunks per document as ingest makes them (same parser, chunker and token counter)."""
    from services.corpus.chunking import chunk_text
    from services.corpus.extract import parse_paths
    from services.retrieval import embedding

    count_tokens = embedding.token_counter(settings.embedding_model)
    return {doc.external_id: len(chunk_text(doc.text, count_tokens=count_tokens, max_tokens=settings.chunk_tokens,
                                            overlap_tokens=settings.chunk_overlap_tokens))
            for parsed in parse_paths([root]) for doc in parsed.documents}


def _collection_documents(engine) -> int:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return conn.execute(text("SELECT count(*) FROM documents d JOIN collections c ON c.id = d.collection_id "
                                 "WHERE c.name = :name"), {"name": KILLED_COLLECTION}).scalar_one()


def _assert_whole(engine, expected: dict[str, int]) -> int:  # type: ignore[no-untyped-def]
    """Every stored document has all its chunks, and BM25 stats and df agree with them."""
    with engine.connect() as conn:
        cid = conn.execute(text("SELECT id FROM collections WHERE name = :name"), {"name": KILLED_COLLECTION}).scalar_one()
        stored = {row.external_id: row.ordinals or [] for row in conn.execute(text(_DOCUMENT_CHUNKS), {"cid": cid})}
        drift = conn.execute(text(_STATS_DRIFT), {"cid": cid}).one()
        df_drift = conn.execute(text(_DF_DRIFT), {"cid": cid}).all()
        unindexed = conn.execute(text(_UNINDEXED_CHUNKS), {"cid": cid}).scalar_one()
    partial = {doc: len(ordinals) for doc, ordinals in stored.items() if ordinals != list(range(expected[doc]))}
    assert not partial, f"documents stored without all their chunks: {partial}"
    assert (drift.n_chunks_drift, drift.total_dl_drift) == (0, 0)
    assert df_drift == [] and unindexed == 0
    return len(stored)


def test_killed_ingest_leaves_whole_documents_and_the_same_ingest_completes(clean_db, engine, settings, tmp_path):  # type: ignore[no-untyped-def]
    from services.corpus.ingest import ingest_paths

    root = tmp_path / "procedures"
    _write_documents(root)
    small = settings.model_copy(update={"chunk_tokens": 20, "chunk_overlap_tokens": 0})
    expected = _expected_chunks(root, small)
    assert len(expected) == KILLED_DOCUMENTS and min(expected.values()) >= 2

    with children() as started:
        child = Child("ingest", str(root), "--collection", KILLED_COLLECTION, env=SMALL_CHUNKS)
        started.append(child)
        child.line()
        deadline = time.monotonic() + 300
        while _collection_documents(engine) == 0:  # the first batch has committed: kill it now
            assert child.process.poll() is None, f"the ingest ended before it could be killed\n{child.stderr()}"
            assert time.monotonic() < deadline, "the first batch never committed"
            time.sleep(0.01)
        child.kill()
    present = _assert_whole(engine, expected)
    assert 0 < present < KILLED_DOCUMENTS, "the kill did not land mid-ingest"

    summary = ingest_paths([root], collection=KILLED_COLLECTION, settings=small)  # the same ingest, restarted

    assert (summary.unchanged, summary.ingested, summary.replaced) == (present, KILLED_DOCUMENTS - present, 0)
    assert _assert_whole(engine, expected) == KILLED_DOCUMENTS


# --- the database going away mid-session ------------------------------------------------------

@pytest.fixture()
def fresh_store(engine) -> Iterator[Path]:  # type: ignore[no-untyped-def]
    """The app's settings pointed at a new embedded store (this process starts its server);
    the session's store and settings are restored afterwards."""
    from services import store

    saved = dict(os.environ)
    with fresh_data_dir() as data_dir:
        os.environ["WORKBENCH_DATA_DIR"] = str(data_dir)
        get_settings.cache_clear()
        try:
            yield data_dir
        finally:
            with store._ENGINES_LOCK:  # only this store's engines; the session's stay as they are
                for key in [k for k in store._ENGINES if str(data_dir) in k]:
                    store._ENGINES.pop(key).dispose()
            os.environ.clear()
            os.environ.update(saved)
            get_settings.cache_clear()


def _export_cli(args: list[str], output: Path) -> tuple[int, str]:
    """`workbench <args> export` in this process; the CLI's own settings are undone after."""
    saved = dict(os.environ)
    try:
        result = CliRunner().invoke(app, [*args, "export", "-o", str(output)])
    finally:
        os.environ.clear()
        os.environ.update(saved)
        get_settings.cache_clear()
    return result.exit_code, result.output


def _stop_postgres(data_dir: Path, how: str) -> None:
    import pgserver
    from pgserver._commands import pg_ctl

    pid = postgres_pid(data_dir)
    assert pid is not None
    processes = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    if how == "immediate":
        server = pgserver.PostgresServer._instances[(data_dir / "pgdata").resolve()]
        pg_ctl(["-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user)
    else:
        os.kill(pid, signal.SIGKILL)
    # Backends exit once they notice the postmaster is gone; until then old pooled
    # connections could still answer, and a restart would find their shared memory in use.
    _, alive = psutil.wait_procs(processes, timeout=30)
    assert not alive, f"postgres processes still running: {alive}"
    assert postgres_pid(data_dir) is None


@pytest.mark.parametrize("outage", ["immediate-stop-then-cli-restart", "sigkill-then-app-restart"])
def test_database_down_mid_session_is_a_clear_error_then_recovers_with_every_review(fresh_store, tmp_path, outage):  # type: ignore[no-untyped-def]
    from tests.services.test_export import make_run, store

    run_id = store(make_run())[0]
    submit_review(run_id, expected_version=0, action="approve", reviewer="ana", comment="committed before the outage")
    uri = embedded_uri(fresh_store)  # the same server, as a DATABASE_URL would name it
    before = postgres_pid(fresh_store)

    _stop_postgres(fresh_store, "immediate" if outage.startswith("immediate") else "kill")

    # The app: the action in flight fails with a clear, actionable error (pages show it with
    # st.error), never a driver traceback. Its next action reconnects (see the end).
    with pytest.raises(DatabaseUnavailableError) as caught:
        submit_review(run_id, expected_version=1, action="flag", reviewer="ben", flag_reason="wrong answer")
    assert "Database unavailable" in str(caught.value) and "nothing was saved" in str(caught.value)
    # The CLI against the same (still down) server: exit 1 and one error line, no traceback.
    code, output = _export_cli(["--database-url", uri], tmp_path / "down.jsonl")
    assert code == 1 and "error: Database unavailable" in output and "Traceback" not in output, output
    assert not (tmp_path / "down.jsonl").exists()

    if outage.endswith("cli-restart"):  # a CLI process starts the embedded server again...
        done = subprocess.run([str(Path(sys.executable).parent / "workbench"), "--data-dir", str(fresh_store), "export",
                               "-o", str(tmp_path / "cli.jsonl")], cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        [record] = [json.loads(line) for line in (tmp_path / "cli.jsonl").read_text().splitlines()]
        assert (record["run_id"], record["verdict"], record["reviewer"]) == (run_id, "approved", "ana")
        assert postgres_pid(fresh_store) is not None  # ...and leaves it up: this process still uses it
        assert handle_pids(fresh_store) == [os.getpid()]

    # Back (restarted by the CLI, or by the app's next action, which starts the embedded
    # server again): the review committed before the outage is there, the failed one is
    # not, and new actions land on top.
    assert [(h.version, h.action, h.reviewer) for h in review_history(run_id)] == [(1, "approve", "ana")]
    assert postgres_pid(fresh_store) not in (None, before)
    assert submit_review(run_id, expected_version=1, action="flag", reviewer="ben", flag_reason="wrong answer").version == 2
    assert current_review_state(run_id) == ("flagged", 2)
    code, output = _export_cli(["--database-url", uri], tmp_path / "back.jsonl")
    assert code == 0, output
    [record] = [json.loads(line) for line in (tmp_path / "back.jsonl").read_text().splitlines()]
    assert (record["verdict"], record["reviewer"], len(record["review_history"])) == ("flagged", "ben", 2)


# --- a failing LLM backend --------------------------------------------------------------------

def test_a_statement_the_server_aborts_is_not_reported_as_an_outage(engine, settings):  # type: ignore[no-untyped-def]
    with pytest.raises(DatabaseRefusedError, match="statement timeout.*SQLSTATE 57014") as caught:
        with transaction(settings) as session:
            session.execute(text("SET LOCAL statement_timeout = '50ms'"))
            session.execute(text("SELECT pg_sleep(5)"))
    assert "nothing was saved" in str(caught.value) and "unavailable" not in str(caught.value)
    assert get_engine(settings) is engine  # the server is up: its pool is kept, not rebuilt
    with transaction(settings) as session:
        assert session.scalar(text("SELECT 1")) == 1


def test_run_with_a_failing_backend_is_stored_and_reviewable(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    from services.answering import pipeline
    from services.answering.runs import load_run
    from services.corpus.ingest import ingest_paths
    from services.review.queue import review_queue
    from services.scoring.weights import DEFAULT_PROFILE
    from tests.services.test_pipeline import DOCS, ScriptedBackend

    for name, body in DOCS.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    ingest_paths([tmp_path])
    run = pipeline.run("What does SRVO-062 mean?", "balanced", DEFAULT_PROFILE,
                       backend=ScriptedBackend(fail={"generate": "rate_limit"}))

    stored = load_run(run.run_id)
    assert stored.status == "pending" and stored.final_answer == ""
    assert [e["kind"] for it in stored.iterations for e in it.errors][:1] == ["rate_limit"]
    assert run.run_id in [item.run_id for item in review_queue()]
    assert current_review_state(run.run_id) == ("pending", 0)
    submit_review(run.run_id, expected_version=0, action="approve", reviewer="ana")
    submit_review(run.run_id, expected_version=1, action="flag", reviewer="ben", flag_reason="incomplete answer",
                  comment="the backend was rate limited: no answer")
    assert [(h.version, h.action, h.reviewer, h.new_status) for h in review_history(run.run_id)] == [
        (1, "approve", "ana", "approved"), (2, "flag", "ben", "flagged")]
