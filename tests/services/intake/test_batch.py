"""Assessing records in a batch, on the real store, model and judge: each record gets what it
gets alone, the batch embeds in two passes, and a record that fails fails alone."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from sqlalchemy import text

from services.answering.llm.backends import backend_for
from services.answering.llm.base import Reflection
from services.domain import Hit
from services.intake import batch
from services.intake.assess import assess_record, process_queue
from services.intake.assessment import Assessment
from services.intake.batch import assess_batch
from services.intake.intake import accept_records
from services.intake.schema import ExternalRun
from services.judging import vectors
from services.store import transaction
from tests.services.intake.test_assess import DEFAULT, corpus  # noqa: F401  (a fixture)
from tests.services.test_pipeline import ScriptedBackend

BATTERY = "SRVO-062 means the pulsecoder backup battery voltage dropped. Replace the battery pack KR-P-0361."
# Records of every shape the assessment treats differently: contexts the corpus knows (BM25 and
# titles) or not, similarities given or computed, a concise answer, a sentence, a restatement,
# an abstention, an invented part number, no contexts, judges off.
RECORDS = [
    {"question": "What does SRVO-062 mean?", "answer": "The pulsecoder backup battery voltage dropped.",
     "contexts": [{"text": BATTERY, "document_id": "srvo-062.md"},
                  {"text": "Replace the J2 reducer grease every 20,000 hours.", "document_id": "grease.md"}]},
    {"question": "Which battery pack do I replace for SRVO-062?", "answer": "KR-P-0361",
     "contexts": [{"text": BATTERY, "document_id": "wiki/1", "dense_similarity": 0.71, "rank": 1},
                  {"text": "Batteries are kept in the spare parts room.", "document_id": "wiki/2", "dense_similarity": 0.3,
                   "rank": 2}]},
    {"question": "How often is the J2 reducer grease replaced?", "answer": "Every 40,000 hours, with grease KR-9.",
     "contexts": [{"text": "Replace the J2 reducer grease every 20,000 hours or 4 years.", "document_id": "grease.md"}]},
    {"question": "What limits DSZ safe zones?", "answer": "What limits DSZ safe zones?",
     "contexts": [{"text": "DSZ dual-check safety zones limit the robot to a configured box."}]},
    {"question": "What is the robot's payload?", "answer": "I don't know.",
     "contexts": [{"text": "The robot's rated payload is 7 kg at the wrist flange."}]},
    {"question": "Which alarm warns of a low battery?", "answer": "SRVO-062", "contexts": []},
    {"question": "Where are spare batteries kept?", "answer": "In the spare parts room.",
     "contexts": [{"text": "Batteries are kept in the spare parts room. " * 3, "source": "stores.md"},
                  {"text": BATTERY, "source": "manual.md"}, {"text": "The teach pendant has a deadman switch."}]},
]
JUDGES = [True, True, True, True, True, True, False]


def _runs() -> list[ExternalRun]:
    return [ExternalRun.model_validate(r) for r in RECORDS]


def _fresh_embedder() -> None:
    """An empty sentence cache: nothing one path encoded is handed to the other."""
    vectors.cached_embedder.cache_clear()


def _facts(a: Assessment) -> tuple:  # type: ignore[type-arg]
    it = a.iteration
    return (a.status, a.final_level, it.verdict.label if it.verdict else None, it.crag.verdict if it.crag else None,
            a.scores, a.not_computed, [h.chunk_id for h in it.hits])


def test_a_batch_gives_each_record_what_it_gets_alone(corpus, settings):  # type: ignore[no-untyped-def]  # noqa: F811
    _fresh_embedder()
    alone = []
    for run, judges in zip(_runs(), JUDGES):
        with transaction() as session:
            alone.append(assess_record(run, session=session, judges=judges, backend=backend_for(settings),
                                       profile=DEFAULT))
    _fresh_embedder()
    with transaction() as session:
        together = assess_batch(_runs(), judges=JUDGES, session=session, collection="default",
                                backend=backend_for(settings), profile=DEFAULT, settings=settings)
    assert all(isinstance(a, Assessment) for a in together), together
    for one, batched in zip(alone, together):
        assert isinstance(batched, Assessment)
        # Encoding a text beside others moves a vector component by ~1e-7 (padding changes the
        # kernels' summation order), so the blend agrees to that, not to the last bit.
        assert batched.iteration.confidence == pytest.approx(one.iteration.confidence, abs=1e-6)
        assert batched.iteration.retrieval_confidence == pytest.approx(one.iteration.retrieval_confidence, abs=1e-6)
        assert _facts(batched) == _facts(one)
        if one.iteration.verdict is not None:
            assert batched.iteration.verdict.p_supported == pytest.approx(one.iteration.verdict.p_supported, abs=1e-4)  # type: ignore[union-attr]
    # the records differ from one another, so a batch that mixed them up would show it
    assert len({round(a.iteration.confidence, 6) for a in alone}) >= 5


@pytest.fixture()
def calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The texts of each call to the real model, from a fresh embedder on."""
    _fresh_embedder()
    calls: list[list[str]] = []

    def counted(call):  # type: ignore[no-untyped-def]
        def counting(name: str, texts: Sequence[str], **options):  # type: ignore[no-untyped-def]
            calls.append(list(texts))
            return call(name, texts, **options)
        return counting

    for name in ("encode", "encode_tokens"):  # texts read alone; contexts read with their sentences
        monkeypatch.setattr(vectors, name, counted(getattr(vectors, name)))
    return calls


