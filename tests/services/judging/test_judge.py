"""The judge on answers other systems write: concise or restated, right or with one invented fact."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from services.judging import judge_answer
from services.judging.adequacy import answer_relevance, grade_answer
from services.judging.atoms import atoms, holds
from services.judging.claims import answer_claims, is_abstention, unframed
from services.judging.features import read_answer, texts_read_alone
from services.judging.judge import NOTHING_ADDED_CAP, WRONG_KIND_CAP
from services.judging.model import JudgeModel, shipped_model
from services.judging.vectors import cached_embedder
from services.judging.verdict import ABSTAINED, SUPPORTED, UNCERTAIN, UNCHECKED, UNSUPPORTED

QUESTION = "The maker of the robot arm has its head office in what city?"
CONTEXTS = [
    "Fanuc builds the robot arm used on line 3. The maker of the robot arm is headquartered in Osaka, "
    "close to the port. Its largest plant is in Nagoya, where 2,400 people work.",
    "Line 3 runs two shifts. The robot arm is serviced every 6 months.",
]


@pytest.fixture(scope="module")
def embed():  # type: ignore[no-untyped-def]
    return cached_embedder("all-MiniLM-L6-v2")


def test_a_concise_right_answer_is_not_graded_inadequate_for_not_repeating_the_question() -> None:
    concise = grade_answer(QUESTION, "Osaka", relevance=0.2)
    assert concise.score >= 4  # a place for "in what city": an answer of the kind asked
    assert not concise.gaps  # nothing is "missing": the answer need not repeat 'maker', 'robot', ...
    assert grade_answer("How many people work at the largest plant?", "2,400", relevance=0.2).score >= 4
    # A number for "what city" is an answer of the wrong kind, a restated question no answer at all.
    assert grade_answer(QUESTION, "2,400", relevance=0.2).score <= 2
    assert grade_answer(QUESTION, "The maker of the robot arm has its head office in a city.", relevance=0.9).score <= 2


def test_a_restated_question_with_one_invented_name_is_flagged_with_that_name(embed) -> None:  # type: ignore[no-untyped-def]
    fabricated = judge_answer(QUESTION, "The maker of the robot arm has its head office in Kobe.", CONTEXTS, embed=embed)
    right = judge_answer(QUESTION, "The maker of the robot arm has its head office in Osaka.", CONTEXTS, embed=embed)
    assert fabricated.label != SUPPORTED and not fabricated.auto_accept
    assert "'Kobe' appears in no context" in fabricated.reason
    assert fabricated.unsupported_words == ("Kobe",)
    assert not fabricated.grounded
    assert right.p_supported > fabricated.p_supported + 0.3
    assert right.unsupported_words == () and right.grounded


def test_a_concise_right_answer_scores_above_a_grounded_name_from_the_wrong_sentence(embed) -> None:  # type: ignore[no-untyped-def]
    right = judge_answer(QUESTION, "Osaka", CONTEXTS, embed=embed)
    wrong_sentence = judge_answer(QUESTION, "Nagoya", CONTEXTS, embed=embed)
    invented = judge_answer(QUESTION, "Kobe", CONTEXTS, embed=embed)
    assert right.p_supported > wrong_sentence.p_supported > invented.p_supported
    claim = right.claims[0]
    assert claim.evidence.startswith("The maker of the robot arm is headquartered in Osaka") and claim.context == 1


def test_a_changed_number_and_a_reversed_direction_are_caught(embed) -> None:  # type: ignore[no-untyped-def]
    question = "How many people work at the largest plant?"
    changed = judge_answer(question, "Its largest plant is in Nagoya, where 4,800 people work.", CONTEXTS, embed=embed)
    assert "'4,800' appears in no context" in changed.reason and not changed.auto_accept
    reversed_ = judge_answer("Where is the largest plant?", "The smallest plant is in Nagoya.", CONTEXTS, embed=embed)
    assert reversed_.claims[0].reversed == ("smallest", "largest")
    assert "the answer says 'smallest' where its context says 'largest'" in reversed_.reason


def test_abstentions_and_answers_with_no_context_are_their_own_class(embed) -> None:  # type: ignore[no-untyped-def]
    for answer in ("", "I don't know.", "The provided context does not say."):
        assert is_abstention(answer)
        verdict = judge_answer(QUESTION, answer, CONTEXTS, embed=embed)
        assert verdict.label == ABSTAINED and not verdict.auto_accept and not verdict.grounded
    assert not is_abstention("The manual does not say how often, but J2 takes 2 kg of grease.")  # it answers
    # A restated question's own words are not the answer's: this one answers.
    asked = "What happens to an unknown escape like \\d in a string literal?"
    restated = "What happens to an unknown escape like \\d in a string literal: the backslash is left in the result."
    assert is_abstention("It is unknown.") and is_abstention("I don't know.", asked) and not is_abstention(restated, asked)
    assert judge_answer(asked, restated, ["An unknown escape is kept: the backslash is left in the result."],
                        embed=embed).label != ABSTAINED
    unchecked = judge_answer(QUESTION, "Osaka", [], embed=embed)
    assert unchecked.label == UNCHECKED and not unchecked.auto_accept and "no context" in unchecked.reason


def test_the_option_a_passage_pairs_with_the_question_wins(embed) -> None:  # type: ignore[no-untyped-def]
    question = "Is the robot arm's maker headquartered in Osaka or Nagoya?"
    right = judge_answer(question, "Osaka", CONTEXTS, embed=embed)
    wrong = judge_answer(question, "Nagoya", CONTEXTS, embed=embed)
    assert right.p_supported > wrong.p_supported


def test_a_wrong_option_the_reader_reads_below_the_other_is_told_so(embed) -> None:  # type: ignore[no-untyped-def]
    from dataclasses import replace

    from services.judging.judge import _fault

    question = "Is the robot arm's maker headquartered in Osaka or Nagoya?"
    reading = read_answer(question, "Nagoya", CONTEXTS, embed=embed)
    assert reading.features["option_reader"] < 0  # the shipped reader reads Osaka as the head office
    told = "read with the question, the other option answers it better"
    # When the contexts' words do not already pair the other option with the question, the reader says why.
    quiet = {**reading.features, "option_margin": 0.0, "locality_margin": 0.0, "type_fit": 1.0}
    assert _fault(replace(reading, features=quiet, claims=())) == told
    assert _fault(replace(reading, features={**quiet, "option_reader": 0.4}, claims=())) != told


def test_what_a_claim_adds_leaves_out_the_question_s_own_words() -> None:
    (claim,) = answer_claims(QUESTION, "The maker of the robot arm has its head office in Kobe.")
    assert [a.surface for a in claim.added_atoms] == ["Kobe"]
    assert "maker" not in claim.added_words and "robot" not in claim.added_words


def test_atoms_compare_by_value() -> None:
    assert [(a.kind, a.key) for a in atoms("In 1066, three ships and 2,400 men reached SRVO-062 via np.abs")] == [
        ("year", "1066"), ("number", "3"), ("number", "2400"), ("code", "srvo-062"), ("code", "np.abs")]
    (number,) = atoms("2400 people")
    assert holds(number, "where 2,400 people work") and not holds(number, "where 4,800 people work")
    (name,) = atoms("Kobe")
    assert not holds(name, CONTEXTS[0]) and holds(atoms("Osaka")[0], CONTEXTS[0])


def test_a_number_is_held_only_in_its_own_unit_or_with_none(embed) -> None:  # type: ignore[no-untyped-def]
    length = atoms("7 m")[0]
    assert (length.key, length.unit) == ("7", "m") and length.surface == "7 m"
    assert holds(length, "a cable of 7 metres") and holds(length, "between 7 and 10 m")  # a bare 7 may be it
    assert not holds(length, "a 7-inch touchscreen on the KTP-7")  # 7 inches and a code: not 7 metres
    assert holds(atoms("7")[0], "a 7-inch touchscreen")  # a bare number is held by any unit
    assert [(a.key, a.unit) for a in atoms("ran 1500 m in four minutes at 5 V, 50% of the time")] == [
        ("1500", "m"), ("4", "minute"), ("5", "V"), ("50", "%")]  # 1500 m is a length, not a year; V no name
    contexts = ["The KTP-7 is the standard teach pendant: a 7-inch colour touchscreen with hard keys. "
                "It connects to the cabinet with a 10 m cable (20 m optional)."]
    question = "How long is the standard teach pendant cable?"
    invented = judge_answer(question, "How long is the standard teach pendant cable: 7 m.", contexts, embed=embed)
    assert "'7 m' appears in no context" in invented.reason and not invented.grounded and not invented.auto_accept
    right = judge_answer(question, "How long is the standard teach pendant cable: 10 m.", contexts, embed=embed)
    # The margin is the fitted model's (0.36 under the model of 18:35Z, 0.26 under 21:38Z's, 0.18
    # beside the reader of the question, which reads "10 m" as a weak answer here): the unit check
    # is what makes it, with unsupported_atom set on the invented length only.
    assert invented.features["unsupported_atom"] == 1.0 and right.features["unsupported_atom"] == 0.0
    assert right.grounded and right.p_supported > invented.p_supported + 0.15


def test_a_register_in_brackets_is_part_of_the_claim_not_a_citation(embed) -> None:  # type: ignore[no-untyped-def]
    cited = answer_claims("", "Seals are inspected monthly[1] and replaced yearly [2].")
    assert cited and not any("[" in c.text for c in cited)  # citations, with a space or without
    contexts = ["The output UO[6] FAULT is ON while any alarm of PAUSE or higher severity is active, "
                "so a PLC can tell warnings from real stops."]
    question = "Which output signal lets a PLC see that an alarm of PAUSE or higher is active?"
    turned = judge_answer(question, "The output UO[6] FAULT is OFF while any alarm of PAUSE or higher severity is "
                          "active, so a PLC can tell warnings from real stops.", contexts, embed=embed)
    assert [c.text[:20] for c in turned.claims] == ["The output UO[6] FAU"]  # one claim, not cut at "[6]"
    assert not turned.auto_accept and not turned.grounded and "'OFF'" in turned.reason
    assert turned.claims[0].reversed == ("off", "on")  # a state in capitals is a word, not a name
    assert "'7' appears in no context" in judge_answer(question, "UO[7] FAULT", contexts, embed=embed).reason


def test_quoted_code_is_claimed_as_written_and_a_list_is_an_answer(embed) -> None:  # type: ignore[no-untyped-def]
    contexts = ["The expression ~x returns -(x + 1) for every integer x. Assigning i, x[i] = 1, 2 leaves x as [0, 2]."]
    (literal,) = [a for a in atoms('"-(x+1)"') if a.kind == "literal"]
    assert holds(literal, contexts[0]) and not holds(literal, "x + 1 is computed first")  # spaces aside, as written
    invented = judge_answer("What does ~x return?", '"-(x-1)"', contexts, embed=embed)
    assert "'-(x-1)'" in invented.reason and "in no context" in invented.reason and not invented.grounded
    assert not is_abstention("[0, 2]")  # a list, not a citation marker with nothing around it
    listed = judge_answer("What does x hold after i, x[i] = 1, 2?", "[0, 2]", contexts, embed=embed)
    assert listed.label != ABSTAINED and listed.grounded


def test_the_shipped_model_is_a_fitted_one_over_the_judge_s_signals() -> None:
    model = shipped_model()
    assert model.version.startswith("judge-") and 0.5 < model.accept_at < 1.0
    assert model.trained_on["builder"] == "bench/judge_set.py" and model.trained_on["answers"] > 1000
    assert JudgeModel.from_dict(model.to_dict()) == model
    # An invented name weighs against support, a supported answer's evidence for it.
    assert model.coefficients["unsupported_atom"] < 0 < model.coefficients["atom_support"] + model.coefficients["word_support"]
    # A phrase, a passage's sentence and a restated question each have weights of their own.
    assert set(model.by_form) == {"phrase", "sentence", "restated"}
    assert all(model.trained_on["answers_by_form"][form] > 300 for form in model.by_form)


def test_an_answer_s_form_is_read_from_its_words_and_the_question_s() -> None:
    from services.judging.model import answer_form

    question = "Where does the maker of the robot arm have its head office?"
    contexts = ["The maker of the robot arm is headquartered in Osaka. Its plant is in Kobe, by the port."]
    forms = {answer: answer_form(read_answer(question, answer, contexts, embed=None).features) for answer in (
        "Osaka", "in Osaka, close to the port", "The maker of the robot arm has its head office in Osaka.",
        "Its plant is in Kobe, by the port, and the maker is headquartered in Osaka.",
        # Passage sentences that hold the question's words between them, none restating it.
        "The maker builds the robot arm in Kobe. Its head office is in Osaka.")}
    assert list(forms.values()) == ["phrase", "phrase", "restated", "sentence", "sentence"]


def test_the_reason_always_agrees_with_the_label(embed) -> None:  # type: ignore[no-untyped-def]
    answers = ["Osaka", "Kobe", "Nagoya", "The maker of the robot arm is headquartered in Osaka, close to the port.",
               "The maker of the robot arm has its head office in Kobe.", "Its largest plant is in Nagoya, where 4,800 people work.",
               "The smallest plant is in Nagoya.", "The robot arm is serviced every 6 months.", "I don't know."]
    for answer in answers:
        verdict = judge_answer(QUESTION, answer, CONTEXTS, embed=embed)
        praised = "is in its contexts" in verdict.reason
        assert praised == (verdict.label == SUPPORTED), (answer, verdict.label, verdict.reason)
        if verdict.auto_accept:
            assert verdict.label == SUPPORTED and verdict.grounded


FOUNDING = ["Kestrel Robotics was founded in 1998 by Mika Laine in Tampere. The company makes welding arms and "
            "employs 400 people."]


@pytest.mark.parametrize(("question", "right", "wrong", "asked"), [
    ("Who founded Kestrel Robotics?", "Mika Laine", "1998", "person"),
    ("Where was Kestrel Robotics founded?", "Tampere", "1998", "place"),
    ("When was Kestrel Robotics founded?", "1998", "Mika Laine", "time"),
    ("How many people does Kestrel Robotics employ?", "400", "Tampere", "quantity"),
])
def test_a_grounded_phrase_of_the_wrong_kind_never_skips_review(embed, question: str, right: str, wrong: str,  # type: ignore[no-untyped-def]
                                                                asked: str) -> None:
    # Every word of the wrong answer is in the passage, beside the question's words: only its
    # kind says it does not answer. It is held for review, below the right answer, and told why.
    held = judge_answer(question, wrong, FOUNDING, embed=embed)
    assert held.features["type_fit"] == 0.0 and held.grounded
    assert held.label != SUPPORTED and not held.auto_accept  # the cap holds it; the reader may call it wrong
    assert held.p_supported <= WRONG_KIND_CAP < judge_answer(question, right, FOUNDING, embed=embed).p_supported
    assert f"the question asks for a {asked}; the answer gives none" in held.reason


MOTOR = ["The press motor stops when the guard door opens. It restarts after a 30 second delay once the door is shut."]


@pytest.mark.parametrize(("question", "answer"), [
    ("When does the press motor stop?", "When the guard door opens."),
    ("When should I shut the guard door?", "before restarting the press motor"),
])
def test_a_condition_answering_when_is_not_held_as_the_wrong_kind(embed, question: str, answer: str) -> None:  # type: ignore[no-untyped-def]
    # "When ...?" is answered by the event a time follows, and "When should I ...?" asks in what
    # case: neither answer is capped as giving no time.
    verdict = judge_answer(question, answer, MOTOR, embed=embed)
    assert verdict.features["type_fit"] >= 0.5
    assert verdict.p_supported > WRONG_KIND_CAP and "the question asks for a" not in verdict.reason


def test_a_restatement_adding_nothing_is_read_against_its_contexts_and_never_skips_review(embed) -> None:  # type: ignore[no-untyped-def]
    # A search-style question naming its own answer, restated with it: nothing is added, so its
    # words are what the contexts must support; it is held at the cap, never auto-accepted.
    question = "characteristic polynomial coefficients of a square matrix"
    answer = "Characteristic polynomial coefficients of a square matrix: characteristic polynomial."
    on_topic = ["numpy.poly returns the coefficients of the characteristic polynomial of a square matrix. "
                "The leading coefficient is one."]
    held = judge_answer(question, answer, on_topic, embed=embed)
    assert held.p_supported == NOTHING_ADDED_CAP and held.label == UNCERTAIN and not held.auto_accept
    assert "only restates the question" in held.reason
    off_topic = judge_answer(question, answer, CONTEXTS, embed=embed)
    assert off_topic.p_supported < held.p_supported - 0.2  # no context speaks of what it repeats


def test_a_concise_answer_to_a_negated_question_is_not_read_as_its_opposite(embed) -> None:  # type: ignore[no-untyped-def]
    # The contradiction rules read a statement against the question it restates; a concise
    # answer restates nothing, so "an error is raised" does not "state the opposite" of a
    # question asking what happens when something does not hold.
    question = "split an array into three equal parts - what if it doesn't divide evenly?"
    contexts = ["If indices_or_sections is an integer N, the array will be divided into N equal arrays along axis. "
                "If such a split is not possible, an error is raised."]
    concise = judge_answer(question, "an error is raised", contexts, embed=embed)
    assert concise.features["contradiction"] == 0.0 and "opposite" not in concise.reason
    # A sentence restating the question is still read against it.
    stated = judge_answer(question, "The array divides evenly into three equal parts.", contexts, embed=embed)
    assert stated.features["contradiction"] > 0.0
    # A sentence giving what happens then is no contradiction: the question's "doesn't" sits in
    # its condition and asks nothing.
    consequence = judge_answer(question, "An error is raised.", contexts, embed=embed)
    assert consequence.features["contradiction"] == 0.0 and "opposite" not in consequence.reason


def test_a_negation_written_another_way_is_not_a_reversal(embed) -> None:  # type: ignore[no-untyped-def]
    question = "Why doesn't str.replace change my string?"
    contexts = ["Strings are immutable in Python, so a method such as str.replace cannot change the string it is "
                "called on; it returns a new string instead."]
    # Each right answer against the one turning it around in its own form (a phrase of eight words
    # or fewer, a restated question): the fitted model weighs a reversal per form
    # (services.judging.model), so a phrase and a restatement meet only by their forms' calibration.
    for right, turned_around in (("It can't change it because strings are immutable.",
                                  "It can change it because strings are immutable."),
                                 ("Str.replace doesn't change the string because strings are immutable.",
                                  "Str.replace can change the string because strings are immutable.")):
        turned = judge_answer(question, turned_around, contexts, embed=embed)
        assert turned.features["reversal"] == 1.0 and "'cannot'" in turned.reason and turned.label != SUPPORTED
        verdict = judge_answer(question, right, contexts, embed=embed)
        assert verdict.features["reversal"] == 0.0 and verdict.features["contradiction"] == 0.0, verdict.reason
        # No reversal is charged to it: above the answer it turns around, by the fitted model's
        # margin (0.03 for the phrase, 0.18 for the restatement, 2026-12-07T18:20Z).
        assert verdict.p_supported > turned.p_supported and verdict.label != UNSUPPORTED


def test_a_sentence_opening_with_a_pronoun_speaks_of_what_the_sentence_before_named(embed) -> None:  # type: ignore[no-untyped-def]
    # "It is also known as the Cosine Bell." names no word of the question; its "It" is the
    # Hann window of the sentence before, so the answer there sits beside what is asked.
    question = "What is another name for the Hann window?"
    contexts = ["The Hann window is a taper formed by using a weighted cosine. It is also known as the Cosine Bell. "
                "The Hamming window, named for R. W. Hamming, was proposed to reduce the first side lobe. "
                "Blackman proposed a window with three cosine terms."]
    right = judge_answer(question, "Cosine Bell", contexts, embed=embed)
    # Its sentence names no question word itself: locality is 0 unless "It" stands for the Hann window.
    assert right.features["question_coverage"] > 0.5 and right.features["locality"] > 0.2
    for other in ("Blackman", "R. W. Hamming"):  # grounded, in sentences that do not say it
        assert right.p_supported > judge_answer(question, other, contexts, embed=embed).p_supported


def test_a_concise_claim_is_not_embedded_with_its_question(embed) -> None:  # type: ignore[no-untyped-def]
    # Read with its question, a concise claim is its question to the model (the pair's cosine to
    # the question is over 0.7 for 99% of the development set's concise answers): embedding
    # each pair was model work intake paid for every record.
    asked: list[str] = []

    def recording(texts: list[str]):  # type: ignore[no-untyped-def]
        asked.extend(texts)
        return embed(texts)

    verdict = judge_answer(QUESTION, "Osaka", CONTEXTS, embed=recording)
    assert QUESTION in asked and not any(text.startswith(QUESTION) and text != QUESTION for text in asked)
    assert verdict.features["relevance"] == 1.0 and verdict.features["similarity"] > 0.0
    sentence = "The maker of the robot arm is headquartered in Osaka, close to the port."
    judge_answer(QUESTION, sentence, CONTEXTS, embed=recording)
    assert sentence in asked  # a sentence is read as itself


def test_an_answer_is_read_near_the_question_within_its_clause(embed) -> None:  # type: ignore[no-untyped-def]
    # One sentence, two clauses, two subjects: the option its own clause pairs with the question
    # wins, though the other sits nearer some of the question's words across the semicolon.
    question = "Which stop category does the pendant E-stop use, category 0 or category 1?"
    contexts = ["The external E-stop and fence inputs are configured as category 1 by default "
                "(`$SAF_CFG.$ESTOP_CAT = 1`); the pendant E-stop is always category 0. Brakes wear with every stop."]
    right = judge_answer(question, "category 0", contexts, embed=embed)
    wrong = judge_answer(question, "category 1", contexts, embed=embed)
    assert right.features["locality"] > wrong.features["locality"]
    assert right.p_supported > wrong.p_supported and not wrong.auto_accept


KESTREL = ("Kestrel Robotics was founded in 1987 by Mika Tanaka. The company has its head office in Osaka and a "
           "European service centre in Düsseldorf. Its KX series arms are built in the Kobe plant.")


def test_a_name_the_question_holds_is_what_it_asks_about_not_a_rival_answer(embed) -> None:  # type: ignore[no-untyped-def]
    # 'Robotics' sits next to the question's words by being one of them: it was every answer's rival.
    verdict = judge_answer("Who founded Kestrel Robotics?", "Mika Tanaka", [KESTREL], embed=embed)
    assert verdict.features["locality_margin"] >= 0
    assert "sits nearer" not in verdict.reason


def test_the_locality_reason_names_the_nearer_name_and_its_context(embed) -> None:  # type: ignore[no-untyped-def]
    verdict = judge_answer("In which city are Kestrel Robotics' arms built?", "Osaka", ["Line 3 runs two shifts.", KESTREL],
                           embed=embed)
    assert verdict.label != SUPPORTED
    assert verdict.reason.endswith("the contexts name the answer, but 'Kobe' sits nearer what the question asks (context 2)")


@pytest.mark.parametrize("gap", [" ", "\n", "\t"])
def test_a_semicolon_ends_a_clause_whatever_whitespace_follows_it(embed, gap: str) -> None:  # type: ignore[no-untyped-def]
    # A line break after the semicolon (a wrapped list item, a docstring) ends the clause as a space does.
    question = "Which stop category does the pendant E-stop use, category 0 or category 1?"
    contexts = [f"The external E-stop and fence inputs are configured as category 1 by default;{gap}"
                "the pendant E-stop is always category 0."]
    right = judge_answer(question, "category 0", contexts, embed=embed)
    wrong = judge_answer(question, "category 1", contexts, embed=embed)
    assert right.features["locality"] > wrong.features["locality"]


def test_a_reading_kept_for_the_same_words_carries_nothing_of_the_embedder_it_met(embed) -> None:  # type: ignore[no-untyped-def]
    """The words' reading is kept between calls (intake reads each answer twice): a reading with
    vectors must not leave its semantic signals in the kept one, nor a model's verdict."""
    answer = "The maker of the robot arm has its head office in Osaka."
    with_vectors = read_answer(QUESTION, answer, CONTEXTS, embed=embed, model_support=0.9)
    words_only = read_answer(QUESTION, answer, CONTEXTS, embed=None)
    assert with_vectors.features["similarity"] > 0 and with_vectors.features["model_log_odds"] > 0
    assert words_only.features["similarity"] == 0.0 and words_only.features["model_log_odds"] == 0.0
    semantic = ("similarity", "relevance", "evidence_margin", "evidence_relevance", "sentence_relevance", "evidence_nearness",
                "reader", "model_log_odds")
    assert {k: v for k, v in with_vectors.features.items() if k not in semantic} \
        == {k: v for k, v in words_only.features.items() if k not in semantic}


