"""The judge on the workbench's own extractive answers: quoted sentences are grounded, and the
reflection built from the verdict tells a quote that answers from one that is only on the topic."""

from __future__ import annotations

import pytest

from services.answering.offline import reflection_from_verdict
from services.judging import judge_answer
from services.judging._segments import clean
from services.judging.vectors import cached_embedder

PROTOCOL = ("Calling the asynchronous iterator's \"aiterator.__anext__\" method returns an awaitable. "
            "For two collections to compare equal, they must be of the same type (for example, "
            "\"[1,2] == (1,2)\" is false because the type is not the same).")


@pytest.fixture(scope="module")
def embed():  # type: ignore[no-untyped-def]
    return cached_embedder("all-MiniLM-L6-v2")


def test_names_written_as_code_keep_their_underscores_and_bold_loses_its_markup() -> None:
    assert clean('the "aiterator.__anext__" method') == 'the "aiterator.__anext__" method'
    assert clean('"__iadd__()" and "x = x.__iadd__ (y)"') == '"__iadd__()" and "x = x.__iadd__ (y)"'
    assert clean("this is __very important__ here") == "this is very important here"


def test_a_sentence_quoted_from_its_context_is_grounded(embed) -> None:  # type: ignore[no-untyped-def]
    question = "What does calling aiterator.__anext__ return?"
    verdict = judge_answer(question, "Calling the asynchronous iterator's \"aiterator.__anext__\" method returns "
                                     "an awaitable. [1]", [PROTOCOL], embed=embed)
    assert verdict.grounded and not verdict.unsupported_words, verdict.reason


def test_a_quote_cut_short_by_a_citation_like_list_turns_nothing_around(embed) -> None:  # type: ignore[no-untyped-def]
    # "[1,2]" reads as a citation marker, so the claim ends before the sentence's "not".
    answer = ("For two collections to compare equal, they must be of the same type (for example, "
              "\"[1,2] == (1,2)\" is false because the type is not the same). [1]")
    verdict = judge_answer("When do two collections compare equal?", answer, [PROTOCOL], embed=embed)
    assert not any(c.reversed for c in verdict.claims), verdict.reason


def test_the_reflection_ranks_a_quote_that_answers_above_a_grounded_quote_beside_the_question(embed) -> None:  # type: ignore[no-untyped-def]
    contexts = ["The controller stores its alarm history for 90 days. The cabinet fan is replaced every two years. "
                "Alarm SRVO-062 means the pulse coder battery is low."]
    question = "How long does the controller keep its alarm history?"
    answers = {"answers": "The controller stores its alarm history for 90 days. [1]",
               "beside": "The cabinet fan is replaced every two years. [1]"}
    reflections = {}
    for name, answer in answers.items():
        verdict = judge_answer(question, answer, contexts, embed=embed)
        assert verdict.grounded, verdict.reason  # both are quotes: the judge finds nothing invented
        reflections[name] = reflection_from_verdict(verdict, question, answer, embed)
    assert reflections["answers"].reflection_score > reflections["beside"].reflection_score + 0.2, reflections
    assert reflections["answers"].answer_grounded and reflections["beside"].answer_grounded


def test_an_ungrounded_answer_s_reflection_is_held_at_its_p_supported(embed) -> None:  # type: ignore[no-untyped-def]
    contexts = ["The controller stores its alarm history for 90 days."]
    question = "How long does the controller keep its alarm history?"
    answer = "The controller keeps its alarm history for 45 days."
    verdict = judge_answer(question, answer, contexts, embed=embed)
    reflection = reflection_from_verdict(verdict, question, answer, embed)
    assert not verdict.grounded and reflection.reflection_score <= verdict.p_supported
    assert reflection.hallucination_detected
