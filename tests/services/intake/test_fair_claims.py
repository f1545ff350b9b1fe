"""The worker takes turns over apps (issue 28): a flood from one app does not hold back another
app's records. Counted in claims, on the real store: B's records, queued behind thousands of
A's, are all claimed within two claims per record of B's; a batch claim shares itself out over
the apps; concurrent claimers still never take a record twice."""

from __future__ import annotations

import threading

from sqlalchemy import text

from services.intake.assess import process_queue
from services.intake.intake import accept_records, mark_failed, next_queued
from services.intake.schema import ExternalRun
from services.store import transaction
from tests.services.test_pipeline import ScriptedBackend

FLOOD = 2_000


def queue(settings, app: str, count: int, *, prefix: str = "") -> list[int]:  # type: ignore[no-untyped-def]
    records = [ExternalRun.model_validate({"question": f"{app} question {i}?", "answer": "An answer.",
                                          "contexts": [{"text": "A passage.", "dense_similarity": 0.5}]})
               for i in range(count)]
    with transaction(settings) as session:
        return [a.intake_id for a in accept_records(records, source="api", app=app, judges=False, session=session)]


def claim_one(settings) -> str | None:  # type: ignore[no-untyped-def]
    """One claim as the worker makes it, the record then done with: the app it came from."""
    with transaction(settings) as session:
        claimed = next_queued(1, session=session)
        for record in claimed:
            mark_failed(record.intake_id, "done in the test", session=session)
    return claimed[0].app if claimed else None


def test_a_flood_from_one_app_does_not_hold_back_anothers_records(clean_db, settings):
    queue(settings, "flood", FLOOD)
    queue(settings, "small", 5)
    claims = [claim_one(settings) for _ in range(10)]
    assert claims.count("small") == 5, claims  # all five within 2 x 5 claims, not after 2,000
    assert claims.count("flood") == 5 and "small" not in [claim_one(settings) for _ in range(3)]

    # A third app arriving mid-flood waits at most one turn of each app with a backlog.
    queue(settings, "late", 2)
    claims = [claim_one(settings) for _ in range(4)]
    assert claims.count("late") == 2, claims


def test_a_batch_claim_is_shared_out_over_the_apps_in_turn(clean_db, settings):
    queue(settings, "a", 50)
    queue(settings, "b", 2)
    queue(settings, "c", 50)
    with transaction(settings) as session:
        batch = next_queued(9, session=session)
    apps = [r.app for r in batch]
    assert apps.count("b") == 2 and sorted([apps.count("a"), apps.count("c")]) == [3, 4], apps  # b's share goes round
    assert len(set(apps[:3])) == 3, apps  # round robin: one of each app before a second of any
    for app in "abc":  # each app's oldest first
        ids = [r.intake_id for r in batch if r.app == app]
        assert ids == sorted(ids)


def test_concurrent_claimers_share_the_apps_without_taking_a_record_twice(clean_db, settings):
    queue(settings, "a", 40)
    queue(settings, "b", 40)
    taken: list[int] = []
    lock, barrier = threading.Lock(), threading.Barrier(4)

    def worker() -> None:
        barrier.wait()
        while True:
            with transaction(settings) as session:
                claimed = next_queued(3, session=session)
                for record in claimed:
                    mark_failed(record.intake_id, "done", session=session)
            if not claimed:
                return
            with lock:
                taken.extend(r.intake_id for r in claimed)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(taken) == len(set(taken)) == 80


def test_the_assessment_drain_takes_turns_too(clean_db, settings):
    flood = queue(settings, "flood", 40)
    small = queue(settings, "small", 3)
    summary = process_queue(limit=6, backend=ScriptedBackend(), settings=settings)
    assert summary.assessed == 6
    with transaction(settings) as session:
        done = dict(session.execute(text("SELECT id, app FROM run_intake WHERE status = 'assessed'")).tuples().all())
        run_apps = session.execute(text("SELECT DISTINCT app FROM runs")).scalars().all()
    assert set(small) <= set(done) and len(set(done) & set(flood)) == 3
    assert sorted(run_apps) == ["flood", "small"]  # each run carries its record's app
