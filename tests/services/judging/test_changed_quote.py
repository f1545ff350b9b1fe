"""A claim that quotes its context but for a word or three it swaps says what the context does not."""

from __future__ import annotations

import pytest

from services.judging import judge_answer
from services.judging._quotes import changed_quote
from services.judging.vectors import cached_embedder
from services.judging.verdict import SUPPORTED

PASSAGE = (
    "Returns the sample frequencies. Unlike fftfreq the Nyquist frequency component is considered to be positive. "
    "When multiple conditions are satisfied, the first one encountered in condlist is used. "
    "One shape dimension can be -1. It returns a read-only view on the original array, equivalent to "
    "multiplying `x1` by ``2**x2``."
)
QUESTION = "Is the Nyquist bin positive or negative for real input?"


@pytest.fixture(scope="module")
def embed():  # type: ignore[no-untyped-def]
    return cached_embedder("all-MiniLM-L6-v2")


def test_a_swapped_word_with_no_known_opposite_or_a_swapped_figure_is_a_changed_quote() -> None:
    said = "Unlike fftfreq the Nyquist frequency component is considered to be negative."
    assert changed_quote(said, ["Unrelated text.", PASSAGE]) == ("negative", "positive")
    last = "When multiple conditions are satisfied, the last one encountered in condlist is used."
    assert changed_quote(last, [PASSAGE]) == ("last", "first")
    # At the claim's edge only a figure in a figure's place counts: "Three" for "One".
    assert changed_quote("Three shape dimension can be -1.", [PASSAGE]) == ("three", "one")
    assert changed_quote("equivalent to multiplying `x1` by ``4**x2``.", [PASSAGE]) == ("4", "2")
    assert changed_quote("equivalent to multiplying x1 by 4x2.", [PASSAGE]) == ("4x2", "2 x2")  # markup stripped


def test_a_quote_a_paraphrase_or_a_swap_that_changes_nothing_is_not() -> None:
    assert changed_quote("Unlike fftfreq the Nyquist frequency component is considered to be positive.", [PASSAGE]) is None
    # Markup the answer lost ("2**x2" read as "2x2") is the same characters, not a changed figure.
    assert changed_quote("equivalent to multiplying `x1` by ``2**x2``.", [PASSAGE]) is None
    assert changed_quote("equivalent to multiplying x1 by 2x2.", [PASSAGE]) is None
    # A pronoun replaced by what it stands for, an opening word of the answer's own.
    assert changed_quote("np.diagonal returns a read-only view on the original array.", [PASSAGE]) is None
    assert changed_quote("Yes, the Nyquist frequency component is considered to be positive.", [PASSAGE]) is None
    # A paraphrase changes too much to be read as a quote; a short phrase is not compared.
    assert changed_quote("The Nyquist term counts as a positive frequency here, unlike in fftfreq.", [PASSAGE]) is None
    assert changed_quote("considered to be negative", [PASSAGE]) is None
    # A negation contracted or spelled out is the same words.
    context = ["numpy.append does not occur in-place: a new array is allocated and filled. It cannot fail."]
    assert changed_quote("No, numpy.append doesn't occur in-place; a new array is allocated.", context) is None
    assert changed_quote("numpy.append does not occur in-place. It can't fail.", context) is None
    assert changed_quote("numpy.append does always occur in-place: a new array is allocated.", context) == ("always", "not")


def test_the_judge_names_the_swap_and_never_auto_accepts_it(embed) -> None:  # type: ignore[no-untyped-def]
    question = "Which condition is used when several of them are satisfied?"
    swapped = judge_answer(question, "When multiple conditions are satisfied, the newest one encountered in condlist is used.",
                           [PASSAGE], embed=embed)
    quoted = judge_answer(question, "When multiple conditions are satisfied, the first one encountered in condlist is used.",
                          [PASSAGE], embed=embed)
    # "newest" is in no list of opposites, and no word of either answer is missing from the context.
    assert swapped.features["quote_changed"] == 1.0 and quoted.features["quote_changed"] == 0.0
    assert swapped.features["reversal"] == 0.0 and swapped.features["unsupported_atom"] == 0.0
    assert "quotes its context but says 'newest' where its context says 'first'" in swapped.reason
    assert swapped.label != SUPPORTED and not swapped.grounded and quoted.grounded
    assert quoted.p_supported > swapped.p_supported + 0.3


def test_a_question_word_put_in_for_its_opposite_or_at_the_claims_edge_is_a_changed_quote() -> None:
    wait = ["Wait 5 minutes after switching off before opening the amplifier cover."]
    asked = "How long do I wait after switching off before opening the amplifier cover?"
    # Both words are the question's: "after" stands in for its opposite, not for the context's wording.
    assert changed_quote("Wait 5 minutes after switching off after opening the amplifier cover.", wait, asked) == \
        ("after", "before")
    # The question's own word put in for a word it does not use stays a restatement.
    assert changed_quote("Wait 5 minutes after switching off before opening the amplifier lid.",
                         ["Wait 5 minutes after switching off before opening the amplifier cover."],
                         "How long do I wait before opening the amplifier lid?") is None
    # The claim's opening "The" lines up with a "the" read around the stretch; the word after it is
    # still the opposite of the context's.
    inputs = ["... keeps the robot on the path.\n\nThe external E-stop and fence inputs are configured as category 1."]
    assert changed_quote("The internal E-stop and fence inputs are configured as category 1.", inputs) == \
        ("internal", "external")
    assert changed_quote("The external E-stop and fence inputs are configured as category 1.", inputs) is None


def test_a_changed_quote_is_held_below_review_however_high_its_other_signals(embed) -> None:  # type: ignore[no-untyped-def]
    from services.judging.judge import CHANGED_QUOTE_CAP

    context = ["Because the prediction depends on the payload model, wrong payload data is the most common cause "
               "of false SRVO-045 alarms. Check the payload schedule first."]
    question = "What is the most common cause of false SRVO-045 alarms?"
    turned = judge_answer(question, "Because the prediction depends on the payload model, wrong payload data is the most "
                                    "common cause of true SRVO-045 alarms.", context, embed=embed)
    assert turned.features["quote_changed"] == 1.0
    assert turned.p_supported <= CHANGED_QUOTE_CAP and turned.label == "unsupported"
    assert "says 'true' where its context says 'false'" in turned.reason
