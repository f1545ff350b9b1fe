"""Every demo question through the real pipeline on the product's own handbook, with the
verdict its answer key expects (issue 19): answerable questions are answered from a relevant
document, are not contradicted, and score above the unanswerable ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import services
from services.answering import pipeline
from services.answering.offline import OfflineBackend
from services.answering.runs import Run
from services.judging import _lexical as lex
from services.judging import judge_answer
from services.judging._contradiction import contradiction
from services.judging._sentences import answer_sentences
from services.judging.judge import CONTRADICTION_CAP
from services.judging.model import shipped_model
from services.judging.vectors import cached_embedder
from services.scoring.weights import DEFAULT_PROFILE

DEMO = Path(services.__file__).parent / "demo_data"
COLLECTION = "demo-questions"
QUESTIONS = {q["_id"]: q for q in map(json.loads, (DEMO / "questions.jsonl").read_text(encoding="utf-8").splitlines())}
RELEVANT: dict[str, set[str]] = {}
for _line in (DEMO / "qrels.tsv").read_text(encoding="utf-8").splitlines()[1:]:
    _query_id, _document, _score = _line.split("\t")
    RELEVANT.setdefault(_query_id, set()).add(_document)
ANSWERABLE = sorted(q for q, question in QUESTIONS.items() if question["metadata"]["answerable"])
UNANSWERABLE = sorted(q for q, question in QUESTIONS.items() if not question["metadata"]["answerable"])
# q04's CRAG keeps only the maintenance schedule's chunk, and the extractive backend finds no
# statement in its table rows that is relevant enough: the answer is empty. Not a judge's doing.
EMPTY_ANSWER = {"q04"}


@pytest.fixture(scope="module")
def runs(engine) -> dict[str, Run]:  # type: ignore[no-untyped-def]
    """The balanced preset's run for every demo question, on a fresh copy of the handbook."""
    from services.corpus.ingest import ingest_paths

    ingest_paths(sorted((DEMO / "corpus").glob("*.md")), collection=COLLECTION)
    backend = OfflineBackend()
    return {query_id: pipeline.run(question["text"], "balanced", DEFAULT_PROFILE, backend=backend,
                                   collection=COLLECTION, source="test")
            for query_id, question in QUESTIONS.items()}


_EMPTY = pytest.mark.xfail(reason="empty answer (CRAG and extraction, not the judge)", strict=True)


@pytest.mark.parametrize("query_id", [pytest.param(q, marks=[_EMPTY] if q in EMPTY_ANSWER else [])
                                      for q in ANSWERABLE])
def test_an_answerable_question_is_answered_from_a_relevant_document(runs, query_id: str) -> None:  # type: ignore[no-untyped-def]
    cited = {c.external_id for c in runs[query_id].citations}
    assert cited & RELEVANT[query_id], f"{query_id} cites {sorted(cited)}, none of {sorted(RELEVANT[query_id])}"


@pytest.mark.parametrize("query_id", ANSWERABLE)
def test_no_answer_to_an_answerable_question_is_hard_contradicted(runs, query_id: str) -> None:  # type: ignore[no-untyped-def]
    query = QUESTIONS[query_id]["text"]
    for iteration in runs[query_id].iterations:
        found = contradiction(query, lex.query_terms(query), answer_sentences(iteration.answer))
        assert found is None or not found.hard, f"iteration {iteration.ordinal}: {found}"
        if iteration.reflection is not None:
            assert iteration.reflection.reflection_score > CONTRADICTION_CAP


def test_q06_is_not_read_as_a_negated_question_that_its_answer_contradicts(runs) -> None:  # type: ignore[no-untyped-def]
    # "without getting false alarms" is a condition on the procedure, not a negated question:
    # at most a soft flag, never the cap that used to hold every iteration at 0.4.
    run, query = runs["q06"], QUESTIONS["q06"]["text"]
    for iteration in run.iterations:
        found = contradiction(query, lex.query_terms(query), answer_sentences(iteration.answer))
        assert found is None or found.kind == "without_condition"
    assert run.reflection_score is not None and run.reflection_score > CONTRADICTION_CAP
    assert {c.external_id for c in run.citations} & RELEVANT["q06"]


def test_answerable_questions_score_above_every_unanswerable_one(runs) -> None:  # type: ignore[no-untyped-def]
    answered = {q: runs[q].final_confidence for q in ANSWERABLE if q not in EMPTY_ANSWER}
    unanswerable = {q: runs[q].final_confidence for q in UNANSWERABLE}
    lowest = min(answered, key=lambda q: answered[q])
    highest = max(unanswerable, key=lambda q: unanswerable[q])
    assert answered[lowest] > unanswerable[highest], (lowest, answered[lowest], highest, unanswerable[highest])


def test_no_unanswerable_question_is_accepted_without_review(runs) -> None:  # type: ignore[no-untyped-def]
    assert all(runs[q].status.value == "pending" for q in UNANSWERABLE)


# A sentence of the handbook that answers a question asked the other way round (issue 19's
# "less sensitive" against "more sensitive"), or asked with a limit the answer goes past.
HANDBOOK_ANSWERS = [
    ("How do I make collision detection less sensitive?", "Lower $SENS = lower threshold = more sensitive.",
     "opposite_word"),
    ("Does a higher $SENS value make collision detection less sensitive?",
     "A lower $SENS value means a lower threshold, i.e. more sensitive detection.", "opposite_word"),
    ("Can I increase the CALL nesting depth beyond 16 levels?",
     "Only if flattening is not possible, increase $INTP_CFG.$MAX_CALL_DEPTH (up to 32) and perform a cold start.",
     "swapped_number"),
    ("Can the robot run in AUTO without the teach pendant connected?",
     "Yes, with the bypass plug KR-P-0510 fitted in the pendant connector.", "without_condition"),
]


@pytest.mark.parametrize(("query", "sentence", "kind"), HANDBOOK_ANSWERS)
def test_a_handbook_answer_to_a_question_asked_the_other_way_is_flagged_softly(query: str, sentence: str,
                                                                                kind: str) -> None:
    found = contradiction(query, lex.query_terms(query), [sentence])
    assert found is not None and found.kind == kind and not found.hard
    # Capped, P(supported) would be CONTRADICTION_CAP at most; soft, the contradiction is one
    # signal of the judge's combination and P is the model's, held down by no rule.
    verdict = judge_answer(query, sentence, [sentence], embed=cached_embedder("all-MiniLM-L6-v2"))
    assert verdict.features["contradiction"] == 0.5
    assert verdict.p_supported == pytest.approx(shipped_model().probability(verdict.features), abs=1e-4)