class _Recorder:
    """An embedder writing down the texts it is asked to read alone (sentences read in context aside)."""

    def __init__(self) -> None:
        self.alone: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.alone += texts
        return np.ones((len(texts), 4), dtype=np.float32) / 2

    def in_context(self, contexts: Sequence[str], sentences: Sequence[Any]) -> np.ndarray:
        return np.ones((len(sentences), 4), dtype=np.float32) / 2


@pytest.mark.parametrize(("question", "answer"), [
    (QUESTION, "Osaka"),
    (QUESTION, "The maker of the robot arm has its head office in Kobe."),
    (QUESTION, "Fanuc makes it. Its head office is in Osaka, and its largest plant is in Nagoya."),
    ("Is the arm serviced every 6 months or every 12 months?", "every 6 months"),
    ("Is the arm serviced every 6 months or every 12 months?", "The arm is serviced every 6 months."),
    (QUESTION, "I don't know."),
    (QUESTION, ""),
    ("Does the maker of the robot arm have its head office in Osaka?", "Yes."),
    ("Does the maker of the robot arm have its head office in Osaka?", "No, in Nagoya."),
])
def test_what_an_answer_is_read_alone_for_is_known_before_its_contexts_are(question: str, answer: str) -> None:
    """Intake encodes these with its batch's contexts, before CRAG picks the contexts the judge
    reads (services.intake.batch): whatever the contexts, the judge reads nothing else alone."""
    known = set(texts_read_alone(question, answer))
    for contexts in (CONTEXTS, CONTEXTS[:1], CONTEXTS[1:], []):
        recorder = _Recorder()
        judge_answer(question, answer, contexts, embed=recorder)
        answer_relevance(question, answer, recorder)
        assert set(recorder.alone) <= known, set(recorder.alone) - known


