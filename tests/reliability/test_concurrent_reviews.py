"""Concurrency against one database: 20 reviewers racing on shared runs (threads, and
threads in separate processes, all through the service layer), and an ingest racing the
searches that answer questions.

The review checks compare what every reviewer was told (landed as version v, or conflict)
with the append-only history and the runs' current state, so a lost update, a phantom
history row or a verdict saved over one its reviewer never saw is caught.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from services.review.queue import ACTIONS
from tests.reliability._workers import Child, children, run_reviewers

SHARED_RUNS = 5  # few runs, many reviewers: most saves race someone
REVIEWERS = 20
ACTIONS_TOTAL = 500

_HISTORY = """
SELECT run_id, version, action, reviewer, previous_status, new_status, flag_reason, corrected_answer, comment
FROM review_history WHERE run_id = ANY(:ids) ORDER BY run_id, version
"""
_CURRENT = """
SELECT id, status, review_version, reviewer, review_comment, flag_reason, corrected_answer
FROM runs WHERE id = ANY(:ids)
"""


@pytest.fixture()
def shared_runs(clean_db) -> list[int]:  # type: ignore[no-untyped-def]
    from tests.services.test_export import make_run, store

    return store(*(make_run(f"Shared question {i}: how often are the pump seals inspected?") for i in range(SHARED_RUNS)))


def check_against_history(outcomes: list[dict[str, Any]], run_ids: list[int], engine) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Assert every action's outcome agrees with the history and the current state."""
    errors = [o for o in outcomes if o["outcome"] == "error"]
    assert not errors, f"{len(errors)} actions failed with something other than a conflict: {errors[:3]}"
    landed = [o for o in outcomes if o["outcome"] == "landed"]
    conflicts = [o for o in outcomes if o["outcome"] == "conflict"]
    assert len(landed) + len(conflicts) == len(outcomes)
    with engine.connect() as conn:
        history = conn.execute(text(_HISTORY), {"ids": run_ids}).mappings().all()
        current = {r["id"]: r for r in conn.execute(text(_CURRENT), {"ids": run_ids}).mappings()}

    # The history holds exactly the landed actions: none missing, none extra.
    assert len(history) == len(landed)
    assert ({(h["run_id"], h["version"], h["reviewer"], h["comment"], h["action"]) for h in history}
            == {(o["run"], o["version"], o["reviewer"], o["comment"], o["action"]) for o in landed})
    # No verdict silently overwritten: each landed save replaced exactly the version and
    # status its reviewer had read, and each conflict was a save someone else beat.
    overwrote = [o for o in landed if (o["version"], o["previous_status"]) != (o["seen_version"] + 1, o["seen_status"])]
    assert not overwrote, f"{len(overwrote)} saves replaced a verdict their reviewer never saw: {overwrote[:3]}"
    assert all(o["current_version"] > o["seen_version"] for o in conflicts)

    for run_id in run_ids:
        rows = [h for h in history if h["run_id"] == run_id]
        assert [h["version"] for h in rows] == list(range(1, len(rows) + 1)), f"run {run_id}: versions not contiguous"
        assert [h["previous_status"] for h in rows] == ["pending"] + [h["new_status"] for h in rows[:-1]]
        assert all(h["new_status"] == ACTIONS[h["action"]] for h in rows)
        now = current[run_id]
        assert now["review_version"] == len(rows)
        if rows:
            last = rows[-1]
            assert (now["status"], now["reviewer"], now["review_comment"], now["flag_reason"]) == (
                last["new_status"], last["reviewer"], last["comment"], last["flag_reason"])
        corrections = [h["corrected_answer"] for h in rows if h["action"] == "correct"]
        assert now["corrected_answer"] == (corrections[-1] if corrections else None)
    return len(landed), len(conflicts)


