"""Stored runs: typed in memory, JSON only in the store and in to_dict, old rows still load."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from services.answering.llm.base import Citation, Grade, LLMCall, Reflection
from services.answering.runs import Event, Iteration, Run, load_run, save_run
from services.domain import STATUSES, Hit, RetrievalResult, RouterAction, RunStatus, plain
from services.errors import InputError
from services.scoring.crag import CragVerdict, KnowledgeStrip, RetrievalVerdict
from services.store import transaction
from tests._statements import iteration_inserts

T0 = datetime(2025, 5, 1, 9, 30, tzinfo=UTC)
HIT = Hit(chunk_id=41, document_id=7, external_id="pump-guide.md", title="Pump maintenance",
          text="The centrifugal pump needs its seals inspected every month.", rank=1, fused_score=0.0328,
          bm25_score=7.41, bm25_rank=1, dense_similarity=0.71, dense_rank=2, matched_idf_share=0.82)
CITATION = Citation(marker=1, chunk_id=41, document_id=7, external_id="pump-guide.md",
                    quote="seals inspected every month")


def _iteration(ordinal: int, decision: str) -> Iteration:
    return Iteration(
        ordinal=ordinal, query_used="How often are the pump seals inspected?", sub_queries=("seals?",),
        retrieval=RetrievalResult("How often are the pump seals inspected?", "hybrid", (HIT,),
                                  query_entities=("pump",), depth=50, latency_ms=21.5, params={"k": 8}),
        components=(0.9, 0.6, 0.67, 0.8, 0.95, 0.0, 0.5), raw_metrics={"hits": 1, "top_score": 0.9},
        retrieval_confidence=0.74, confidence=0.61 + ordinal / 10, level="MEDIUM",
        crag=CragVerdict(RetrievalVerdict.CORRECT, 0.81, 0.81, {"top_score": 0.9}, "relevant", "refine_and_use",
                         (KnowledgeStrip(41, "seals inspected every month", 0.9),), kept_chunk_ids=(41,)),
        answer="Every month [1].", citations=(CITATION,),
        reflection=Reflection(True, False, 0.85, ("1",), "every sentence supported", False, (0.9,)),
        grade=Grade(4, ("interval",), ("seal inspection interval",)), gaps=("interval",),
        decision=decision, decision_reason="because", signals={"retrieval": 0.74, "reflection": 0.85},
        latency_ms={"retrieval": 21.5}, errors=({"stage": "gaps", "kind": "timeout", "message": "slow"},),
        llm_calls=(LLMCall("offline", "extractive-mmr-v1", "generate", "offline-1", 0.0, latency_ms=3.2),),
    )


def make_run(**changes: object) -> Run:
    fields: dict[str, object] = dict(
        query="How often are the pump seals inspected?", preset="balanced", collection="default", source="ask",
        backend="offline", model="extractive-mmr-v1", status="pending", final_answer="Every month [1].",
        citations=(CITATION,), final_confidence=0.81, final_level="MEDIUM", retrieval_confidence=0.74,
        components=(0.9, 0.6, 0.67, 0.8, 0.95, 0.0, 0.5), reflection_score=0.85, grade=4, crag_verdict="CORRECT",
        signals={"retrieval": 0.74, "reflection": 0.85}, route=("REFINE_QUERY", "COMPLETE"), best_iteration=2,
        weights_profile="default v1", weights_profile_id=None, config={"preset": "balanced"}, outcome_note="",
        latency_ms=88.0, iterations=(_iteration(1, "REFINE_QUERY"), _iteration(2, "COMPLETE")),
        events=(Event(1, "adaptive_refinement_decision", "COMPLETE: done", T0, 80.0, {"decision": "COMPLETE"}),),
    )
    fields.update(changes)
    return Run(**fields)  # type: ignore[arg-type]


def test_a_run_comes_back_from_the_store_as_it_went_in(clean_db):
    run = make_run()
    with transaction() as session:
        run_id = save_run(run, session=session)
    stored = load_run(run_id)
    assert dataclasses.replace(stored, run_id=None, created_at=None) == run
    best = stored.best()
    assert best is not None and best.ordinal == 2 and best.hits == (HIT,)
    assert best.crag is not None and best.crag.verdict is RetrievalVerdict.CORRECT
    assert best.grade is not None and best.grade.label == "GOOD"
    assert stored.status is RunStatus.PENDING and stored.route == (RouterAction.REFINE_QUERY, RouterAction.COMPLETE)


def test_a_runs_iterations_go_in_one_statement(clean_db):
    """As intake's store does (services.intake.store_runs): one INSERT of a run's iterations, so the
    statement-level triggers on run_iterations (the Document trends rollup, the document index)
    take its documents in their ORDER BY once. One INSERT a row let two transactions citing the
    same documents take the rollup's rows in different orders and deadlock."""
    with transaction() as session:
        with iteration_inserts(session) as inserts:
            run_id = save_run(make_run(), session=session)
        stored = session.execute(text("SELECT count(*) FROM run_iterations WHERE run_id = :id"), {"id": run_id})
        assert stored.scalar_one() == 2
    assert inserts == [1]