def test_evidence_relevance_reads_the_context_sentence_so_echoing_the_question_earns_nothing(embed) -> None:  # type: ignore[no-untyped-def]
    def relevance(answer: str) -> float:
        return read_answer(QUESTION, answer, CONTEXTS, embed=embed).features["evidence_relevance"]

    right, wrong = relevance("Osaka"), relevance("Nagoya")
    assert right > wrong  # Osaka's sentence is about the head office, Nagoya's about a plant
    # A sentence quoting the same evidence reads as its concise answer does, and the question
    # restated around the wrong name gains nothing for its echo.
    assert relevance("The maker of the robot arm is headquartered in Osaka.") == pytest.approx(right)
    assert relevance("The maker of the robot arm has its head office in Nagoya.") == pytest.approx(wrong)


def test_a_name_the_question_gives_is_not_invented_by_a_restatement_read_whole(embed) -> None:  # type: ignore[no-untyped-def]
    # The restatement adds no word to its question, so it is read whole: its words are what the
    # contexts must hold. "Python" is not among them, and is the question's, not the answer's.
    question = "Does Python have a literal syntax for complex numbers with a real part?"
    contexts = ["There are three types of numeric literals: integers, floating point numbers, and imaginary "
                "numbers. There are no complex literals (complex numbers can be formed by adding a real number "
                "and an imaginary number)."]
    verdict = judge_answer(question, f"{question[:-1]}: There are no complex literals.", contexts, embed=embed)
    assert verdict.features["unsupported_atom"] == 0.0 and "'Python' appears in no context" not in verdict.reason
    invented = judge_answer(question, "Does Python have a literal syntax for complex numbers: yes, as in Cython.",
                            contexts, embed=embed)
    assert invented.features["unsupported_atom"] == 1.0 and "'Cython' appears in no context" in invented.reason


