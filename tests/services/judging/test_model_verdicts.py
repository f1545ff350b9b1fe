"""Models' verdicts in the judge's combination: an NLI cross-encoder by name, a language model's
reflection score. No NLI model ships offline, so the cross-encoder here is a tiny one built in
the test (random weights, real files, loaded by sentence-transformers like any other)."""

from __future__ import annotations

import numpy as np
import pytest

from services.errors import InputError
from services.judging import judge_answer
from services.judging.features import LOG_ODDS_LIMIT
from services.judging.model import PRIOR_WEIGHTS, fit, shipped_model
from services.judging.nli import nli_scorer

QUESTION = "Where does the maker of the robot arm have its head office?"
CONTEXTS = ["The maker of the robot arm is headquartered in Osaka, close to the port."]


def _tiny_cross_encoder(path, labels: dict[int, str]) -> str:  # type: ignore[no-untyped-def]
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "maker", "robot", "arm", "osaka", "kobe", "in", "is"]
    (path / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(path / "vocab.txt")).save_pretrained(path)
    config = BertConfig(vocab_size=len(words), hidden_size=8, num_hidden_layers=1, num_attention_heads=1,
                        intermediate_size=16, max_position_embeddings=64, num_labels=len(labels),
                        id2label=labels, label2id={v: k for k, v in labels.items()})
    BertForSequenceClassification(config).save_pretrained(path)
    return str(path)


def test_an_nli_model_named_in_settings_gives_entailment_probabilities_and_enters_the_verdict(tmp_path) -> None:  # type: ignore[no-untyped-def]
    entail = nli_scorer(_tiny_cross_encoder(tmp_path, {0: "contradiction", 1: "entailment", 2: "neutral"}))
    probabilities = entail([("The maker is in Osaka.", "Osaka"), ("The maker is in Osaka.", "Kobe")])
    assert probabilities.shape == (2,) and np.all((probabilities > 0) & (probabilities < 1))
    without = judge_answer(QUESTION, "Osaka", CONTEXTS)
    with_nli = judge_answer(QUESTION, "Osaka", CONTEXTS, entail=entail)
    assert without.features["nli_log_odds"] == 0.0
    assert with_nli.features["nli_log_odds"] != 0.0 and abs(with_nli.features["nli_log_odds"]) <= LOG_ODDS_LIMIT
    assert with_nli.p_supported != without.p_supported  # it moves P(supported), at the prior weight


def test_an_nli_model_without_an_entailment_label_is_refused_with_its_labels(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="no single entailment label"):
        nli_scorer(_tiny_cross_encoder(tmp_path, {0: "negative", 1: "positive"}))
    with pytest.raises(InputError, match="could not be loaded"):
        nli_scorer(str(tmp_path / "missing-model"))


def test_a_language_model_s_reflection_moves_p_supported_as_evidence_at_the_prior_weight() -> None:
    sure = judge_answer(QUESTION, "Osaka", CONTEXTS, model_support=0.95)
    doubtful = judge_answer(QUESTION, "Osaka", CONTEXTS, model_support=0.05)
    alone = judge_answer(QUESTION, "Osaka", CONTEXTS)
    assert doubtful.p_supported < alone.p_supported < sure.p_supported
    assert shipped_model().coefficients["model_log_odds"] == PRIOR_WEIGHTS["model_log_odds"]


def test_a_refit_keeps_the_prior_for_a_signal_that_never_varied_and_fits_one_that_did() -> None:
    rows = [{"word_support": float(i % 2), "model_log_odds": 0.0} for i in range(40)]
    labels = [i % 2 for i in range(40)]
    model = fit(rows, labels, version="t", accept_at=0.9, trained_on={})
    assert model.coefficients["model_log_odds"] == PRIOR_WEIGHTS["model_log_odds"]
    assert model.coefficients["word_support"] > 0
    varied = fit([{**r, "model_log_odds": 2.0 if y else -2.0} for r, y in zip(rows, labels)], labels,
                 version="t", accept_at=0.9, trained_on={})
    assert varied.coefficients["model_log_odds"] != PRIOR_WEIGHTS["model_log_odds"]


