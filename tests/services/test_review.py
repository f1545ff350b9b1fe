"""Review actions: optimistic locking, history, validation, queue order."""

from __future__ import annotations

import json
import threading

import pytest

from services.answering import pipeline
from services.errors import ConflictError, InputError, NotFoundError
from services.review.queue import QueueFilters, queue_counts, review_history, review_queue, submit_review
from services.scoring.weights import DEFAULT_PROFILE


@pytest.fixture()
def run_ids(clean_db, tmp_path):
    from services.corpus.ingest import ingest_paths
    from tests.services.test_pipeline import DOCS, ScriptedBackend

    for name, body in DOCS.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    ingest_paths([tmp_path])
    backend = ScriptedBackend((0.5,))
    return [pipeline.run(q, "minimal", DEFAULT_PROFILE, backend=backend).run_id
            for q in ("What does SRVO-062 mean?", "How often is J2 grease replaced?", "What is a DSZ zone?")]


def test_approve_flag_correct_are_recorded_in_order(run_ids):
    rid = run_ids[0]
    first = submit_review(rid, expected_version=0, action="approve", reviewer="ana", comment="fine")
    second = submit_review(rid, expected_version=1, action="flag", reviewer="ben", flag_reason="incomplete answer",
                           comment="misses the remastering step")
    third = submit_review(rid, expected_version=2, action="correct", reviewer="ana", corrected_answer="Replace + remaster.")
    assert (first.version, second.version, third.version) == (1, 2, 3)
    history = review_history(rid)
    assert [(h.action, h.reviewer, h.previous_status, h.new_status) for h in history] == [
        ("approve", "ana", "pending", "approved"), ("flag", "ben", "approved", "flagged"),
        ("correct", "ana", "flagged", "corrected")]
    assert history[1].flag_reason == "incomplete answer" and history[2].corrected_answer == "Replace + remaster."


def test_second_save_on_the_same_version_conflicts_and_overwrites_nothing(run_ids):
    rid = run_ids[0]
    submit_review(rid, expected_version=0, action="approve", reviewer="ana")
    with pytest.raises(ConflictError) as caught:
        submit_review(rid, expected_version=0, action="flag", reviewer="ben", flag_reason="wrong answer")
    assert "ana approved it" in str(caught.value) and "not saved" in str(caught.value)
    assert caught.value.current["status"] == "approved" and caught.value.current["version"] == 1
    assert [h.reviewer for h in review_history(rid)] == ["ana"]


def test_concurrent_reviewers_exactly_one_lands(run_ids):
    rid = run_ids[1]
    outcomes: list[str] = []
    barrier = threading.Barrier(8)

    def act(i: int) -> None:
        barrier.wait()
        try:
            submit_review(rid, expected_version=0, action="approve", reviewer=f"r{i}")
            outcomes.append("landed")
        except ConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=act, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count("landed") == 1 and outcomes.count("conflict") == 7
    assert len(review_history(rid)) == 1


@pytest.mark.parametrize("kwargs", [
    {"action": "approve", "reviewer": " "},
    {"action": "delete", "reviewer": "ana"},
    {"action": "flag", "reviewer": "ana", "flag_reason": "because"},
    {"action": "correct", "reviewer": "ana", "corrected_answer": "  "},
    {"action": "approve", "reviewer": "ana", "comment": "x" * 6000},
])
def test_invalid_actions_are_rejected_and_nothing_changes(run_ids, kwargs):
    with pytest.raises(InputError):
        submit_review(run_ids[0], expected_version=0, **kwargs)
    assert review_history(run_ids[0]) == []


def test_missing_run_is_not_found(run_ids):
    with pytest.raises(NotFoundError):
        submit_review(999_999, expected_version=0, action="approve", reviewer="ana")


def test_queue_orders_least_confident_first_and_never_requeues_reviewed(run_ids):
    queue = review_queue()
    assert [i.calibrated for i in queue] == sorted(i.calibrated for i in queue)
    submit_review(queue[0].run_id, expected_version=0, action="approve", reviewer="ana", comment="'; DROP TABLE runs; --")
    assert queue[0].run_id not in [i.run_id for i in review_queue()]
    assert queue_counts()["approved"] == 1 and queue_counts()["pending"] == 2
    approved = review_queue(QueueFilters(statuses=("approved",), reviewer="ana"))
    assert [i.run_id for i in approved] == [queue[0].run_id]
    by_disagreement = review_queue(order="disagreement")
    assert [i.disagreement for i in by_disagreement] == sorted((i.disagreement for i in by_disagreement), reverse=True)


def test_disagreement_order_keeps_the_most_disagreeing_runs_under_the_limit(run_ids, engine):
    from sqlalchemy import text

    # The most disagreeing run is also the most confident: a limit applied in confidence
    # order would drop it.
    shapes = {run_ids[0]: (0.1, {"retrieval": 0.1, "reflection": 0.1}),
              run_ids[1]: (0.2, {"retrieval": 0.2, "reflection": 0.3, "grade": 0.25}),
              run_ids[2]: (0.9, {"retrieval": 0.1, "reflection": 0.9})}
    with engine.begin() as conn:
        for run_id, (confidence, signals) in shapes.items():
            conn.execute(text("UPDATE runs SET final_confidence = :c, signals = CAST(:s AS jsonb) WHERE id = :id"),
                         {"c": confidence, "s": json.dumps(signals), "id": run_id})
    queue = review_queue(order="disagreement", limit=2)
    assert [i.run_id for i in queue] == [run_ids[2], run_ids[1]]
    assert [round(i.disagreement, 9) for i in queue] == [0.8, 0.1]
    assert [i.run_id for i in review_queue(limit=2)] == [run_ids[0], run_ids[1]]  # least confident first


def test_like_prefix_takes_wildcards_and_backslashes_literally():
    from services.review.queue import like_prefix

    assert like_prefix("t-1") == "t-1%"
    assert like_prefix("50%_off\\x") == "50\\%\\_off\\\\x%"


def test_queue_filters_by_source_and_finds_a_run_by_its_exact_trace_id(run_ids):
    from services.review.queue import run_for_trace, run_sources

    assert "ask" in run_sources() and {"import", "api", "otlp"} <= set(run_sources())
    assert {i.run_id for i in review_queue(QueueFilters(sources=("ask",)))} == set(run_ids)
    assert review_queue(QueueFilters(sources=("import",))) == []
    assert all(i.source == "ask" and i.trace_id is None for i in review_queue())
    assert run_for_trace("t-1") is None


def test_a_trace_id_two_apps_sent_opens_the_asked_apps_run(run_ids):
    from sqlalchemy import text

    from services.review.queue import run_for_trace
    from services.store import transaction

    first, second, _ = run_ids
    with transaction() as session:  # trace ids are unique per app: two systems sent the same one
        for run_id, app in ((first, "shop"), (second, "support")):
            session.execute(text("UPDATE runs SET trace_id = 't-same', app = :app WHERE id = :id"),
                            {"app": app, "id": run_id})
    assert run_for_trace("t-same", "shop") == (first, 0)
    assert run_for_trace("t-same", "support") == (second, 0)
    assert run_for_trace("t-same") == (second, 0)  # no app named: the newest
    assert run_for_trace("t-same", "billing") is None
