"""The live demo (issue 17): the demo questions through the real pipeline with each preset,
answer-key verdicts stored as the answer key's and never a person's, and one removal that
leaves no run or verdict behind (the handbook's documents stay)."""

from __future__ import annotations

import pytest
import torch
from sqlalchemy import text

from services.answering import pipeline
from services.demo import DEMO_SOURCE, KEYED_PRESETS, DemoProgress, answer_key, demo_status, key_verdict, load_demo, remove_demo
from services.demo.answer_key import DemoQuestion
from services.demo.runs import ensure_demo_corpus
from services.errors import InputError
from services.review.queue import ANSWER_KEY_REVIEWER, review_history, submit_review
from services.store import transaction

ANSWERABLE = DemoQuestion("q99", "What does SRVO-062 mean?", frozenset({"srvo-062-encoder-backup-lost.md"}))
UNANSWERABLE = DemoQuestion("q98", "What is the torque of the KX-999 arm?", frozenset())


# --- the answer key (pure) ----------------------------------------------------------------------

def test_the_answer_key_reads_every_demo_question_with_its_relevant_documents() -> None:
    questions = {q.query_id: q for q in answer_key()}
    assert len(questions) == 25
    assert questions["q01"].relevant == {"srvo-062-encoder-backup-lost.md", "mastering-multi-axis-fixture.md"}
    assert [q for q in questions if not questions[q].answerable] == ["q21", "q22", "q23", "q24", "q25"]


def test_an_answer_citing_a_relevant_document_is_approved() -> None:
    verdict = key_verdict(ANSWERABLE, answer="The encoder lost its count [1].",
                          cited=["faq.md", "srvo-062-encoder-backup-lost.md"])
    assert (verdict.action, verdict.flag_reason) == ("approve", None)
    assert "q99" in verdict.comment and "srvo-062-encoder-backup-lost.md" in verdict.comment


def test_an_answer_citing_only_other_documents_is_flagged_for_its_sources() -> None:
    verdict = key_verdict(ANSWERABLE, answer="Something else [1].", cited=["faq.md"])
    assert (verdict.action, verdict.flag_reason) == ("flag", "wrong sources retrieved")
    assert "faq.md" in verdict.comment and "srvo-062-encoder-backup-lost.md" in verdict.comment


def test_no_answer_to_an_answerable_question_is_flagged_as_incomplete() -> None:
    assert key_verdict(ANSWERABLE, answer="  ", cited=[]).flag_reason == "incomplete answer"


def test_an_unanswerable_question_is_approved_only_when_nothing_was_answered() -> None:
    assert key_verdict(UNANSWERABLE, answer="", cited=[]).action == "approve"
    answered = key_verdict(UNANSWERABLE, answer="It is 40 Nm [1].", cited=["faq.md"])
    assert (answered.action, answered.flag_reason) == ("flag", "question out of scope")


# --- loading and removing (real store, model and pipeline) ------------------------------------------

def _demo_reviewers() -> set[str]:
    with transaction() as session:
        return set(session.execute(text(
            "SELECT DISTINCT h.reviewer FROM review_history h JOIN runs r ON r.id = h.run_id "
            "WHERE r.source = :s"), {"s": DEMO_SOURCE}).scalars())


