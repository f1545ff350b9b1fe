"""The backlog on the real store and a real API server: how many records wait and how long the
oldest has, in GET /health, kept cheap for a deep queue; and pushes accepted however far the
assessment is behind."""

from __future__ import annotations

import httpx
from sqlalchemy import text

from services.intake.intake import accept_records
from services.intake.schema import ExternalRun
from services.intake.status import Backlog, BacklogReader, queue_backlog
from services.store import transaction
from tests.api._server import real_server

base_url, client = real_server(key_name="backlog")  # no assessment worker: nothing drains the queue


def _push(n: int, *, prefix: str) -> list[int]:
    runs = [ExternalRun.model_validate({"question": f"Question {i}?", "answer": "An answer.", "trace_id": f"{prefix}-{i}",
                                        "contexts": [{"text": "A passage."}]}) for i in range(n)]
    with transaction() as session:
        return [a.intake_id for a in accept_records(runs, source="import", session=session)]


def _backdate(intake_id: int, seconds: int) -> None:
    with transaction() as session:
        session.execute(text("UPDATE run_intake SET received_at = now() - make_interval(secs => :s) WHERE id = :id"),
                        {"s": seconds, "id": intake_id})


def test_the_backlog_counts_the_queued_records_and_ages_the_oldest(clean_db):  # type: ignore[no-untyped-def]
    with transaction() as session:
        empty = queue_backlog(session=session)
    assert (empty.queued, empty.oldest_received_at, empty.oldest_age_s) == (0, None, None)

    ids = _push(3, prefix="b")
    _backdate(ids[0], 600)
    _backdate(ids[1], 7200)  # received earlier, but accepted later: the oldest is the first accepted
    with transaction() as session:
        session.execute(text("UPDATE run_intake SET status = 'failed' WHERE id = :id"), {"id": ids[2]})
        backlog = queue_backlog(session=session)
    assert backlog.queued == 2
    assert backlog.oldest_age_s is not None and 600 <= backlog.oldest_age_s < 660

    with transaction() as session:
        session.execute(text("UPDATE run_intake SET status = 'assessed' WHERE id = :id"), {"id": ids[0]})
        assert queue_backlog(session=session).queued == 1


class Reads:
    """The reader's source of figures, counting how often the store would be read."""

    def __init__(self, queued: int) -> None:
        self.queued, self.count, self.now = queued, 0, 100.0

    def __call__(self) -> Backlog:
        self.count += 1
        return Backlog(self.queued, None, 30.0, self.now)


def test_a_deep_queue_is_counted_at_most_once_a_second_and_a_shallow_one_every_time():
    reads = Reads(queued=50)
    reader = BacklogReader(reads, exact_below=1000, max_age_s=1.0, clock=lambda: reads.now)
    reader(), reader(), reader()
    assert reads.count == 3  # shallow: each call counts afresh, so a push shows at once

    reads.queued = 5000
    first = reader()
    reads.now += 0.5
    again = reader()
    assert reads.count == 4 and again.queued == 5000
    assert again.oldest_age_s == first.oldest_age_s + 0.5  # cached figures still age the oldest
    reads.now += 0.6
    reader()
    assert reads.count == 5  # a second on: read again


def test_health_shows_the_backlog_and_a_push_is_accepted_however_far_behind(client: httpx.Client, clean_db):  # type: ignore[no-untyped-def]
    health = client.get("/health")
    assert health.status_code == 200
    assert health.json() == {"status": "ok", "database": "ok", "queued": 0, "oldest_queued_at": None,
                             "oldest_queued_age_s": None}

    [oldest] = _push(1, prefix="old")
    _backdate(oldest, 3600)  # the assessment an hour behind
    for round_ in range(3):
        batch = [{"question": f"Pushed {round_}-{i}?", "answer": "Yes.", "trace_id": f"p-{round_}-{i}",
                  "contexts": [{"text": "A passage."}]} for i in range(50)]
        assert client.post("/runs", json=batch).status_code == 202
    body = client.get("/health").json()
    assert body["queued"] == 151
    assert 3600 <= body["oldest_queued_age_s"] < 3660
    assert body["oldest_queued_at"] is not None