def test_a_batch_embeds_its_records_in_two_passes(corpus, settings, calls, recorded):  # type: ignore[no-untyped-def]  # noqa: F811
    with transaction() as session:
        together = assess_batch(_runs(), judges=JUDGES, session=session, collection="default",
                                backend=backend_for(settings), profile=DEFAULT, settings=settings)
    assert all(isinstance(a, Assessment) for a in together)
    # the contexts, questions and claims, then the chunks CRAG kept not yet read; none twice
    assert len(calls) == 2, [len(c) for c in calls]
    encoded = [t for call in calls for t in call]
    assert len(encoded) == len(set(encoded))
    assert RECORDS[0]["question"] in calls[0] and BATTERY in calls[0]
    # a concise claim is read as its question (never embedded with it), a sentence as itself
    question = RECORDS[1]["question"]
    assert question in calls[0] and not any(t.startswith(question) and t != question for t in calls[0])
    assert RECORDS[2]["answer"] in calls[0]
    # a chunk CRAG kept that was not encoded for its similarity (its title travels with it there) is
    # read whole, once; its sentences come from that pass, never one by one
    assert calls[1] == ["Replace the J2 reducer grease every 20,000 hours or 4 years."]
    assert RECORDS[2]["question"] in recorded
    assert "SRVO-062 means the pulsecoder backup battery voltage dropped." not in encoded


class BrokenOnOneQuestion(ScriptedBackend):
    def reflect(self, query: str, answer: str, chunks: Sequence[Hit]) -> Reflection:
        if "payload" in query:
            raise RuntimeError("the judge fell over")
        return super().reflect(query, answer, chunks)


def test_a_record_that_fails_fails_alone_and_its_batch_is_stored(corpus, settings):  # type: ignore[no-untyped-def]  # noqa: F811
    with transaction() as session:
        ids = [a.intake_id for a in accept_records(_runs()[:5], source="api", session=session)]
    summary = process_queue(backend=BrokenOnOneQuestion((0.9,)), batch=5)
    assert (summary.assessed, summary.failed, summary.remaining) == (4, 1, 0)
    with transaction() as session:
        rows = session.execute(text("SELECT status, error, run_id FROM run_intake WHERE id = ANY(:ids) ORDER BY id"),
                               {"ids": ids}).all()
    assert [r.status for r in rows] == ["assessed", "assessed", "assessed", "assessed", "failed"]
    assert rows[4].error == "assessment failed: RuntimeError: the judge fell over" and rows[4].run_id is None
    assert all(r.run_id is not None for r in rows[:4])


@pytest.fixture()
def recorded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The questions whose judges were run with the recording embedder."""
    questions: list[str] = []
    real = batch.record_judges

    def counting(query, *args):  # type: ignore[no-untyped-def]
        questions.append(query)
        return real(query, *args)

    monkeypatch.setattr(batch, "record_judges", counting)
    return questions


def test_a_batch_of_one_sentence_contexts_embeds_in_one_pass(corpus, settings, calls, recorded):  # type: ignore[no-untyped-def]  # noqa: F811
    """The judges read a one-sentence chunk's sentence, already encoded as the context: the
    first pass (contexts, questions, claims) is all the model is asked for, and the judges are
    not run a second time to learn what they read."""
    runs = [ExternalRun.model_validate({"question": "Which alarm warns of a low backup battery?", "answer": "SRVO-062",
                                        "contexts": [{"text": "SRVO-062 warns that the pulsecoder backup battery is low."}]}),
            ExternalRun.model_validate({"question": "How often is the J2 reducer grease replaced?",
                                        "answer": "Every 20,000 hours.",
                                        "contexts": [{"text": "Replace the J2 reducer grease every 20,000 hours."}]})]
    with transaction() as session:
        together = assess_batch(runs, judges=[True, True], session=session, collection="default",
                                backend=backend_for(settings), profile=DEFAULT, settings=settings)
    assert all(isinstance(a, Assessment) and a.iteration.verdict is not None for a in together), together
    assert len(calls) == 1, calls
    assert recorded == []


def test_a_batch_claims_records_until_their_texts_hold_a_pass(clean_db):  # type: ignore[no-untyped-def]
    """Records of one short context are claimed ASSESS_BATCH at a time; records of five long
    ones, fewer: as many CLAIM_STEPs as hold PASS_CHARS characters (contexts, question, answer)."""
    from services.intake.assess import ASSESS_BATCH, CLAIM_STEP, PASS_CHARS, _claim

    def records(n: int, contexts: int, words: int, tag: str) -> list[ExternalRun]:
        return [ExternalRun.model_validate({"question": f"Question {tag}{i}?", "answer": "An answer.", "trace_id": f"{tag}{i}",
                                            "contexts": [{"text": f"Context {c} of {tag}{i}." + " word" * words}
                                                         for c in range(contexts)]})
                for i in range(n)]

    with transaction() as session:
        accept_records(records(ASSESS_BATCH + 10, 1, 50, "one-"), source="api", session=session)
    with transaction() as session:
        claimed = _claim(ASSESS_BATCH, session=session)
    assert len({r.intake_id for r in claimed}) == len(claimed) == ASSESS_BATCH  # ~300 characters a record
    with transaction() as session:
        session.execute(text("DELETE FROM run_intake"))
        five = records(ASSESS_BATCH + 10, 5, 120, "five-")
        accept_records(five, source="api", session=session)
    with transaction() as session:
        claimed = _claim(ASSESS_BATCH, session=session)
    each = len(five[0].question) + len(five[0].answer) + sum(len(c.text) for c in five[0].contexts)
    steps = -(-PASS_CHARS // (each * CLAIM_STEP))
    assert len({r.intake_id for r in claimed}) == len(claimed) == steps * CLAIM_STEP < ASSESS_BATCH
