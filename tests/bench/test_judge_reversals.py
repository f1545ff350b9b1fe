"""bench/judge_reversals.py turns right sentences only at words the development set never turns."""

from __future__ import annotations

import random

from bench._judge_text import REVERSALS as SET_REVERSALS
from bench.fit_judge import lowest_threshold
from bench.judge_reversals import TURNS, turned
from bench.judge_set import JudgeCase


def _sentence(answer: str) -> JudgeCase:
    return JudgeCase("handbook", "q1", "right_sentence", "sentence", "Which way are the values sorted?", answer,
                     ["ctx"], 1, "test", value="")


def test_the_probe_s_pairs_are_none_of_the_sets_own() -> None:
    assert TURNS and not set(TURNS) & set(SET_REVERSALS)
    assert all(TURNS[word] != word for word in TURNS)


def test_a_right_sentence_is_turned_at_one_word_and_labelled_wrong() -> None:
    case = turned(_sentence("The values are returned in ascending order along the rows."), random.Random(0))
    assert case is not None and case.label == 0 and case.kind == "turned"
    assert case.answer in ("The values are returned in descending order along the rows.",
                           "The values are returned in ascending order along the columns.")
    assert turned(_sentence("Nothing here turns."), random.Random(0)) is None
    # A capital inside a sentence names something ("Old Town"), and words inside identifiers stay.
    assert turned(_sentence("It is in Old Town at the back_end."), random.Random(0)) is None


def test_accept_at_is_read_from_enough_accepted_answers() -> None:
    # One wrong answer second from the top: read from the first answer on, the threshold stays
    # above it; from five on, the precision of the rest decides (4 of 5, then 5 of 6).
    scores = [0.99, 0.98, 0.97, 0.96, 0.95, 0.94, 0.5]
    labels = [1, 0, 1, 1, 1, 1, 0]
    assert lowest_threshold(scores, labels, 0.8) == 0.99
    assert lowest_threshold(scores, labels, 0.8, min_accepted=5) == 0.94
