"""The judge's development set (bench/judge_set.py) is what bench/judge.py says it is: the same
cases for the same seed, every kind of answer on our corpora, fabricated values in no context,
right values in the gold passage, and answers whose length tells right from wrong no better
than a coin. Reads files only: the handbook and our two sets from the repository, SQuAD from
../shared when it is there."""

from __future__ import annotations

import json
import re

import pytest

from bench._common import SQUAD_DIR
from bench._judge_replies import yes_no_question
from bench._judge_sources import HANDBOOK_DOCS, HANDBOOK_QA
from bench._judge_text import question_class, question_options, value_type
from bench.judge_set import ABSTENTIONS, COMPARISONS, KINDS, JudgeCase, build_cases, length_auroc

OURS = ("handbook", "python-reference", "numpy-api")
NEEDS_SQUAD = pytest.mark.skipif(not (SQUAD_DIR / "corpus.jsonl").exists(),
                                 reason=f"SQuAD 2.0 half-dev not found at {SQUAD_DIR} (set BENCH_SQUAD_DIR)")


@pytest.fixture(scope="module")
def ours() -> list[JudgeCase]:
    return build_cases(OURS, per_corpus=300, seed=0)


@pytest.fixture(scope="module")
def squad() -> list[JudgeCase]:
    return build_cases(["squad"], per_corpus=100, seed=0)


def _flat(text: str) -> str:
    return " ".join(text.split()).lower()


def _check_values(cases: list[JudgeCase]) -> None:
    for case in cases:
        contexts = [_flat(c) for c in case.contexts]
        if case.kind.startswith("fabricated"):
            assert case.value and not any(_flat(case.value) in c for c in contexts), case
        if case.label == 1:
            assert any(_flat(case.value) in c for c in contexts), case  # the gold passage holds it
            assert _flat(case.value) in _flat(case.answer), case
        if case.kind in ("right_concise", "right_option"):
            assert case.answer == case.value


def test_the_same_seed_gives_the_same_cases_and_another_seed_others() -> None:
    first = build_cases(["handbook", "numpy-api"], per_corpus=40, seed=3)
    assert first == build_cases(["handbook", "numpy-api"], per_corpus=40, seed=3)
    assert first != build_cases(["handbook", "numpy-api"], per_corpus=40, seed=4)


@pytest.mark.parametrize("corpus", OURS)
def test_every_kind_is_present_with_its_label_and_style(ours: list[JudgeCase], corpus: str) -> None:
    cases = [c for c in ours if c.corpus == corpus]
    assert {c.kind for c in cases} == set(KINDS)
    assert all((c.label, c.style) == KINDS[c.kind] for c in cases)
    assert all(c.split in ("train", "test") for c in cases)
    assert {c.split for c in cases} == {"train", "test"}


def test_a_question_sits_wholly_in_one_split(ours: list[JudgeCase]) -> None:
    splits: dict[tuple[str, str], set[str]] = {}
    for case in ours:
        splits.setdefault((case.corpus, case.question_id), set()).add(case.split)
    assert all(len(s) == 1 for s in splits.values())


def test_fabricated_values_are_in_no_context_and_right_values_in_the_gold_passage(ours: list[JudgeCase]) -> None:
    _check_values(ours)


def test_wrong_answers_differ_from_the_right_ones_they_are_compared_with(ours: list[JudgeCase]) -> None:
    right = {(c.corpus, c.question_id, c.kind, c.question): c.answer for c in ours if c.label == 1}
    for case in ours:
        if case.kind == "abstention":
            assert case.answer in ABSTENTIONS
        elif case.label == 0:
            counterpart = right.get((case.corpus, case.question_id, COMPARISONS[case.kind], case.question))
            assert counterpart is None or _flat(counterpart) != _flat(case.answer), case
    options = [c for c in ours if c.kind in ("right_option", "wrong_option")]
    assert all(question_options(c.question) is not None for c in options)
    assert all(_flat(c.answer) in _flat(c.question) for c in options)