def test_a_fit_on_rows_the_reader_read_keeps_a_fit_without_it_with_its_own_threshold() -> None:
    rows = [{"word_support": float(i % 2), "reader": 0.8 if (i // 2) % 2 else -0.8,
             "option_reader": 0.5 if (i // 2) % 2 else -0.5} for i in range(80)]
    labels = [int(r["word_support"] == 1.0 and r["reader"] > 0) for r in rows]
    model = fit(rows, labels, version="t", accept_at=0.9, trained_on={}, accept_without_reader_at=0.95)
    unread = model.without_reader
    assert unread is not None and unread.version == "t/without-reader"
    assert model.coefficients["reader"] > 0 and model.coefficients["option_reader"] > 0
    assert unread.coefficients["reader"] == unread.coefficients["option_reader"] == 0.0
    assert (model.accept_at, unread.accept_at) == (0.9, 0.95)
    assert fit(rows, labels, version="t", accept_at=0.9, trained_on={}).without_reader.accept_at == 0.9  # type: ignore[union-attr]
    # A fit that is only ranked (a refit's folds) needs no twin, nor do rows the reader never read.
    assert fit(rows, labels, version="t", accept_at=0.9, trained_on={}, without_reader=False).without_reader is None
    unread_rows = [{k: v for k, v in r.items() if k not in ("reader", "option_reader")} for r in rows]
    assert fit(unread_rows, labels, version="t", accept_at=0.9, trained_on={}).without_reader is None


def test_every_signal_has_a_direction_and_the_fit_keeps_it() -> None:
    from services.judging.features import FEATURES
    from services.judging.model import SIGNS

    assert set(SIGNS) == set(FEATURES)
    # Question coverage that goes with wrong answers in a sample still cannot get a negative weight.
    rows = [{"question_coverage": float(i % 2), "word_support": float((i // 2) % 2)} for i in range(80)]
    labels = [int(r["word_support"] == 1.0 and r["question_coverage"] == 0.0) for r in rows]
    model = fit(rows, labels, version="t", accept_at=0.9, trained_on={})
    assert model.coefficients["question_coverage"] == 0.0 and model.coefficients["word_support"] > 0
    for name, sign in SIGNS.items():
        assert sign == 0 or model.coefficients[name] * sign >= 0, name
    for form, weights in shipped_model().by_form.items():
        for name, sign in SIGNS.items():
            assert sign == 0 or weights.coefficients[name] * sign >= 0, (form, name)


def _form_rows(form: str, n: int, signal: str) -> tuple[list[dict[str, float]], list[int]]:
    """n answers of one form whose label only `signal` tells."""
    shape = {"phrase": {"phrase": 1.0, "question_echo": 0.0}, "sentence": {"phrase": 0.0, "question_echo": 0.3},
             "restated": {"phrase": 0.0, "question_echo": 1.0}}[form]
    rows = [{**shape, "word_support": 0.5, "evidence_relevance": 0.5, signal: float(i % 2)} for i in range(n)]
    return rows, [i % 2 for i in range(n)]


def test_each_form_of_answer_gets_weights_of_its_own_where_it_has_the_answers_for_them() -> None:
    from services.judging.model import JudgeModel, answer_form

    sentences, sentence_labels = _form_rows("sentence", 80, "evidence_relevance")
    restated, restated_labels = _form_rows("restated", 80, "word_support")
    phrases, phrase_labels = _form_rows("phrase", 20, "word_support")  # too few for weights of their own
    model = fit(sentences + restated + phrases, sentence_labels + restated_labels + phrase_labels,
                version="t", accept_at=0.9, trained_on={})
    assert set(model.by_form) == {"sentence", "restated"}
    # In a sentence relevance tells right from wrong, in a restatement word support does: each
    # form's weights say so, where one pooled set would weigh both by halves.
    assert model.by_form["sentence"].coefficients["evidence_relevance"] > model.by_form["restated"].coefficients["evidence_relevance"]
    assert model.by_form["restated"].coefficients["word_support"] > model.by_form["sentence"].coefficients["word_support"]
    relevant = {**sentences[1], "evidence_relevance": 1.0, "word_support": 0.0}
    assert answer_form(relevant) == "sentence" and answer_form(phrases[0]) == "phrase"
    assert model.probability(relevant) > model.probability({**relevant, "evidence_relevance": 0.0}) + 0.3
    # A phrase, with no weights of its own, and signals stored before forms were read with the pooled weights.
    pooled = JudgeModel("p", model.coefficients, model.intercept, 0.9)
    assert model.probability(phrases[1]) == pooled.probability(phrases[1])
    legacy = {"word_support": 1.0, "evidence_relevance": 1.0}
    assert answer_form(legacy) is None and model.probability(legacy) == pooled.probability(legacy)
    assert JudgeModel.from_dict(model.to_dict()) == model


def test_a_model_naming_a_form_the_judge_does_not_read_is_refused() -> None:
    data = shipped_model().to_dict()
    data["by_form"]["question"] = data["by_form"].get("sentence", {"coefficients": {}, "intercept": 0.0})
    with pytest.raises(InputError, match="forms are phrase, sentence, restated"):
        type(shipped_model()).from_dict(data)
