"""The confidence-based cache (issue 30, seed 003's future work) on the real store: a question
asked again of an unchanged collection gets its stored run back when that run was HIGH and
approved, or auto-accepted; an ingest or a removal in the collection ends it."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text

from services.answering import pipeline
from services.answering.runs import Event, Run
from services.corpus.ingest import ingest_paths
from services.corpus.stats import delete_document
from tests.services.test_pipeline import DOCS, ScriptedBackend

QUESTION = "What does SRVO-062 mean?"


@pytest.fixture()
def corpus(clean_db, tmp_path: Path) -> Path:
    for name, body in DOCS.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    ingest_paths([tmp_path])
    return tmp_path


def _ask(**kwargs) -> tuple[Run, list[Event]]:  # type: ignore[no-untyped-def]
    events: list[Event] = []
    run = pipeline.run(QUESTION, "balanced", backend=ScriptedBackend((0.9,)), on_event=events.append,
                       use_cache=True, **kwargs)
    return run, events


def _set_state(engine, run_id: int, status: str, level: str | None = None) -> None:  # type: ignore[no-untyped-def]
    # The scripted judge cannot be made to auto-accept; the state under test is set directly.
    with engine.begin() as conn:
        conn.execute(text("UPDATE runs SET status = :status, final_level = coalesce(:level, final_level) "
                          "WHERE id = :id"), {"status": status, "level": level, "id": run_id})


def _run_count(engine) -> int:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM runs")).scalar_one())


def test_an_auto_accepted_run_answers_the_repeated_question_and_says_so(corpus, engine):
    first, _ = _ask()
    _set_state(engine, first.run_id, "auto_accepted")
    again, events = _ask()
    assert again.run_id == first.run_id and again.final_answer == first.final_answer
    (hit,) = [e for e in events if e.event_type == "cache_hit"]
    assert hit.data["run_id"] == first.run_id and "Answered from the cache" in hit.message
    assert [e.event_type for e in events] == ["cache_hit"]  # nothing retrieved, nothing judged
    assert _run_count(engine) == 1  # and nothing stored again

    fresh = pipeline.run(QUESTION, "balanced", backend=ScriptedBackend((0.9,)))  # the cache is asked for, not assumed
    assert fresh.run_id != first.run_id
    other_loop, events = _ask(options={"max_refinement_attempts": 0})  # other thresholds: the loop runs
    assert other_loop.run_id not in (first.run_id, fresh.run_id) and not [e for e in events if e.event_type == "cache_hit"]


def test_approved_runs_are_returned_only_when_they_were_high(corpus, engine):
    first, _ = _ask()
    _set_state(engine, first.run_id, "approved", "MEDIUM")
    second, events = _ask()
    assert second.run_id != first.run_id and not [e for e in events if e.event_type == "cache_hit"]
    _set_state(engine, second.run_id, "approved", "HIGH")
    _set_state(engine, first.run_id, "pending")
    third, events = _ask()
    assert third.run_id == second.run_id and [e for e in events if e.event_type == "cache_hit"]


def test_an_ingest_into_the_collection_ends_the_cache_and_one_elsewhere_does_not(corpus, engine, tmp_path_factory):
    first, _ = _ask()
    _set_state(engine, first.run_id, "auto_accepted")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / "vendor.md").write_text("# Vendor\nThe vendor manual covers SRVO alarms.\n", encoding="utf-8")
    ingest_paths([elsewhere], collection="vendor")
    assert _ask()[0].run_id == first.run_id  # another collection changed, not this one
    ingest_paths([corpus])  # the same files again: nothing changes, the cache stands
    assert _ask()[0].run_id == first.run_id

    (corpus / "battery.md").write_text("# Battery\nThe KR-P-0361 pack holds 4 D cells.\n", encoding="utf-8")
    ingest_paths([corpus])
    after_ingest, events = _ask()
    assert after_ingest.run_id != first.run_id and not [e for e in events if e.event_type == "cache_hit"]
    assert after_ingest.config["collection_mark"] != first.config["collection_mark"]


def test_removing_a_document_ends_the_cache(corpus, engine):
    first, _ = _ask()
    _set_state(engine, first.run_id, "auto_accepted")
    delete_document("dsz.md")
    again, events = _ask()
    assert again.run_id != first.run_id and not [e for e in events if e.event_type == "cache_hit"]
