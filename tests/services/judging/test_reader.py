"""The reader of the question: where a phrase stands in its sentence, what the model reads, and
that the shipped weights read which of a passage's phrases answers."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest

from services.judging import reader
from services.judging.features import read_answer
from services.judging.forms import answer_form
from services.judging.reader import MARKS, MAX_TOKENS, QUESTION_TOKENS, Phrase, PhraseReader, input_ids, phrase_in
from services.judging.vectors import cached_embedder
from services.retrieval.embedding import load_model, tokenizer_copy
from services.settings import get_settings

MODEL = "all-MiniLM-L6-v2"
PASSAGE = ("Kestrel Robotics was founded in 1998 by Mika Laine in Tampere. Its first product was a "
           "welding cell; today it builds palletizing arms for food plants.")


def test_a_phrase_is_the_shortest_span_holding_every_added_word_in_any_case() -> None:
    sentence = "The arm stops; the Safe Stop halts the arm when the guard door opens."
    found = phrase_in(sentence, ["guard", "door", "opens"])
    assert found == Phrase("The arm stops; the Safe Stop halts the arm when the ", "guard door opens", ".")
    assert phrase_in(sentence, ["safe", "halts"]) == Phrase("The arm stops; the ", "Safe Stop halts", " the arm when the guard door opens.")
    # Whole words only, and every word: a sentence lacking one holds no phrase to read.
    assert phrase_in(sentence, ["arms"]) is None
    assert phrase_in(sentence, ["guard", "window"]) is None
    assert phrase_in(sentence, []) is None


@pytest.mark.parametrize(("sentence", "word"), [
    ("arm, Arm; arm_id, forearm and ARM.", "arm"),  # an underscore and a longer word are not the word
    ("a a a", "a a"),  # occurrences overlapping a found one are not counted twice
    ("Café CAFÉ café-au-lait", "café"),
    ("İstanbul and istanbul", "istanbul"),  # "İ" lowers to two characters: read as the pattern reads it
    ("x1 x12 1x x", "x"),
])
def test_a_word_is_found_where_the_whole_word_pattern_finds_it(sentence: str, word: str) -> None:
    import re

    pattern = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)", re.IGNORECASE)
    assert reader._whole_words(sentence, word) == [m.span() for m in pattern.finditer(sentence)]


def test_the_input_marks_the_phrase_and_keeps_the_words_next_to_it_within_the_model_length() -> None:
    tokenizer, _ = tokenizer_copy(MODEL)
    long_question = " ".join(["robot"] * 80) + "?"
    before, after = "word " * 200, " tail" * 200
    ids, types = input_ids(tokenizer, long_question, Phrase(before + "near ", "Mika Laine", " next" + after))
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert len(ids) == len(types) == MAX_TOKENS
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    assert tokens[1:QUESTION_TOKENS + 1] == ["robot"] * QUESTION_TOKENS and tokens[QUESTION_TOKENS + 1] == "[SEP]"
    opening, closing = tokens.index(MARKS[0]), tokens.index(MARKS[1])
    assert tokens[opening - 1] == "near" and tokens[closing + 1] == "next"
    assert tokenizer.convert_tokens_to_string(tokens[opening + 1:closing]) == "mika laine"
    assert types == [0] * (QUESTION_TOKENS + 2) + [1] * (MAX_TOKENS - QUESTION_TOKENS - 2)
    # The shipped reader reads a window of the sentence: as many tokens on each side as it was fitted with.
    ids, types = input_ids(tokenizer, "Who founded it?", Phrase(before + "near ", "Mika Laine", " next" + after), 3)
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens[:9] == ["[CLS]", "who", "founded", "it", "?", "[SEP]", "word", "word", "near"]
    assert tokens[tokens.index(MARKS[1]):] == [MARKS[1], "next", "tail", "tail", "[SEP]"]
    assert tokenizer.convert_tokens_to_string(tokens[10:tokens.index(MARKS[1])]) == "mika laine"
    assert types == [0] * 6 + [1] * (len(ids) - 6)


def test_merged_updates_read_as_the_low_rank_model_they_were_fitted_as() -> None:
    import torch

    from bench.fit_reader import LowRank, logits

    torch.manual_seed(1)
    bert = LowRank.wrap(copy.deepcopy(load_model(MODEL)[0].auto_model)).eval()
    head = torch.nn.Linear(bert.config.hidden_size, 1)
    with torch.no_grad():
        for p in bert.parameters():
            if p.requires_grad:
                p.normal_(0, 0.02)  # the up matrices start at 0: make every update count
    weights = {name: p.detach().clone() for name, p in bert.named_parameters() if p.requires_grad}
    weights |= {"head.weight": head.weight.detach().clone(), "head.bias": head.bias.detach().clone()}
    phrases = [Phrase("Kestrel Robotics was founded in 1998 by ", "Mika Laine", " in Tampere."),
               Phrase("Kestrel Robotics was founded in 1998 by Mika Laine in ", "Tampere", ".")]
    with torch.inference_mode():
        fitted = logits(bert, head, tokenizer_copy(MODEL)[0], [("Who founded Kestrel Robotics?", p) for p in phrases])
    merged = PhraseReader(MODEL, weights)("Who founded Kestrel Robotics?", phrases)
    np.testing.assert_allclose(merged, fitted.numpy(), atol=1e-4)
    assert abs(merged[0] - merged[1]) > 1e-3  # the updates change what is read
    # The embedder's own model is a different object, untouched by the merge.
    assert not any("down" in name for name, _ in load_model(MODEL)[0].auto_model.named_parameters())


def test_the_shipped_reader_reads_which_of_two_places_the_question_asks_for() -> None:
    read = reader.shipped_reader(MODEL)
    assert read is not None
    sentences = "The maker of the robot arm is headquartered in Osaka, close to the port. Its largest plant is in Nagoya."
    places = [phrase_in(sentences, ["Osaka"]), phrase_in(sentences, ["Nagoya"])]
    head_office = read("The maker of the robot arm has its head office in what city?", places)
    plant = read("Where is the largest plant?", places)
    assert head_office[0] > head_office[1] and plant[1] > plant[0]


def test_a_batch_read_shortest_first_gives_each_pair_its_own_logit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading sorts the pairs by length and keeps only the latest few: each logit still goes back
    to its own pair, even in a call asking for more pairs than the reader keeps."""
    read = reader.shipped_reader(MODEL)
    assert read is not None
    questions = ["Who founded Kestrel Robotics?", "Where was Kestrel Robotics founded, and what did it make first?",
                 "When?", "What does the company build today for food plants and bakeries?"]
    phrases = [phrase_in(PASSAGE, [w]) for w in ("Mika Laine", "Tampere", "1998", "palletizing", "welding")]
    pairs = [(q, p) for q in questions for p in phrases if p is not None]
    alone = []
    for pair in pairs:
        read._read.clear()
        alone.append(read.read([pair])[0])
    read._read.clear()
    monkeypatch.setattr(reader, "_CACHE_SIZE", 3)
    together = read.read(pairs[::-1])[::-1]
    np.testing.assert_allclose(together, alone, atol=1e-4)
    assert len(set(np.round(alone, 3))) > len(pairs) // 2  # the pairs read differently: a mix-up would show
    assert len(read._read) == 3


