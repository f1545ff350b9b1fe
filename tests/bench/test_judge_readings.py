"""The judge's signals kept between bench runs (bench/_judge_readings.py) are the signals the
judge reads, are read again once the judge's code changes, and decide as judge_answer does."""

from __future__ import annotations

import pytest

import bench._judge_readings as readings
from bench.judge_set import JudgeCase
from services.judging import judge_answer
from services.judging.judge import SUPPORTED, decide
from services.judging.model import shipped_model
from services.settings import get_settings

CONTEXTS = ["The robot arm is made by Fanuc, whose head office is in Oshino, Yamanashi.",
            "Its controller weighs 40 kg."]


def _case(answer: str, question: str = "Where is the maker's head office?") -> JudgeCase:
    return JudgeCase("handbook", "q1", "right_concise", "concise", question, answer, CONTEXTS, 1, "test")


def test_cached_signals_are_the_judges_and_decide_as_it_does(tmp_path, monkeypatch):
    monkeypatch.setattr(readings, "CACHE_DIR", tmp_path)
    model_name = get_settings().embedding_model
    asked = "Does the controller weigh 60 kg?"  # a bare reply, decided by the way the contexts take it
    cases = [_case("Oshino, Yamanashi"), _case("Kobe"), _case("Yes", asked), _case("No", asked)]
    first = readings.read_cases(cases, model_name=model_name)

    def unread(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise AssertionError("a cached case was read again")

    monkeypatch.setattr("services.judging.features.read_answer", unread)
    again = readings.read_cases(cases, model_name=model_name)
    assert again == first
    assert first[0].features != first[1].features
    assert first[1].features["unsupported_atom"] == 1.0  # "Kobe" is in no context
    assert [(r.bare_reply, r.reply_agrees) for r in first] == [(False, None), (False, None), (True, False), (True, True)]


def test_the_decision_from_stored_signals_is_judge_answers():
    from services.judging.vectors import cached_embedder

    model_name = get_settings().embedding_model
    embed = cached_embedder(model_name)
    model = shipped_model()
    for case in [*map(_case, ("Oshino, Yamanashi", "Kobe", "The head office of the maker is in Kobe.")),
                 _case("Yes", "Does the controller weigh 60 kg?"), _case("No", "Does the controller weigh 60 kg?")]:
        signals = readings.Reader(model_name, use_cache=False).read(case)
        verdict = judge_answer(case.question, case.answer, case.contexts, embed=embed)
        p, label = decide(signals.features, adds_nothing=signals.adds_nothing, model=model, reply_agrees=signals.reply_agrees)
        assert round(p, 4) == verdict.p_supported
        assert label == verdict.label
        assert (label == SUPPORTED) == verdict.auto_accept


def test_a_change_to_the_judge_starts_a_new_cache(tmp_path, monkeypatch):
    judging = tmp_path / "services" / "judging"
    judging.mkdir(parents=True)
    (judging / "rules.py").write_text("A = 1\n")
    monkeypatch.setattr(readings, "ROOT", tmp_path)
    monkeypatch.setattr(readings, "_SOURCES", (judging,))
    before = readings.judge_digest("model")
    assert readings.judge_digest("model") == before
    (judging / "rules.py").write_text("A = 2\n")
    assert readings.judge_digest("model") != before
    assert readings.judge_digest("other-model") != readings.judge_digest("model")


@pytest.mark.parametrize("line", ["{\"key\": \"k\", \"features\"", "not json"])
def test_a_line_cut_short_is_read_again(tmp_path, monkeypatch, line):
    monkeypatch.setattr(readings, "CACHE_DIR", tmp_path)
    model_name = get_settings().embedding_model
    reader = readings.Reader(model_name)
    reader.path.write_text(line + "\n", encoding="utf-8")
    signals = readings.Reader(model_name).read(_case("Kobe"))
    assert signals.features["unsupported_atom"] == 1.0  # read, not taken from the broken line
