"""The kind of answer a question asks for is read from the wh-word that asks, not from any."""

from __future__ import annotations

import pytest

from services.judging.answer_type import (
    ANY,
    CHOICE,
    DURATION,
    PERSON,
    PLACE,
    QUANTITY,
    REASON,
    TIME,
    expected_kind,
    type_fit,
    words_not_asked,
)
from services.judging.atoms import atoms


@pytest.mark.parametrize(("question", "kind"), [
    ("When was the Magna Carta sealed?", TIME),
    ("Beyonce's first album was released when?", TIME),
    ("In what year did the war end?", TIME),
    ("Who first published the t distribution and where did he work?", PERSON),
    ("The maker of the robot arm has its head office in what city?", PLACE),
    ("After WW-II where did Russia apply its old Tsarist regimes?", PLACE),
    ("Roughly how many hours a year does a two-shift operation run?", QUANTITY),
    # "which" asks as "what" does
    ("Which city is the head office of Kestrel Robotics in?", PLACE),
    ("Which year did the war end?", TIME),
    ("Which percentage of the vote did she win?", QUANTITY),
    ("How long does a future import stay in effect?", DURATION),
    ("How often should the grease be changed?", DURATION),
    ("Why is writing 0755 a syntax error in Python 3?", REASON),
    ("Why do I get an error when I write into the diagonal I extracted from a matrix?", REASON),  # not a time
    ("Is the upper bound included, low or high?", CHOICE),
    # options whose second opens with "not..." are options; only "or not" names none
    ("How many outputs are expected for each input, a single output or Notable examples include?", CHOICE),
    ("Does the call block whether or not?", ANY),
])
def test_the_asking_wh_word_decides(question: str, kind: str) -> None:
    assert expected_kind(question).kind == kind


@pytest.mark.parametrize("question", [
    # a "when", "where" or "whose" that opens a clause of the question asks nothing
    "how do I get the 0x in front when formatting a number as hex",
    "What happens if I use a bare raise when no exception is being handled?",
    "random ints where the upper bound is included",
    "remainder whose sign follows the dividend, like Matlab's rem",
    # nor does a condition put first
    "When I unpack with a starred name like first, *rest = data, what type does rest end up being?",
    # a yes/no question asks for no kind
    "Does a finally clause execute when continue jumps out of a try inside a loop?",
    "Is one example an enzyme that, when expressed at high levels, darkens the skin?",
])
def test_a_wh_word_inside_a_clause_asks_for_nothing(question: str) -> None:
    assert expected_kind(question).kind == ANY


@pytest.mark.parametrize("question", [
    # a "when" that asks in what case, not at what time: a condition answers it
    "When should I pick an out-of-bounds mode other than raise for better performance?",
    "When is it safe to call close() on the stream?",
    # a search-style query's "how many" describes what it looks for
    "count how many times each non-negative integer occurs in an array",
    "distinct values of an array along with how many times each occurs",
])
def test_a_case_or_a_description_asks_for_no_kind(question: str) -> None:
    assert expected_kind(question).kind == ANY


@pytest.mark.parametrize(("question", "kind"), [
    ("When should the valve be replaced?", TIME),
    ("how many rows does the query return", QUANTITY),
    ("the first album was released when", TIME),
])
def test_a_time_or_quantity_asked_without_a_question_mark_is_still_asked(question: str, kind: str) -> None:
    assert expected_kind(question).kind == kind


@pytest.mark.parametrize(("question", "answer"), [
    ("On what day does General Question Time take place?", "Thursday"),
    ("When is the Members Debate held?", "Immediately after Decision Time"),
    ("When does the motor stop?", "When the guard door opens."),
    ("When did the plant make shells?", "during the Cold War"),
    ("When did Mechlin lace develop?", "first half of the eighteenth century"),
    ("How many outputs are expected for each input?", "a single output"),
    ("How much does it cost to attend a meeting?", "free"),
    # a span answers "how long" without a figure, and a figure does too
    ("How long does a future import typed at the prompt stay in effect?", "for the rest of the interpreter session"),
    ("How long is the standard teach pendant cable?", "10 m"),
    ("How often should the grease be changed?", "every 3,850 hours"),
])
def test_an_answer_of_the_asked_kind_in_words_fits(question: str, answer: str) -> None:
    # Read on the answer's own words: a day's name, the event a time follows, a number in words.
    assert type_fit(expected_kind(question), atoms(answer), words_not_asked(question, answer), answer) == 1.0


@pytest.mark.parametrize(("question", "answer"), [
    ("When did the plant make shells?", "Mika Laine"),
    ("How many people does Kestrel Robotics employ?", "Tampere"),
    ("How often should the grease be changed?", "Mika Laine"),
    ("How long does a future import stay in effect?", "the interactive prompt"),
    # a figure alone gives no reason
    ("Why is writing 0755 a syntax error in Python 3?", "3.0"),
    # the question's own time word is not the answer's
    ("In what year did the war end?", "the Treaty of Kiel year"),
])
def test_an_answer_of_another_kind_does_not_fit(question: str, answer: str) -> None:
    assert type_fit(expected_kind(question), atoms(answer), words_not_asked(question, answer), answer) == 0.0


@pytest.mark.parametrize("answer", ["leading zeros in a non-zero decimal number are not allowed", "octal needs 0o, since 3.0"])
def test_a_reason_in_words_is_not_read_as_the_wrong_kind(answer: str) -> None:
    question = "Why is writing 0755 a syntax error in Python 3?"
    assert type_fit(expected_kind(question), atoms(answer), words_not_asked(question, answer), answer) == 0.5