def test_demo_runs_come_from_the_pipeline_and_only_keyed_presets_get_answer_key_verdicts(clean_db) -> None:
    questions = [q for q in answer_key() if q.query_id in ("q01", "q21")]
    seen: list[DemoProgress] = []
    torch_threads: set[int] = set()
    threads_before = torch.get_num_threads()

    def on_progress(progress: DemoProgress) -> None:
        seen.append(progress)
        torch_threads.add(torch.get_num_threads())

    summary = load_demo(presets=("minimal", "balanced"), questions=questions, on_progress=on_progress)
    # torch on one thread while the demo loads (services/demo/_cores.py), as it was afterwards
    assert torch_threads == {1} and torch.get_num_threads() == threads_before
    assert summary.corpus is not None and summary.corpus.ingested == 46  # a fresh store gets the handbook
    assert summary.runs == 4 and summary.by_preset == {"minimal": 2, "balanced": 2}
    # the bar moves through the store's start, the handbook's 46 documents, then every run
    assert [p.phase for p in seen][:2] == ["start", "start"] and seen[1].done == seen[1].total == 1
    handbook = [p for p in seen if p.phase == "handbook"]
    assert handbook and handbook[-1].done == handbook[-1].total == 46
    runs = [(p.done, p.total, p.label) for p in seen if p.phase == "runs"]
    assert [r[:2] for r in runs] == [(1, 4), (2, 4), (3, 4), (4, 4)] and runs[0][2] == "minimal: q01"
    assert set(summary.phase_seconds) == {"start", "handbook", "runs"}
    assert sum(summary.phase_seconds.values()) <= summary.seconds
    with transaction() as session:
        rows = session.execute(text("SELECT id, preset, status, reviewer, source FROM runs ORDER BY id")).all()
    assert {r.source for r in rows} == {DEMO_SOURCE}
    keyed = [r for r in rows if r.preset in KEYED_PRESETS]
    assert len(keyed) == 2 and all(r.reviewer == ANSWER_KEY_REVIEWER for r in keyed)
    assert all(r.status in ("approved", "flagged") for r in keyed)
    assert all(r.reviewer is None and r.status in ("pending", "auto_accepted") for r in rows if r.preset == "balanced")
    # the unanswerable q21 answered by the minimal preset (no judges, always an answer) is flagged
    minimal_q21 = rows[1]  # stored in preset, then question order
    (verdict,) = review_history(minimal_q21.id)
    assert (verdict.action, verdict.flag_reason) == ("flag", "question out of scope")
    assert verdict.comment.startswith("answer key, demo question q21")
    assert sum(summary.answer_key_verdicts.values()) == 2 and demo_status().answer_key_verdicts == 2


def test_loading_again_replaces_the_demo_runs_and_removing_leaves_no_run_or_verdict(clean_db) -> None:
    questions = [q for q in answer_key() if q.query_id == "q02"]
    load_demo(presets=("minimal",), questions=questions)
    again = load_demo(presets=("minimal",), questions=questions)
    assert again.replaced_runs == 1 and again.corpus is None  # the handbook was there already
    assert demo_status().demo_runs == 1
    removed = remove_demo()
    assert (removed.runs, removed.reviews) == (1, 1)
    status = demo_status()
    assert status.store_empty and status.answer_key_verdicts == 0
    with transaction() as session:
        assert session.execute(text("SELECT count(*) FROM review_history")).scalar() == 0
        assert session.execute(text(  # the handbook stays (clean_db keeps the session's SQuAD collection too)
            "SELECT count(*) FROM documents d JOIN collections c ON c.id = d.collection_id "
            "WHERE c.name = 'default'")).scalar() == 46


def test_removing_the_demo_keeps_everyone_elses_runs(clean_db) -> None:
    load_demo(presets=("minimal",), questions=answer_key()[:1])
    own = pipeline.run("What does SRVO-063 mean?", "minimal", source="ask")
    assert own.run_id is not None
    submit_review(own.run_id, expected_version=0, action="approve", reviewer="ana")
    remove_demo()
    status = demo_status()
    assert (status.runs, status.demo_runs) == (1, 0)
    assert [r.reviewer for r in review_history(own.run_id)] == ["ana"]
    assert _demo_reviewers() == set()


def test_a_person_cannot_review_under_the_answer_keys_name(clean_db) -> None:
    load_demo(presets=("balanced",), questions=answer_key()[:1])
    with transaction() as session:
        run_id = session.execute(text("SELECT id FROM runs")).scalar_one()
    with pytest.raises(InputError, match="reserved for the demo's answer-key verdicts"):
        submit_review(run_id, expected_version=0, action="approve", reviewer=" Demo Answer Key ")


def test_the_demo_refuses_a_corpus_that_is_not_the_handbook(clean_db, tmp_path) -> None:
    from services.corpus.ingest import ingest_paths

    (tmp_path / "mine.md").write_text("# Mine\nOur own document about pumps.", encoding="utf-8")
    ingest_paths([tmp_path])
    with pytest.raises(InputError, match="none of the demo handbook's"):
        ensure_demo_corpus()
    assert demo_status().runs == 0


def test_an_unknown_preset_is_refused_before_anything_runs(clean_db) -> None:
    with pytest.raises(InputError, match="unknown preset"):
        load_demo(presets=("fast",))
    assert demo_status().runs == 0