def test_twenty_reviewer_threads_every_action_lands_or_conflicts(shared_runs, engine):  # type: ignore[no-untyped-def]
    names = [f"thread-{i:02d}" for i in range(REVIEWERS)]
    outcomes = run_reviewers(names, ACTIONS_TOTAL // REVIEWERS, shared_runs, seed=7)
    assert len(outcomes) == ACTIONS_TOTAL
    landed, conflicts = check_against_history(outcomes, shared_runs, engine)
    assert landed >= SHARED_RUNS and conflicts > 0  # the race happened, and it was refereed


def test_reviewers_in_separate_processes_and_this_one_share_one_history(shared_runs, engine, tmp_path: Path):  # type: ignore[no-untyped-def]
    go = tmp_path / "go"
    per_reviewer = ACTIONS_TOTAL // REVIEWERS
    local_names = [f"local-{i}" for i in range(8)]
    groups = [[f"proc{p}-{i}" for i in range(4)] for p in range(3)]  # 8 + 3 x 4 = 20 reviewers
    outputs = [tmp_path / f"proc{p}.jsonl" for p in range(len(groups))]
    local: list[dict[str, Any]] = []
    with children() as started:
        for p, names in enumerate(groups):
            started.append(Child("reviewers", "--runs", ",".join(map(str, shared_runs)), "--names", ",".join(names),
                                 "--actions", str(per_reviewer), "--seed", str(p + 2), "--go", str(go),
                                 "--out", str(outputs[p])))
        pids = {child.line()["ready"] for child in started}  # each has joined the store
        start = threading.Event()
        here = threading.Thread(target=lambda: local.extend(
            run_reviewers(local_names, per_reviewer, shared_runs, seed=1, start=start)))
        here.start()
        go.touch()
        start.set()
        here.join()
        for child, names in zip(started, groups):
            assert child.line()["done"] == len(names) * per_reviewer
            assert child.finish() == 0, child.stderr()
    assert len(pids) == len(groups)
    remote = [json.loads(line) for out in outputs for line in out.read_text().splitlines()]
    outcomes = local + remote
    assert len(outcomes) == ACTIONS_TOTAL
    landed, conflicts = check_against_history(outcomes, shared_runs, engine)
    assert conflicts > 0
    assert any(o["outcome"] == "landed" for o in local) and any(o["outcome"] == "landed" for o in remote)


# --- ingest while questions are answered ------------------------------------------------------

RACE_COLLECTION = "race"
MARKER = "quillwort"
RACE_DOCUMENTS = 96  # three ingest batches (32 each), so searches run between commits
_VISIBLE = """
SELECT d.id, count(c.id) FROM documents d JOIN collections k ON k.id = d.collection_id
LEFT JOIN chunks c ON c.document_id = d.id WHERE k.name = :name GROUP BY d.id
"""
_STATS = """
SELECT s.n_chunks, (SELECT count(*) FROM chunks c WHERE c.collection_id = k.id) AS chunks,
       t.df AS marker_df, (SELECT count(*) FROM bm25_postings p WHERE p.term_id = t.id) AS marker_postings
FROM collections k JOIN bm25_stats s ON s.collection_id = k.id
LEFT JOIN bm25_terms t ON t.collection_id = k.id AND t.term = :term
WHERE k.name = :name
"""


def _race_documents():  # type: ignore[no-untyped-def]
    from services.corpus.extract import SourceDocument

    return [
        SourceDocument(f"race-{i:03d}", f"Procedure {i}", " ".join(
            f"Step {k} of procedure p{i:03d} checks the {MARKER} gauge on line {k}." for k in range(3)), "race")
        for i in range(RACE_DOCUMENTS)
    ]


def test_searches_during_an_ingest_never_see_half_a_document(clean_db, settings):  # type: ignore[no-untyped-def]
    from services.corpus.ingest import ingest_documents
    from services.retrieval import embedding
    from services.retrieval.search import default_params, search_in_session
    from services.retrieval.text import tokenize
    from services.store import transaction

    small = settings.model_copy(update={"chunk_tokens": 20, "chunk_overlap_tokens": 0})  # a chunk per step
    query = f"{MARKER} gauge"
    vector = embedding.encode(settings.embedding_model, [query])[0]  # the reader thread never touches the model
    params = default_params(settings, mode="hybrid", k=40, collection=RACE_COLLECTION)
    done = threading.Event()
    snapshots: list[tuple[set[int], dict[int, int], Any]] = []
    failures: list[BaseException] = []

    def answer_questions() -> None:
        try:
            while True:
                last = done.is_set()  # one more pass after the ingest finished
                with transaction(settings) as session:
                    # One snapshot for the search and the counts: what the search saw.
                    session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
                    result = search_in_session(query, params, session=session, settings=settings, query_vector=vector)
                    visible = dict(session.execute(text(_VISIBLE), {"name": RACE_COLLECTION}).all())
                    stats = session.execute(text(_STATS), {"name": RACE_COLLECTION, "term": tokenize(MARKER)[0]}).first()
                snapshots.append(({h.document_id for h in result.hits}, visible, stats))
                if last:
                    return
        except BaseException as exc:
            failures.append(exc)

    reader = threading.Thread(target=answer_questions)
    reader.start()
    try:
        summary = ingest_documents(_race_documents(), collection=RACE_COLLECTION, settings=small)
    finally:
        done.set()
        reader.join()
    assert not failures, failures
    assert summary.ingested == RACE_DOCUMENTS

    final = snapshots[-1][1]
    assert len(final) == RACE_DOCUMENTS and min(final.values()) >= 2  # every document spans several chunks
    partial = [s for s in snapshots if 0 < len(s[1]) < RACE_DOCUMENTS]
    assert partial and any(hits for hits, _, _ in partial), "no search ran while the ingest was half done"
    for hits, visible, stats in snapshots:
        assert hits <= set(visible)
        torn = {doc: n for doc, n in visible.items() if n != final[doc]}
        assert not torn, f"a search saw documents with only some of their chunks: {torn}"
        if stats is not None:  # corpus stats move with the chunks, in the same commit
            assert stats.n_chunks == stats.chunks and stats.marker_df == stats.marker_postings > 0
