"""Reads on a streaming replica, writes on the primary: DATABASE_READ_URL against a real replica
of the session's embedded server (pg_basebackup -R, started with pgserver's own pg_ctl)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pydantic import SecretStr
from sqlalchemy import Engine

from services.corpus.extract import SourceDocument
from services.corpus.ingest import ingest_documents
from services.retrieval.search import default_params, search
from services.settings import Settings
from services.store import get_read_engine, wait_for_reads

_BIN = Path(__import__("pgserver").__file__).parent / "pginstall" / "bin"
# As root, pgserver runs postgres as this user; the replica must run as the same one.
_SERVER_USER = "pgserver" if os.geteuid() == 0 else None
COLLECTION = "replica-routing"


def _run(*args: str) -> None:
    subprocess.run(list(args), check=True, user=_SERVER_USER, capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def replica_url(engine: Engine) -> Iterator[str]:
    """A streaming replica of the session's primary, on its own socket, stopped afterwards."""
    socket_dir = engine.url.query["host"]
    root = Path(tempfile.mkdtemp(prefix="wb-replica-", dir="/tmp"))
    if _SERVER_USER:
        account = pwd.getpwnam(_SERVER_USER)
        os.chown(root, account.pw_uid, account.pw_gid)
    pgdata, log = root / "pgdata", root / "log"
    try:
        _run(str(_BIN / "pg_basebackup"), "-D", str(pgdata), "-R", "-X", "stream", "-c", "fast",
             "-h", str(socket_dir), "-U", "postgres")
        _run(str(_BIN / "pg_ctl"), "-D", str(pgdata), "-w", "-l", str(log), "-o", f'-h "" -k {root}', "start")
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.fail(f"could not start a streaming replica: {exc.stderr.decode(errors='replace')}")
    try:
        yield f"postgresql://postgres:@/postgres?host={root}"
    finally:
        _run(str(_BIN / "pg_ctl"), "-D", str(pgdata), "-w", "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def split_settings(settings: Settings, replica_url: str, clean_db: None) -> Settings:
    return settings.model_copy(update={"database_read_url": SecretStr(replica_url)})


def _doc(external_id: str, text: str) -> SourceDocument:
    return SourceDocument(external_id=external_id, title=external_id, text=text, source=external_id)


def _found(settings: Settings, query: str) -> list[str]:
    params = default_params(settings, mode="bm25", k=5, collection=COLLECTION)
    return [hit.external_id for hit in search(query, params, settings=settings).hits]


def test_the_read_engine_is_the_replica_and_writes_land_on_the_primary(split_settings: Settings) -> None:
    with get_read_engine(split_settings).connect() as conn:
        assert conn.exec_driver_sql("SELECT pg_is_in_recovery()").scalar_one() is True
    # An ingest writes (a replica would refuse it: read-only); its documents reach the replica.
    ingest_documents([_doc("kiln", "The kiln fires glazed porcelain at 1300 degrees.")],
                     collection=COLLECTION, settings=split_settings)
    wait_for_reads(split_settings)
    assert _found(split_settings, "porcelain kiln") == ["kiln"]


def test_searches_are_served_by_the_replica_not_the_primary(split_settings: Settings, replica_url: str) -> None:
    ingest_documents([_doc("loom", "A jacquard loom weaves patterned damask.")], collection=COLLECTION,
                     settings=split_settings)
    wait_for_reads(split_settings)
    with psycopg.connect(replica_url, autocommit=True) as replica:
        replica.execute("SELECT pg_wal_replay_pause()")
        try:
            ingest_documents([_doc("forge", "The forge anneals damask steel blades.")], collection=COLLECTION,
                             settings=split_settings)
            # The primary holds both documents; the paused replica only the first, and the search sees one.
            assert _found(split_settings, "damask") == ["loom"]
        finally:
            replica.execute("SELECT pg_wal_replay_resume()")
    wait_for_reads(split_settings)
    assert sorted(_found(split_settings, "damask")) == ["forge", "loom"]


def test_a_sliced_search_runs_on_the_replica_in_one_snapshot(split_settings: Settings) -> None:
    """The slices adopt the search's snapshot on the replica too (exported on a standby)."""
    ingest_documents([_doc(f"pot{i}", f"A {'thrown ' * i}pot of salt-glazed stoneware, number {i}.") for i in range(6)],
                     collection=COLLECTION, settings=split_settings)
    wait_for_reads(split_settings)
    results = []
    for slices in (1, 3):
        settings = split_settings.model_copy(update={"search_slices": slices, "search_slice_min_chunks": 0})
        params = default_params(settings, mode="hybrid", k=6, collection=COLLECTION)
        results.append([(h.external_id, h.bm25_score, h.dense_similarity) for h in search("thrown stoneware pot", params,
                                                                                          settings=settings).hits])
    assert len(results[0]) == 6
    assert [hit[0] for hit in results[1]] == [hit[0] for hit in results[0]]
    assert [hit[1:] for hit in results[1]] == [pytest.approx(hit[1:], abs=1e-12) for hit in results[0]]