def test_a_sentence_answer_is_as_relevant_as_its_evidence_a_concise_one_picks_a_phrase(embed) -> None:  # type: ignore[no-untyped-def]
    def read(answer: str, contexts: list[str]) -> dict[str, float]:
        return read_answer(QUESTION, answer, contexts, embed=embed).features

    sentence = read("The maker of the robot arm is headquartered in Osaka.", CONTEXTS)
    concise = read("Osaka", CONTEXTS)
    assert sentence["sentence_relevance"] == sentence["evidence_relevance"] > 0.5
    assert concise["sentence_relevance"] == 0.0 < concise["evidence_relevance"]
    # The passage that answers was not retrieved: the sentence of another one that names most of
    # the question is grounded word for word, and about something else.
    missed = ["Line 3 runs two shifts. The robot arm is serviced every 6 months by its maker."]
    elsewhere = read("The robot arm is serviced every 6 months by its maker.", missed)
    assert elsewhere["word_support"] == 1.0
    assert elsewhere["sentence_relevance"] < sentence["sentence_relevance"] - 0.1
    assert shipped_model().coefficients["sentence_relevance"] > 0


def test_a_pronoun_stands_for_the_subject_before_it_not_every_name_of_that_sentence(embed) -> None:  # type: ignore[no-untyped-def]
    # "Its KX series arms ..." follows "The company has its head office in Osaka ...": "Its" is the
    # company's, so 'KX' does not sit beside "head office" and was never a rival to "Osaka".
    question = "Which city is the head office of Kestrel Robotics in?"
    right = judge_answer(question, "Osaka", [KESTREL], embed=embed)
    assert right.features["locality_margin"] >= 0 and "sits nearer" not in right.reason
    wrong = judge_answer(question, "Kestrel Robotics has its head office in Kobe.", [KESTREL], embed=embed)
    assert wrong.reason.endswith("but 'Osaka' sits nearer what the question asks (context 1)")
    assert right.p_supported > wrong.p_supported


