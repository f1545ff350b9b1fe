"""Draining the intake queue on the real store: each record becomes a stored run with its trace
id and metadata in one transaction, a failing record is marked failed and the rest go on,
judges follow each record's choice, verdicts flow back, and exports carry the trace id."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from services.answering.llm.base import Reflection
from services.answering.runs import load_run
from services.domain import Hit
from services.intake.assess import process_queue
from services.intake.intake import accept_records, intake_status
from services.intake.schema import ExternalRun
from services.intake.verdicts import reviewed_since
from services.review.export import ExportFilters, export_records
from services.review.export_formats import FORMATS, export_bytes, read_export
from services.review.queue import submit_review
from services.store import transaction
from tests.services.test_pipeline import ScriptedBackend

BROKEN = "Which question breaks the judge?"


class BrokenOnOneQuestion(ScriptedBackend):
    """Reflection raises a plain bug (not an LLMError the pipeline would record and survive)."""

    def reflect(self, query: str, answer: str, chunks: Sequence[Hit]) -> Reflection:
        if query == BROKEN:
            raise RuntimeError("the judge fell over")
        return super().reflect(query, answer, chunks)


def record(question: str, trace_id: str | None, **extra) -> ExternalRun:  # type: ignore[no-untyped-def]
    return ExternalRun.model_validate({
        "question": question, "answer": f"The answer to: {question}", "trace_id": trace_id,
        "contexts": [{"text": f"A passage about {question}", "document_id": "doc-1", "dense_similarity": 0.6}],
        "metadata": {"app": "support-bot", "model": "gpt-x", "extra": {"tenant": 7}}, **extra})


def push(*records: ExternalRun, source: str = "api", judges: bool = True) -> list[int]:
    with transaction() as session:
        return [a.intake_id for a in accept_records(list(records), source=source, judges=judges, session=session)]


def runs_stored() -> int:
    with transaction() as session:
        return int(session.execute(text("SELECT count(*) FROM runs")).scalar_one())


def test_queued_records_become_runs_with_their_trace_ids_and_a_failure_stops_nothing(clean_db):
    ids = push(record("What does SRVO-062 mean?", "t-1"), record(BROKEN, "t-2"), record("How is grease changed?", None))
    progress: list[tuple[int, int]] = []
    summary = process_queue(backend=BrokenOnOneQuestion((0.9,)), on_progress=lambda d, t: progress.append((d, t)))
    assert (summary.assessed, summary.failed, summary.remaining) == (2, 1, 0)
    assert progress == [(1, 3), (2, 3), (3, 3)]

    with transaction() as session:
        first, broken, third = (intake_status(i, app=None, session=session) for i in ids)
    assert (first.status, broken.status, third.status) == ("assessed", "failed", "assessed")
    assert broken.error == "assessment failed: RuntimeError: the judge fell over" and broken.run_id is None
    assert runs_stored() == 2  # nothing of the failed record was written

    run = load_run(first.run_id)  # type: ignore[arg-type]
    assert (run.source, run.query, run.status, run.route) == ("api", "What does SRVO-062 mean?", "pending", ("ACCEPT_BEST",))
    assert run.reflection_score == 0.9 and run.config["assessment"]["intake_id"] == ids[0]
    assert (first.confidence, first.level) == (run.final_confidence, run.final_level)
    with transaction() as session:
        stored = session.execute(text("SELECT trace_id, external FROM runs WHERE id = :id"), {"id": run.run_id}).one()
    assert stored.trace_id == "t-1"
    assert stored.external == {"app": "support-bot", "model": "gpt-x", "extra": {"tenant": 7}}


def test_a_record_failing_after_its_run_was_written_leaves_no_run_behind(clean_db):
    [earlier] = push(record("First question", "dup"))
    assert process_queue(backend=ScriptedBackend()).assessed == 1
    with transaction() as session:  # a second intake row whose run would take the same trace id
        session.execute(text("UPDATE run_intake SET trace_id = 'dup-old' WHERE id = :id"), {"id": earlier})
    ids = push(record("Second question", "dup"), record("Third question", "t-3"))
    summary = process_queue(backend=ScriptedBackend())
    assert (summary.assessed, summary.failed) == (1, 1)
    with transaction() as session:
        clash = intake_status(ids[0], app=None, session=session)
        assert clash.status == "failed" and "runs_trace_id" in (clash.error or "")
        assert intake_status(ids[1], app=None, session=session).status == "assessed"
    assert runs_stored() == 2  # the clashing record's run was rolled back with its savepoint


def test_judges_follow_each_records_choice_and_can_be_turned_off_for_a_drain(clean_db):
    [judged] = push(record("Judge me", "j-1"))
    [unjudged] = push(record("Do not judge me", "j-2"), judges=False)
    backend = ScriptedBackend((0.9,))
    process_queue(backend=backend)
    with transaction() as session:
        on, off = (load_run(intake_status(i, app=None, session=session).run_id, session=session) for i in (judged, unjudged))  # type: ignore[arg-type]
    assert on.reflection_score == 0.9 and on.crag_verdict is not None and on.config["assessment"]["judges"] is True
    assert (off.reflection_score, off.grade, off.crag_verdict) == (None, None, None)
    assert off.config["assessment"]["judges"] is False and "heuristic" in off.signals

    [forced] = push(record("Judged unless the drain says no", "j-3"))
    process_queue(backend=backend, judges=False)
    with transaction() as session:
        assert load_run(intake_status(forced, app=None, session=session).run_id, session=session).reflection_score is None  # type: ignore[arg-type]


def test_tuning_rescores_assessed_runs_to_their_stored_confidence(clean_db):
    from services.scoring.tuning import load_run_matrix, rescore
    from services.scoring.weights import DEFAULT_PROFILE

    push(record("Judge me", "r-1"))
    push(record("Do not judge me", "r-2"), judges=False)
    push(ExternalRun.model_validate({"question": "Abstained?", "answer": "", "trace_id": "r-3",
                                     "contexts": [{"text": "A passage.", "dense_similarity": 0.5}]}))
    process_queue(backend=ScriptedBackend((0.9,)))
    matrix = load_run_matrix()
    assert len(matrix) == 3 and list(matrix.presets) == ["external"] * 3
    assert rescore(matrix, DEFAULT_PROFILE) == pytest.approx(matrix.stored_confidence, abs=1e-12)


def test_limit_stops_the_drain_and_reports_what_is_left(clean_db):
    push(*(record(f"Question {i}", f"l-{i}") for i in range(3)))
    assert process_queue(limit=2, backend=ScriptedBackend()).to_dict() == {"assessed": 2, "failed": 0, "remaining": 1}
    assert process_queue(backend=ScriptedBackend()).to_dict() == {"assessed": 1, "failed": 0, "remaining": 0}
    assert process_queue(backend=ScriptedBackend()).to_dict() == {"assessed": 0, "failed": 0, "remaining": 0}


def test_verdicts_flow_back_and_exports_carry_trace_ids_and_metadata(clean_db):
    ids = push(record("Approve me", "v-1"), record("Correct me", "v-2"), record("Leave me", "v-3"), source="import")
    process_queue(backend=ScriptedBackend())
    with transaction() as session:
        run_ids = [intake_status(i, app=None, session=session).run_id for i in ids]
    before = datetime.now(UTC) - timedelta(seconds=1)
    submit_review(run_ids[0], expected_version=0, action="approve", reviewer="ana")  # type: ignore[arg-type]
    submit_review(run_ids[1], expected_version=0, action="correct", reviewer="ben",  # type: ignore[arg-type]
                  corrected_answer="The right answer.", comment="was wrong")

    with transaction() as session:
        pulled = reviewed_since(before, app=None, settle_seconds=0, session=session)
        assert reviewed_since(datetime.now(UTC) + timedelta(minutes=1), app=None, settle_seconds=0, session=session) == []
        naive = before.replace(tzinfo=None)  # naive is UTC
        assert len(reviewed_since(naive, app="default", limit=1, settle_seconds=0, session=session)) == 1
    assert [(r.trace_id, r.verdict, r.reviewer, r.corrected_answer, r.comment, r.source) for r in pulled] == [
        ("v-1", "approved", "ana", None, None, "import"), ("v-2", "corrected", "ben", "The right answer.", "was wrong", "import")]
    assert pulled[0].reviewed_at <= pulled[1].reviewed_at and pulled[1].review_version == 1

    records = export_records(ExportFilters())
    assert [(r["trace_id"], r["source"], r["verdict"]) for r in records] == [
        ("v-1", "import", "approved"), ("v-2", "import", "corrected"), ("v-3", "import", None)]
    assert records[0]["external"] == {"app": "support-bot", "model": "gpt-x", "extra": {"tenant": 7}}
    for fmt in FORMATS:
        assert read_export(export_bytes(records, fmt), fmt) == records, fmt


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_workbenchs_own_runs_export_with_no_trace_id_or_metadata(clean_db, fmt: str):
    from tests.services.test_export import make_run, store

    push(record("Pushed", "mixed-1"))
    process_queue(backend=ScriptedBackend())
    store(make_run("Asked in the workbench"))
    records = export_records(ExportFilters())
    assert [(r["source"], r["trace_id"], r["external"]) for r in records] == [
        ("api", "mixed-1", {"app": "support-bot", "model": "gpt-x", "extra": {"tenant": 7}}), ("ask", None, None)]
    assert read_export(export_bytes(records, fmt), fmt) == records
