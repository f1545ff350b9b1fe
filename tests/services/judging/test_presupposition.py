"""A wh-question's own framing, restated by its answer, is not a reversal the answer makes."""

from __future__ import annotations

from services.judging.features import read_words


def reversal(question: str, answer: str, context: str) -> float:
    return read_words(question, answer, (context,)).features["reversal"]


VALVE = "When the pressure drops, the valve does not open, and the pump keeps running."


def test_a_negation_about_something_else_is_not_left_out_by_a_restatement() -> None:
    # The evidence's "not" is about the valve; the answer adds what the pump does.
    assert reversal("What keeps running when the pressure drops?",
                    "When the pressure drops, the pump keeps running.", VALVE) == 0.0


def test_leaving_out_the_negation_of_what_the_answer_adds_is_still_a_reversal() -> None:
    assert reversal("What does the valve do when the pressure drops?",
                    "When the pressure drops, the valve opens.", VALVE) == 1.0


def test_a_yes_no_question_restated_asserts_its_statement() -> None:
    assert reversal("Does the valve open when the pressure drops?",
                    "The valve opens when the pressure drops.", VALVE) == 1.0


def test_a_negation_the_question_asks_with_is_the_question_s() -> None:
    context = "When the pressure drops, the valve stays shut because the spring holds it closed."
    assert reversal("Why doesn't the valve open when the pressure drops?",
                    "The valve doesn't open when the pressure drops because the spring holds it closed.", context) == 0.0
    # ...and its answer leaving it out turns it around.
    assert reversal("Why doesn't the valve open when the pressure drops?",
                    "The valve opens when the pressure drops because the spring holds it closed.",
                    "When the pressure drops, the valve does not open because the spring holds it closed.") == 1.0