def test_the_company_stands_for_the_company_named_before_and_words_every_sentence_names_weigh_little(embed) -> None:  # type: ignore[no-untyped-def]
    # "The company has ..." speaks of Kestrel Robotics as "Its" does, so every sentence names the
    # company and only "plant" tells which city answers: 'Mika' (beside "Kestrel Robotics" in the
    # first sentence) and 'KX' (beside "Its") were named nearer than 'Kobe', beside "plant".
    question = "Where is the plant of Kestrel Robotics?"
    right = judge_answer(question, "Kobe", [KESTREL], embed=embed)
    wrong = judge_answer(question, "Osaka", [KESTREL], embed=embed)
    assert right.features["locality_margin"] > 0 and "sits nearer" not in right.reason
    assert wrong.reason.endswith("but 'Kobe' sits nearer what the question asks (context 1)")
    assert right.p_supported > wrong.p_supported


def test_a_definite_description_refers_back_a_name_does_not() -> None:
    from services.judging.context_sentences import context_sentences

    first, second, third = context_sentences(["Kestrel Robotics was founded by Mika Tanaka. The company has its "
                                              "head office in Osaka. The Hann window is a taper."])
    assert (first.antecedent, second.antecedent, third.antecedent) == ("", "Kestrel Robotics", "")


