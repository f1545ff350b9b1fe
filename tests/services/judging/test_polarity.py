"""A bare yes or no is read against the way the contexts take the question's statement: where they
say it plainly, the reply going against them is unsupported and names why; where they take no
side, both replies stay uncertain, as before."""

from __future__ import annotations

import pytest

from services.judging import judge_answer
from services.judging._quotes import changed_quote
from services.judging.answer_type import asks_yes_or_no
from services.judging.claims import what_is_said
from services.judging.judge import NOTHING_ADDED_CAP
from services.judging.vectors import cached_embedder
from services.judging.verdict import UNCERTAIN, UNSUPPORTED

CONTEXTS = ["The default timeout is 30 seconds. Raising the buffer size lowers the latency of each request. "
            "Whitespace is not allowed between the prefix and the opening quote."]


@pytest.fixture(scope="module")
def embed():  # type: ignore[no-untyped-def]
    return cached_embedder("all-MiniLM-L6-v2")


@pytest.mark.parametrize(("question", "right", "wrong", "why"), [
    ("Is the default timeout 30 seconds?", "Yes", "No", "the contexts state the question's statement as asked"),
    ("Is the default timeout 60 seconds?", "No.", "Yes.", "says '60 seconds' where its context gives another figure"),
    ("Does raising the buffer size increase the latency?", "No, it doesn't.", "Yes, it does.",
     "says 'increase' where its context says 'lowers'"),
    ("Is whitespace allowed between the prefix and the opening quote?", "No, it isn't.", "Yes, it is.",
     "leaves out the 'not' of its context"),
])
def test_the_reply_against_what_the_contexts_say_is_unsupported_and_says_why(embed, question, right, wrong, why) -> None:  # type: ignore[no-untyped-def]
    against = judge_answer(question, wrong, CONTEXTS, embed=embed)
    along = judge_answer(question, right, CONTEXTS, embed=embed)
    assert against.label == UNSUPPORTED and why in against.reason, against.reason
    assert f"a bare '{wrong.split(',')[0].strip('.').lower()}', but" in against.reason
    # The reply going with them is still a bare reply: a reviewer reads it, with the same reason.
    assert along.label == UNCERTAIN and along.p_supported == NOTHING_ADDED_CAP and why in along.reason
    # At most the complement of the statement's P read as an answer: 0.36 for "60 seconds" under the
    # model fitted beside the reader of the question (2026-12-04), which does not read a bare reply.
    assert against.p_supported < 0.4 < along.p_supported


def test_where_the_contexts_take_no_side_both_replies_stay_uncertain(embed) -> None:  # type: ignore[no-untyped-def]
    # The contexts never name what the question asks about: nothing says which way.
    question = "Is the retry limit configurable per request?"
    yes, no = (judge_answer(question, reply, CONTEXTS, embed=embed) for reply in ("Yes", "No"))
    assert yes.p_supported == no.p_supported and yes.label == no.label
    assert "needs a reader" in yes.reason and "needs a reader" in no.reason


def test_a_reply_echoing_its_verb_is_bare_and_one_adding_words_is_read_as_claims() -> None:
    question = "Is the default timeout 30 seconds?"
    for reply in ("No, it is not.", "No, it isn't.", "Yes, it is.", "No, it won't.", "**No**, they aren't."):
        assert what_is_said(question, reply)[1] is not None, reply
    assert what_is_said(question, "No, it is 60 seconds.") == ("it is 60 seconds.", None)
    # A question opening with its verb asks yes or no whatever wh-word a clause of it holds.
    assert asks_yes_or_no("Is a function problem one where a single output is expected?")
    assert not asks_yes_or_no("Where is a single output expected?")
    assert not asks_yes_or_no("Is the output a list or a tuple?")


def test_a_quote_in_another_form_of_its_words_is_no_changed_quote() -> None:
    # A yes/no question's "Does it lower ...?" quotes "It lowers ...": the same word, inflected.
    assert changed_quote("Does raising the buffer size lower the latency of each request.", CONTEXTS) is None
    assert changed_quote("Does raising the buffer size increase the latency of each request.", CONTEXTS) == \
        ("increase", "lowers")
    assert changed_quote("The default timeout is 60 seconds.", CONTEXTS) == ("60", "30")  # a figure is not a form
