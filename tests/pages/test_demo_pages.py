"""Pages over demo runs under AppTest: the Evaluate page evaluates the demo questions by itself,
and the Tuning page's calibration says how many of its verdicts are the answer key's."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from services.demo import answer_key, load_demo
from tests.pages._support import open_page

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture()
def demo(clean_db) -> None:  # type: ignore[no-untyped-def]
    questions = [q for q in answer_key() if q.query_id in ("q01", "q02", "q21")]
    load_demo(presets=("minimal", "research"), questions=questions)


def test_evaluate_offers_the_demo_questions_on_a_store_without_demo_runs(clean_db) -> None:
    at = open_page(AppTest.from_file(APP, default_timeout=300), "evaluate", "Evaluate retrieval")
    assert "evaluate the demo questions" in at.info[0].value
    assert not at.get("plotly_chart")


def test_with_demo_runs_evaluate_shows_the_demo_questions_per_mode(demo) -> None:  # type: ignore[no-untyped-def]
    at = open_page(AppTest.from_file(APP, default_timeout=300), "evaluate", "Evaluate retrieval")
    table = next(d.value for d in at.dataframe if "mode" in d.value.columns)
    assert table["mode"].tolist() == ["bm25", "dense", "hybrid"] and set(table["queries"]) == {20}
    assert any("the demo questions and their answer key" in t.value for t in at.text)
    assert len(at.get("plotly_chart")) == 2


def test_tuning_calibration_names_the_answer_key_verdicts(demo) -> None:  # type: ignore[no-untyped-def]
    at = open_page(AppTest.from_file(APP, default_timeout=300), "tuning", "Tune confidence weights")
    at.session_state["tuning.tab"] = "Calibration"
    at.run()
    assert not at.exception, at.exception
    assert any(c.value.startswith("6 of these verdicts are answer-key verdicts") for c in at.caption)
