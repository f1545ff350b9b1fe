"""Assessing answers the workbench did not produce, on the real store and model: chunks of the
corpus score as the search scores them, a record's own scores are used, missing ones are
computed (or named as not computable), and the pipeline's judges, blend and status rule apply."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from services.answering import pipeline
from services.domain import RunStatus
from services.intake.assess import assess_chunks, assess_record, imported_run
from services.intake.assessment import ASSESSED_REASON
from services.intake.context_scores import EXTERNAL_MODE
from services.intake.schema import ExternalRun
from services.retrieval import embedding
from services.retrieval.search import default_params, search
from services.scoring.confidence import SINGLE_LEG_AGREEMENT
from services.scoring.profiles import ScoringProfile
from services.scoring.weights import COMPONENTS, DEFAULT_PROFILE, WeightsProfile
from services.store import transaction
from tests.services.test_pipeline import DOCS, ScriptedBackend

DEFAULT = ScoringProfile(DEFAULT_PROFILE, None)
# More documents than k, so that some hits come from one leg only and the legs' ranks differ.
MORE_DOCS = {
    f"alarm-{n}.md": f"# SRVO-{n:03d} alarm\nSRVO-{n:03d} {topic}. Check the {part} and reset the controller."
    for n, (topic, part) in enumerate([
        ("is a collision detection alarm on the robot arm", "payload setting"),
        ("reports an overheated servo motor", "fan and the motor cable"),
        ("means the brake circuit is open", "brake fuse"),
        ("signals a pulsecoder communication error", "pulsecoder cable"),
        ("warns that the battery in the controller is low", "backup battery"),
        ("indicates an overcurrent in the amplifier", "amplifier and motor insulation"),
        ("is raised when the deadman switch is released", "teach pendant"),
        ("flags a position deviation beyond the limit", "mechanical stops"),
        ("shows the fence circuit opened in automatic mode", "safety fence wiring"),
        ("means grease must be replaced soon", "reducer grease schedule"),
    ], start=50)
}
QUESTIONS = ("What does SRVO-062 mean and which battery do I replace?", "How often is the J2 reducer grease replaced?",
             "What should I check after a collision detection alarm?")


@pytest.fixture()
def corpus(clean_db, tmp_path: Path) -> Path:
    from services.corpus.ingest import ingest_paths

    for name, body in {**DOCS, **MORE_DOCS}.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    ingest_paths([tmp_path])
    return tmp_path


def record(contexts: Sequence[dict], *, question: str = QUESTIONS[0], answer: str = "Replace the battery pack [1].",
           trace_id: str | None = None) -> ExternalRun:
    return ExternalRun.model_validate({"question": question, "answer": answer, "contexts": list(contexts),
                                       "trace_id": trace_id})


def assess(run: ExternalRun, **options):  # type: ignore[no-untyped-def]
    options.setdefault("backend", ScriptedBackend((0.9,)))
    options.setdefault("profile", DEFAULT)
    with transaction() as session:
        return assess_record(run, session=session, **options)


# --- chunks of the corpus: the search's numbers ------------------------------------------------

@pytest.mark.parametrize("question", QUESTIONS)
def test_assessing_a_runs_chunk_ids_gives_the_breakdown_the_pipeline_computed(corpus, question: str):
    run = pipeline.run(question, "minimal", DEFAULT_PROFILE, backend=ScriptedBackend())
    best = run.best()
    assert best is not None and len(best.hits) == 8
    assert any(h.bm25_rank is None for h in best.hits) or any(h.dense_rank != h.bm25_rank for h in best.hits)
    ids = [h.chunk_id for h in best.hits]

    assessment = assess_chunks(question, ids[::-1], judges=False, profile=DEFAULT, backend=ScriptedBackend())
    assert np.allclose(assessment.iteration.components, best.components, rtol=0, atol=1e-9)
    assert dict(zip(COMPONENTS, best.components)) == pytest.approx(assessment.breakdown.components, abs=1e-9)
    assert assessment.iteration.retrieval_confidence == pytest.approx(best.retrieval_confidence, abs=1e-9)
    assert assessment.iteration.raw_metrics["relevance"] == best.raw_metrics["relevance"]
    # the same hits, in the search's order (not the order given), with every leg's score and rank
    for mine, theirs in zip(assessment.iteration.hits, best.hits, strict=True):
        assert (mine.chunk_id, mine.rank, mine.bm25_rank, mine.dense_rank) == (theirs.chunk_id, theirs.rank,
                                                                             theirs.bm25_rank, theirs.dense_rank)
        for name in ("fused_score", "bm25_score", "dense_similarity", "matched_idf_share"):
            assert getattr(mine, name) == pytest.approx(getattr(theirs, name), abs=1e-9), name


def test_assess_chunks_judges_a_given_answer_and_rejects_unknown_chunks(corpus):
    result = search(QUESTIONS[1], default_params(k=3))
    backend = ScriptedBackend((0.9,))
    judged = assess_chunks(QUESTIONS[1], [h.chunk_id for h in result.hits], answer="Every 20,000 hours.",
                           backend=backend, profile=DEFAULT)
    it = judged.iteration
    assert it.reflection is not None and it.reflection.reflection_score == 0.9 and it.grade is not None
    assert it.crag is not None and judged.status in (RunStatus.PENDING, RunStatus.AUTO_ACCEPTED)
    assert set(it.signals) >= {"retrieval", "reflection", "grade"}

    from services.errors import InputError

    with pytest.raises(InputError, match="no chunk 999999"):
        assess_chunks(QUESTIONS[1], [result.hits[0].chunk_id, 999999], judges=False, profile=DEFAULT)


# --- records: given scores, computed scores, and what cannot be computed ----------------------

def test_a_records_own_retriever_scores_are_used(corpus):
    contexts = [{"text": "SRVO-062 means the pulsecoder battery is low.", "document_id": "elsewhere-1", "rank": 2,
                 "score": 0.031, "bm25_score": 7.5, "dense_similarity": 0.62},
                {"text": "Replace the battery pack KR-P-0361.", "document_id": "elsewhere-2", "rank": 1,
                 "score": 0.033, "bm25_score": 9.0, "dense_similarity": 0.71}]
    assessment = assess(record(contexts), judges=False)
    hits = assessment.iteration.hits
    assert [h.external_id for h in hits] == ["elsewhere-2", "elsewhere-1"]  # by the record's rank
    assert [(h.dense_similarity, h.bm25_score, h.fused_score) for h in hits] == [(0.71, 9.0, 0.033), (0.62, 7.5, 0.031)]
    assert all(h.matched_idf_share is None and h.bm25_rank is None and h.chunk_id < 0 for h in hits)
    assert assessment.scores["dense_similarity"] == "given by the record"
    assert assessment.iteration.retrieval.mode == EXTERNAL_MODE
    # no leg ranks over the source's index: the single-leg neutral value, and said so
    assert assessment.breakdown.components["bm25_dense_agreement"] == SINGLE_LEG_AGREEMENT
    assert "bm25_dense_agreement" in assessment.not_computed and "bm25" in assessment.not_computed
    # relevance from the given similarities alone: (s - 0.2) / 0.5, clipped to [0, 1]
    assert assessment.iteration.raw_metrics["relevance"] == [1.0, pytest.approx((0.62 - 0.2) / 0.5, abs=1e-6)]


def test_contexts_without_scores_get_dense_similarity_and_bm25_where_the_document_is_known(corpus, settings):
    question = QUESTIONS[0]
    stored = next(h for h in search(question, default_params(k=10)).hits if h.external_id == "srvo-062.md")
    contexts = [{"text": stored.text, "document_id": "srvo-062.md"},  # a document the corpus holds
                {"text": "Batteries for the controller are kept in the spare parts room.", "document_id": "wiki/7"}]
    assessment = assess(record(contexts), judges=False)
    known, unknown = assessment.iteration.hits
    # the stored chunk's own BM25 score and idf share: the search's numbers, from the corpus's statistics
    assert known.bm25_score == pytest.approx(stored.bm25_score, abs=1e-9)
    assert known.matched_idf_share == pytest.approx(stored.matched_idf_share, abs=1e-9)
    assert known.dense_similarity == pytest.approx(stored.dense_similarity, abs=1e-5)
    assert (known.document_id, known.title) == (stored.document_id, stored.title)
    assert unknown.matched_idf_share is None and unknown.bm25_score is None and unknown.document_id < 0
    vectors = embedding.encode(settings.embedding_model, [question, contexts[1]["text"]])
    assert unknown.dense_similarity == pytest.approx(float(vectors[0] @ vectors[1]), abs=1e-5)
    assert assessment.scores["dense_similarity"].startswith("computed with")
    assert "1 of 2 contexts" in assessment.scores["matched_idf_share"]
    assert "bm25" not in assessment.not_computed and "bm25_dense_agreement" in assessment.not_computed

    nothing_known = assess(record([contexts[1]]), judges=False)
    assert "no context's document_id names a document" in nothing_known.not_computed["bm25"]
    anonymous = assess(record([{"text": "a passage"}, {"text": "another"}]), judges=False)
    assert "2 of 2 contexts name no document_id or source" in anonymous.not_computed["low_diversity"]
    assert [h.external_id for h in anonymous.iteration.hits] == ["context 1", "context 2"]


def test_with_judges_off_nothing_judges_the_answer(corpus):
    backend = ScriptedBackend((0.95,))
    assessment = assess(record([{"text": "SRVO-062: replace the battery pack.", "dense_similarity": 0.9}]),
                        judges=False, backend=backend)
    it = assessment.iteration
    assert (it.crag, it.reflection, it.grade, it.gaps, it.llm_calls) == (None, None, None, (), ())
    assert set(it.signals) == {"retrieval", "heuristic", "heuristic_value"}  # the minimal preset's blend
    assert assessment.status == RunStatus.PENDING and backend.reflect_calls == 0
    assert not assessment.config.enable_self_reflection and not assessment.config.enable_crag_evaluation


def test_the_pipelines_status_rule_decides_whether_an_assessed_run_skips_review(corpus):
    lenient = ScoringProfile(WeightsProfile(name="lenient", high=0.5, medium=0.3, low=0.1), None)
    contexts = [{"text": f"SRVO-062 means the pulsecoder backup battery is low; replace battery pack {n}.",
                 "document_id": "srvo-062.md", "rerank_score": 6.0} for n in range(3)]
    # An answer the judge finds supported beyond its accept_at (every word it adds is in context 1).
    supported = "SRVO-062 means the pulsecoder backup battery is low; replace the battery pack. [1]"
    approved = assess(record(contexts, answer=supported), backend=ScriptedBackend((0.95,)), profile=lenient)
    assert approved.iteration.verdict is not None and approved.iteration.verdict.auto_accept
    assert approved.iteration.crag is not None and approved.iteration.crag.verdict == "CORRECT"
    assert approved.final_level == "HIGH" and approved.status == RunStatus.AUTO_ACCEPTED
    doubted = assess(record(contexts, answer=supported), backend=ScriptedBackend((0.5,)), profile=lenient)  # reflection not approved
    assert doubted.status == RunStatus.PENDING
    empty = assess(record(contexts, answer=""), backend=ScriptedBackend((0.95,)), profile=lenient)
    assert empty.status == RunStatus.PENDING and empty.iteration.reflection is None
    # A reflection approving an answer the judge finds invented does not skip review.
    invented = assess(record(contexts, answer="Replace the SRVO-099 servo amplifier [1]."),
                      backend=ScriptedBackend((0.95,)), profile=lenient)
    assert invented.iteration.verdict is not None and not invented.iteration.verdict.auto_accept
    assert "'SRVO-099' appears in no context" in invented.iteration.verdict.reason
    assert invented.status == RunStatus.PENDING


def test_an_assessed_record_becomes_a_run_like_any_other(corpus, settings):
    from services.answering.llm.backends import backend_for

    offline = backend_for(settings)  # the real judges: their calls are logged on the iteration
    run_record = record([{"text": "SRVO-062 means the backup battery is low.", "document_id": "srvo-062.md"}],
                        trace_id="prod-42")
    assessment = assess(run_record, backend=offline)
    run = imported_run(assessment, run_record, source="api", collection="default", intake_id=7)
    assert (run.source, run.preset, run.final_answer, run.route) == ("api", "external", run_record.answer, ("ACCEPT_BEST",))
    verdict = run.iterations[0].verdict
    assert run.iterations[0].decision_reason == ASSESSED_REASON and verdict is not None
    # The run says why, in the judge's words: 'pack' is in no context of this record.
    assert run.outcome_note == f"{ASSESSED_REASON}; judge: {verdict.label}, {verdict.reason}"
    assert "'pack' appears in no context" in verdict.reason and run.p_supported == verdict.p_supported
    assert run.config["assessment"]["trace_id"] == "prod-42" and run.config["assessment"]["intake_id"] == 7
    assert run.config["assessment"]["not_computed"] == assessment.not_computed
    assert run.config["reflection_min_score"] == assessment.config.reflection_min_score  # what tuning reads
    assert [e.event_type for e in run.events][0] == "assessment_start"
    # The offline backend's reflection is the judge's verdict read as one: no reflect() call of its own.
    assert {c.operation for c in run.iterations[0].llm_calls} == {"grade", "identify_gaps"}

    bare = record([], answer="It is probably the battery.")
    no_contexts = assess(bare, backend=offline)
    assert imported_run(no_contexts, bare, source="import", collection="default").outcome_note.startswith(
        "the record came with no contexts")
    assert no_contexts.status == RunStatus.PENDING and no_contexts.iteration.retrieval_confidence == 0.0

