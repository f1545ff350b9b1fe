"""The kind of answer a question asks for is read from the wh-word that asks, not from any."""

from __future__ import annotations

import pytest

from services.judging.answer_type import ANY, CHOICE, PERSON, PLACE, QUANTITY, TIME, expected_kind


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
    ("Is the upper bound included, low or high?", CHOICE),
])
def test_the_asking_wh_word_decides(question: str, kind: str) -> None:
    assert expected_kind(question).kind == kind


@pytest.mark.parametrize("question", [
    # a "when", "where" or "whose" that opens a clause of the question asks nothing
    "Why do I get an error when I write into the diagonal I extracted from a matrix?",
    "how do I get the 0x in front when formatting a number as hex",
    "What happens if I use a bare raise when no exception is being handled?",
    "random ints where the upper bound is included",
    "remainder whose sign follows the dividend, like Matlab's rem",
    # nor does a condition put first
    "When I unpack with a starred name like first, *rest = data, what type does rest end up being?",
    # a yes/no question asks for no kind
    "Does a finally clause execute when continue jumps out of a try inside a loop?",
])
def test_a_wh_word_inside_a_clause_asks_for_nothing(question: str) -> None:
    assert expected_kind(question).kind == ANY