def test_the_reader_signal_is_read_for_phrases_and_restatements_only(monkeypatch: pytest.MonkeyPatch) -> None:
    embed = cached_embedder(MODEL)
    question = "Who founded Kestrel Robotics?"
    right = read_answer(question, "Mika Laine", [PASSAGE], embed=embed).features["reader"]
    wrong = read_answer(question, "Tampere", [PASSAGE], embed=embed).features["reader"]
    assert -1.0 <= wrong < right <= 1.0
    restated = read_answer(question, "Kestrel Robotics was founded by Mika Laine.", [PASSAGE], embed=embed)
    assert restated.features["reader"] != 0.0
    sentence = read_answer(question, PASSAGE.split(". ")[1], [PASSAGE], embed=embed)
    assert sentence.features["reader"] == 0.0  # a passage's sentence picks no phrase
    # ...nor does one restating its question, whose additions span more words than a phrase has.
    safety = "The arm's safety controller stops every axis within 40 ms when the light curtain at the loading station is broken."
    asked = "What does the safety controller do when the light curtain is broken?"
    long_restatement = read_answer(asked, safety, [safety], embed=embed)
    assert answer_form(long_restatement.features) == "restated" and long_restatement.features["reader"] == 0.0
    short_restatement = read_answer(asked, "The safety controller stops every axis when the light curtain is broken.",
                                    [safety], embed=embed)
    assert answer_form(short_restatement.features) == "restated" and short_restatement.features["reader"] != 0.0
    # Without an embedder the judge has no model to read with, and a setting turns it off.
    assert read_answer(question, "Mika Laine", [PASSAGE], embed=None).features["reader"] == 0.0
    monkeypatch.setenv("JUDGE_READER", "false")
    get_settings.cache_clear()
    reader.shipped_reader.cache_clear()
    try:
        assert not get_settings().judge_reader
        assert reader.shipped_reader(MODEL) is None
        assert read_answer(question, "Tampere", [PASSAGE], embed=embed).features["reader"] == 0.0
        # ...and the judge reads with the fit made without it, as it read before the reader came.
        from services.judging import judge_answer
        from services.judging.model import shipped_model

        unread = shipped_model().without_reader
        assert unread is not None
        verdict = judge_answer(question, "Mika Laine", [PASSAGE], embed=embed)
        assert verdict.model_version == unread.version and verdict.features["reader"] == 0.0
    finally:
        monkeypatch.delenv("JUDGE_READER")
        get_settings.cache_clear()
        reader.shipped_reader.cache_clear()