def test_a_parenthesis_wrapped_onto_the_next_line_goes_on_with_its_sentence_a_list_item_does_not(embed) -> None:  # type: ignore[no-untyped-def]
    from services.judging.context_sentences import context_sentences

    wrapped = ("There are three types of numeric literals.  There are no complex literals\n"
               "(complex numbers can be formed by adding a real number and an\nimaginary number).\n"
               "Options are read in order\n(a) from the file,\n(ii) from the command line.")
    assert [s.text for s in context_sentences([wrapped])] == [
        "There are three types of numeric literals.",
        "There are no complex literals\n(complex numbers can be formed by adding a real number and an\nimaginary number).",
        "Options are read in order", "(a) from the file,", "(ii) from the command line."]
    # the yes/no reply reads the sentence whole: its "no" is in the context, not turned
    yes = judge_answer("Are there no complex literals (complex numbers can be formed by adding a real number and an "
                       "imaginary number)?", "Yes", [wrapped], embed=embed)
    assert yes.p_supported == 0.5, yes.reason


def test_question_words_weigh_by_how_few_context_sentences_name_them() -> None:
    from services.judging._lexical import query_terms
    from services.judging.context_sentences import context_sentences
    from services.judging.evidence import asked_weights

    pool = context_sentences(["Kestrel Robotics has a plant in Kobe. Kestrel Robotics has an office in Osaka."])
    terms = query_terms("Is the plant of Kestrel on the moon?")
    weights = asked_weights(terms, pool)
    assert weights["plant"] > weights["kestrel"] > 0 and weights["moon"] == weights["plant"]
    alone = asked_weights(terms, pool[:1])
    assert len(set(alone.values())) == 1  # one sentence: the plain mean, as before