def test_a_wrong_kind_is_a_value_of_its_passage_that_the_question_does_not_ask_for(ours: list[JudgeCase]) -> None:
    # who/where answered with a figure or a date, when/how many with a name; on the contexts of
    # the question's right concise answer, whose passage holds the value.
    not_asked = {"who": {"number", "date"}, "where": {"number", "date"}, "when": {"name"}, "how-many": {"name"}}
    concise = {(c.corpus, c.question_id): c for c in ours if c.kind == "right_concise"}
    typed = [c for c in ours if c.kind == "wrong_type"]
    assert {c.corpus for c in typed} == set(OURS)
    for case in typed:
        right = concise[(case.corpus, case.question_id)]
        assert case.contexts == right.contexts and case.split == right.split and case.answer == case.value
        assert any(_flat(case.value) in _flat(c) for c in case.contexts), case
        assert value_type(case.answer) in not_asked[_asked(case.question)], case


def _asked(question: str) -> str:
    """The class of the wh-word opening the question, past a preposition ("In what year ...")."""
    words = question.split()
    if words[0].lower() in ("in", "on", "at", "during", "from", "by", "for", "to", "with"):
        words = words[1:]
    return question_class(" ".join(words[:2]))


@pytest.mark.parametrize("corpus", OURS)
def test_length_does_not_tell_right_from_wrong(ours: list[JudgeCase], corpus: str) -> None:
    cases = [c for c in ours if c.corpus == corpus]
    assert 0.45 <= length_auroc(cases) <= 0.55  # type: ignore[operator]
    assert 0.45 <= length_auroc([c for c in cases if c.split == "test"]) <= 0.55  # type: ignore[operator]


def test_the_handbook_answers_are_spans_of_their_documents() -> None:
    rows = [json.loads(line) for line in HANDBOOK_QA.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 60 and len({r["_id"] for r in rows}) == len(rows)
    choices = 0
    for row in rows:
        document = (HANDBOOK_DOCS / row["document"]).read_text(encoding="utf-8")
        assert row["answer"] in document, row
        options = question_options(row["question"])
        if options is not None:
            choices += 1
            assert row["answer"] in options and all(o.lower() in document.lower() for o in options), row
    assert choices >= 10
    assert all(not re.search(r"\*\*|`", r["answer"]) for r in rows)  # no Markdown marks in a span


@NEEDS_SQUAD
def test_squad_cases_hold_the_same_properties(squad: list[JudgeCase]) -> None:
    assert {c.kind for c in squad} == set(KINDS)
    _check_values(squad)
    assert 0.45 <= length_auroc(squad) <= 0.55  # type: ignore[operator]


def test_a_sentence_is_asked_as_it_stands_and_turned_each_answered_both_ways(ours: list[JudgeCase]) -> None:
    assert yes_no_question("The default timeout is 30 seconds.") == "Is the default timeout 30 seconds?"
    assert yes_no_question("Kestrel Robotics has a plant in Kobe.") == "Has Kestrel Robotics a plant in Kobe?"
    assert yes_no_question("Raising it lowers the latency.") is None  # no verb to front
    assert yes_no_question("Note that the value is 3.") is None  # a clause, not a subject
    replies: dict[tuple[str, str], list[JudgeCase]] = {}
    for case in ours:
        if case.style == "reply":
            replies.setdefault((case.corpus, case.question_id), []).append(case)
    assert {corpus for corpus, _ in replies} == set(OURS)
    for cases in replies.values():
        questions = {c.question for c in cases}
        assert len(questions) == 2 and len(cases) == 4
        for question in questions:
            answers = {c.label: c.answer.lower() for c in cases if c.question == question}
            assert {a[:2] for a in answers.values()} == {"ye", "no"}  # one right reply and one wrong, each way
        # One question (the sentence as it stands) is rightly answered yes, the other (turned) no.
        right = sorted(c.answer.lower()[:2] for c in cases if c.label == 1)
        assert right == ["no", "ye"]