def test_a_choice_reads_the_picked_option_against_the_other_one_each_as_the_answer() -> None:
    embed = cached_embedder(MODEL)
    sentences = "The maker of the robot arm is headquartered in Osaka, close to the port. Its largest plant is in Nagoya."
    question = "Where does the maker of the robot arm have its head office, Osaka or Nagoya?"
    right = read_answer(question, "Osaka", [sentences], embed=embed).features
    wrong = read_answer(question, "Nagoya", [sentences], embed=embed).features
    assert 0.0 < right["option_reader"] <= 1.0 and wrong["option_reader"] == pytest.approx(-right["option_reader"])
    # Read as the reader was fitted to read them: each option's logit where the answer would stand.
    read = reader.shipped_reader(MODEL)
    assert read is not None
    head_office, plant = sentences.split(" Its ")
    osaka, nagoya = read(question, [phrase_in(head_office, ["Osaka"]), phrase_in("Its " + plant, ["Nagoya"])])
    assert right["option_reader"] == pytest.approx(float(np.clip((osaka - nagoya) / 2.0, -1, 1)), abs=1e-6)
    # A restatement picks its option the same way; a question naming no options reads none.
    restated = read_answer(question, "The maker of the robot arm has its head office in Nagoya.", [sentences], embed=embed)
    assert restated.features["option_reader"] == pytest.approx(wrong["option_reader"])
    assert read_answer("Where is the head office?", "Osaka", [sentences], embed=embed).features["option_reader"] == 0.0
    assert read_answer(question, "Osaka", [sentences], embed=None).features["option_reader"] == 0.0


def test_an_answer_only_the_reader_lifts_to_the_threshold_is_held_and_told_why() -> None:
    from services.judging import judge_answer
    from services.judging.judge import acceptance_score
    from services.judging.model import shipped_model
    from services.judging.verdict import UNCERTAIN

    model, embed = shipped_model(), cached_embedder(MODEL)
    verdict = judge_answer("Who founded Kestrel Robotics?", "Mika Laine", [PASSAGE], embed=embed)
    without = acceptance_score(dict(verdict.features), verdict.p_supported, adds_nothing=False, model=model)
    assert verdict.features["reader"] > 0 and without < model.accept_at <= verdict.p_supported
    assert verdict.label == UNCERTAIN and not verdict.auto_accept
    assert f"supported, but {without:.2f} without the reader of the question" in verdict.reason
    # The model it is held by is the same fit without the reader: deaf to it.
    unread = model.without_reader
    assert unread is not None and unread.probability({**verdict.features, "reader": 1.0}) == \
        unread.probability({**verdict.features, "reader": -1.0})
    # A model fitted on rows no reader read (none stored beside it) is read as it is.
    assert acceptance_score(dict(verdict.features), 0.97, adds_nothing=False, model=replace(model, without_reader=None)) == 0.97


def test_the_weights_fitted_on_one_model_are_not_read_with_another(monkeypatch: pytest.MonkeyPatch) -> None:
    assert reader.shipped_reader("some/other-model") is None
    version = reader.reader_meta()["version"]
    assert reader.reader_meta()["model"] == reader.MODEL
    assert version in reader.reader_state(MODEL) and "fitted on all-MiniLM-L6-v2" in reader.reader_state(MODEL)
    assert "not read" in reader.reader_state("some/other-model")
    monkeypatch.setenv("JUDGE_READER", "false")
    get_settings.cache_clear()
    try:
        assert "off (JUDGE_READER=false)" in reader.reader_state(MODEL)
    finally:
        monkeypatch.delenv("JUDGE_READER")
        get_settings.cache_clear()


def test_judge_show_says_which_reader_the_judge_reads_with(clean_db) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from services.cli import app

    shown = CliRunner().invoke(app, ["judge", "show"])
    assert shown.exit_code == 0, shown.output
    assert "reader" in shown.output.splitlines()[-1] and reader.reader_meta()["version"] in shown.output