ARGMAX = "Does argmax return the first occurrence of the maximum?"
ARGMAX_DOC = ["Returns the indices of the maximum values along an axis. In case of multiple occurrences of "
              "the maximum values, the indices corresponding to the first occurrence are returned."]


def test_yes_or_no_says_which_way_an_answer_goes_not_a_word_to_find(embed) -> None:  # type: ignore[no-untyped-def]
    # "Yes" is in no context, and was once the reason a right answer scored 0.005.
    right = judge_answer(ARGMAX, "Yes, it returns the indices of the first occurrence.", ARGMAX_DOC, embed=embed)
    assert "Yes" not in right.unsupported_words and right.p_supported >= 0.5, right.reason
    # What follows is the claim: what it invents is still the reason.
    invented = judge_answer(ARGMAX, "Yes, it returns the first occurrence, as MATLAB does.", ARGMAX_DOC,
                            embed=embed)
    assert invented.features["unsupported_atom"] == 1.0 and "'MATLAB' appears in no context" in invented.reason
    # "No checking is performed" negates with its first word: it is not a bare no.
    assert answer_claims(ARGMAX, "No checking is performed.")[0].text == "No checking is performed."


@pytest.mark.parametrize("reply", ["Yes.", "no", "**No**"])
def test_a_bare_yes_or_no_is_read_as_the_question_s_statement_and_never_skips_review(embed, reply: str) -> None:  # type: ignore[no-untyped-def]
    verdict = judge_answer(ARGMAX, reply, ARGMAX_DOC, embed=embed)
    assert verdict.label == UNCERTAIN and verdict.p_supported == NOTHING_ADDED_CAP
    assert f"a bare '{reply.strip('*.').lower()}'" in verdict.reason and verdict.unsupported_words == ()
    assert "first occurrence" in verdict.claims[0].evidence  # the sentence a reviewer reads it against
    # Only a yes/no question has a bare yes for an answer.
    assert "'Yes' appears in no context" in judge_answer("Which function returns the first occurrence?", "Yes.",
                                                         ARGMAX_DOC, embed=embed).reason