def test_to_dict_is_the_stored_json_shape():
    data = json.loads(json.dumps(make_run().to_dict()))
    assert data["status"] == "pending" and data["crag_verdict"] == "CORRECT"
    assert data["route"] == ["REFINE_QUERY", "COMPLETE"]
    assert data["citations"] == [{"marker": 1, "chunk_id": 41, "document_id": 7, "external_id": "pump-guide.md",
                                  "quote": "seals inspected every month"}]
    iteration = data["iterations"][1]
    assert iteration["decision"] == "COMPLETE"
    assert iteration["retrieval"]["hits"][0] == dataclasses.asdict(HIT)
    assert iteration["retrieval"]["query_entities"] == ["pump"] and iteration["retrieval"]["params"] == {"k": 8}
    assert iteration["crag"]["verdict"] == "CORRECT" and iteration["crag"]["strips"][0]["chunk_id"] == 41
    assert iteration["grade"] == {"score": 4, "gaps": ["interval"], "refinements": ["seal inspection interval"],
                                  "label": "GOOD"}
    assert iteration["reflection"]["reflection_score"] == 0.85
    assert iteration["llm_calls"][0]["operation"] == "generate"
    plain = make_run().to_dict()  # plain strings, not enum members, for any JSON encoder
    assert type(plain["status"]) is str and type(plain["iterations"][0]["decision"]) is str


def test_rows_stored_before_newer_fields_still_load(clean_db):
    with transaction() as session:
        run_id = save_run(make_run(), session=session)
        # An older shape: no kept strips or action outcome, hits without the idf share, no grade label.
        session.execute(text("""
            UPDATE run_iterations SET
              crag = crag - 'kept_chunk_ids' - 'action_outcome',
              retrieval = jsonb_set(retrieval - 'depth', '{hits,0}', (retrieval #> '{hits,0}') - 'matched_idf_share'),
              grade = grade - 'label',
              reflection = reflection - 'sentence_support'
            WHERE run_id = :run_id"""), {"run_id": run_id})
    best = load_run(run_id).best()
    assert best is not None and best.crag is not None
    assert best.crag.kept_chunk_ids == () and best.crag.action_outcome == ""
    assert best.retrieval.depth == 0 and best.hits[0].matched_idf_share is None and best.hits[0].bm25_rank == 1
    assert best.grade == Grade(4, ("interval",), ("seal inspection interval",))
    assert best.reflection is not None and best.reflection.sentence_support == ()


def test_statuses_decisions_and_verdicts_are_their_stored_strings_and_checked():
    run = make_run(status="auto_accepted", crag_verdict="AMBIGUOUS")
    assert run.status is RunStatus.AUTO_ACCEPTED and run.status == "auto_accepted"
    assert run.crag_verdict is RetrievalVerdict.AMBIGUOUS and run.iterations[0].decision is RouterAction.REFINE_QUERY
    assert STATUSES == ("auto_accepted", "pending", "approved", "flagged", "corrected")
    with pytest.raises(InputError, match="unknown run status 'accepted'"):
        make_run(status="accepted")
    with pytest.raises(InputError, match="unknown decision 'WEB_FALLBACK'"):
        make_run(route=("WEB_FALLBACK",))
    with pytest.raises(InputError, match="unknown CRAG verdict"):
        make_run(crag_verdict="correct")


def test_best_is_the_iteration_the_answer_came_from():
    run = make_run()
    best = run.best()
    assert best is not None and best.ordinal == run.best_iteration == 2
    assert make_run(best_iteration=1).best() == run.iterations[0]
    assert make_run(iterations=()).best() is None
    assert make_run(best_iteration=5).best() is None  # never some other iteration in its place


def test_a_run_converts_as_asdict_would_without_copying_its_values():
    run = make_run()
    converted = plain(run)
    assert converted == dataclasses.asdict(run)
    params = run.iterations[0].retrieval.params
    assert converted["iterations"][0]["retrieval"]["params"] is not params  # its own containers
    assert make_run().to_dict()["iterations"][0]["retrieval"]["hits"][0] == dataclasses.asdict(HIT)
