"""What the Import runs page reads about the intake: records per status, the newest failures."""

from __future__ import annotations

import pytest

from services.errors import InputError
from services.intake.intake import accept_records, mark_assessed, mark_failed
from services.intake.schema import ExternalRun
from services.intake.status import IntakeCounts, intake_counts, recent_failures
from services.store import transaction
from tests.services.test_documents import at, make_run, store


def _records(n: int) -> list[ExternalRun]:
    return [ExternalRun(question=f"q{i}", answer="a", trace_id=f"t-{i}") for i in range(n)]


def test_counts_and_failures_follow_the_intake(clean_db):  # type: ignore[no-untyped-def]
    with transaction() as session:
        assert intake_counts(session=session) == IntakeCounts(0, 0, 0)
        assert recent_failures(session=session) == []
    run_id = store(make_run("q", hits=("a",), confidence=0.5, level="MEDIUM", status="pending"), at(6))
    with transaction() as session:
        ids = [a.intake_id for a in accept_records(_records(5), source="import", session=session)]
        mark_assessed(ids[0], run_id=run_id, session=session)
        mark_failed(ids[1], "the stored record no longer validates", session=session)
    with transaction() as session:
        mark_failed(ids[2], "second failure", session=session)  # a later transaction: a later time
    with transaction() as session:
        assert intake_counts(session=session) == IntakeCounts(queued=2, assessed=1, failed=2)
        failures = recent_failures(session=session)
        assert [(f.intake_id, f.trace_id, f.source, f.error) for f in failures] == [
            (ids[2], "t-2", "import", "second failure"), (ids[1], "t-1", "import", "the stored record no longer validates")]
        assert [f.intake_id for f in recent_failures(limit=1, session=session)] == [ids[2]]
        with pytest.raises(InputError):
            recent_failures(limit=0, session=session)