def test_the_question_s_own_words_are_not_shown_as_invented_by_a_restatement(embed) -> None:  # type: ignore[no-untyped-def]
    # The docstring never names its function: "Argmax" is the question's premise, not the answer's invention.
    verdict = judge_answer(ARGMAX, "Argmax returns the first occurrence of the maximum.", ARGMAX_DOC, embed=embed)
    assert "only restates the question" in verdict.reason and verdict.unsupported_words == ()
    assert verdict.features["word_support"] < 1.0  # the signal still counts what the contexts lack


SENTENCE = "The head office is in Osaka."


@pytest.mark.parametrize(("dressed", "plain"), [
    ("According to the provided context, the head office is in Osaka.", SENTENCE),
    ("Based on the documents, the head office is in Osaka.", SENTENCE),
    ("The retrieved passages state that the head office is in Osaka [1].", SENTENCE),
    ("It seems that the head office is in Osaka.", SENTENCE),
    ("The head office is in Osaka. Let me know if you need anything else!", SENTENCE),
    ("The head office is in Osaka (source: context 1).", SENTENCE),
    ("The head office is in Osaka, per the context.", SENTENCE),
    ("The head office is in Osaka.\nSources: [1]", SENTENCE),
    ("**Answer:** Osaka", "Osaka"),
])
def test_where_an_answer_says_it_got_it_and_its_courtesies_are_no_claims(embed, dressed: str, plain: str) -> None:  # type: ignore[no-untyped-def]
    # "According", "provided", "context", "seems", "Let" stand in no context: read as claims they
    # held a right answer at P 0.15, below the same answer without them.
    verdict = judge_answer(QUESTION, dressed, CONTEXTS, embed=embed)
    assert verdict.unsupported_words == (), verdict.reason
    assert verdict.p_supported == pytest.approx(judge_answer(QUESTION, plain, CONTEXTS, embed=embed).p_supported,
                                                 abs=0.01)
    # What it claims is still read: the invented name is the reason.
    invented = judge_answer(QUESTION, dressed.replace("Osaka", "Kobe"), CONTEXTS, embed=embed)
    assert "'Kobe' appears in no context" in invented.reason


def test_a_sentence_that_only_names_its_source_stays_a_claim() -> None:
    # Only an opener followed by the claim is cut: a date, or a source that is the answer, stays.
    for answer in ("In the 1990s, the office moved to Osaka.", "The manual.", "Results show that it lowers heat.",
                   "The steps are described in the manual.", "Open it in text mode (the default).",
                   "Calling aiterator.__anext__ returns an awaitable."):
        assert unframed(answer) == answer


def test_a_conditional_that_reads_like_a_courtesy_is_a_claim() -> None:
    answer = "Use nanmax. If you have any NaN values, max returns nan."
    assert unframed(answer) == answer
    assert unframed("Use nanmax. If you have any questions, let me know.") == "Use nanmax."


POP_DOC = ["list.pop([i]): Remove the item at the given position in the list, and return it. If no index is specified, "
           "a.pop() removes and returns the last item in the list."]


def test_a_negation_inside_the_context_s_condition_is_the_condition_s_not_the_answer_s(embed) -> None:  # type: ignore[no-untyped-def]
    question = "Which element does list.pop() remove when I don't pass an index?"
    right = judge_answer(question, "It removes and returns the last item in the list.", POP_DOC, embed=embed)
    assert right.features["reversal"] == 0.0 and right.grounded, right.reason
    # An answer stating the condition without its "no" still leaves it out.
    turned = judge_answer(question, "If an index is specified, it removes and returns the last item in the list.", POP_DOC,
                          embed=embed)
    assert turned.features["reversal"] == 1.0 and "leaves out the 'no'" in turned.reason
