"""The Ask page's loop controls (issue 30) under AppTest, on the real store and the offline
backend: the adaptive cut-off switch and its stop reason, and an answer from the cache."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from services.answering.runs import load_run
from tests.pages._support import open_page
from tests.pages.test_ask_page import corpus  # noqa: F401  (fixture)

APP = str(Path(__file__).resolve().parents[2] / "app.py")
QUESTION = "What does SRVO-062 mean?"


def _ask(at: AppTest) -> AppTest:
    at.text_area(key="ask.query").input(QUESTION)
    at.button(key="ask.submit").click().run()
    assert not at.exception and not at.error
    return at


def test_the_adaptive_switch_cuts_and_the_page_says_where_it_stopped(corpus):  # noqa: F811
    at = open_page(AppTest.from_file(APP, default_timeout=300), "ask", "Ask")
    switch = at.toggle(key="ask.adaptive_k.balanced")
    assert switch.value is False  # balanced reads every chunk unless asked
    switch.set_value(True)
    run = load_run(_ask(at).session_state["ask.run_id"])
    assert run.config["adaptive_k"] is True
    cuts = [e for e in run.events if e.event_type == "adaptive_cut"]
    assert cuts and all(e.data["stop_reason"] in ("threshold", "max_k", "no_results") for e in cuts)
    assert "**Adaptive cut-off (adaptive_k) was on**" in [m.value for m in at.markdown]
    shown = [t.value for t in at.text]
    for cut in cuts:
        assert any(line.startswith(f"iteration {cut.data['iteration']}: reading ") and
                   f"stopped at {cut.data['stop_reason']}" in line for line in shown)

    at.toggle(key="ask.adaptive_k.balanced").set_value(False)
    plain = load_run(_ask(at).session_state["ask.run_id"])
    assert plain.config["adaptive_k"] is False and not [e for e in plain.events if e.event_type == "adaptive_cut"]


def test_a_repeated_question_is_answered_from_the_cache_and_the_page_says_so(corpus, engine):  # noqa: F811
    at = _ask(open_page(AppTest.from_file(APP, default_timeout=300), "ask", "Ask"))
    first = at.session_state["ask.run_id"]
    assert not [i for i in at.info if "from the cache" in i.value]
    with engine.begin() as conn:  # the offline judge rarely auto-accepts; set the state under test directly
        conn.execute(text("UPDATE runs SET status = 'auto_accepted' WHERE id = :id"), {"id": first})
    _ask(at)
    assert at.session_state["ask.run_id"] == first
    (notice,) = [i.value for i in at.info if "Answered from the cache" in i.value]
    assert f"run {first}" in notice and "nothing has been ingested since" in notice
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM runs")).scalar_one() == 1


def test_the_gaps_switch_starts_at_the_presets_setting_and_the_run_is_answered_with_it(corpus):  # noqa: F811
    at = open_page(AppTest.from_file(APP, default_timeout=300), "ask", "Ask")
    assert at.toggle(key="ask.gaps_as_context.balanced").value is False
    at.selectbox(key="ask.preset").set_value("as-written").run()
    switch = at.toggle(key="ask.gaps_as_context.as-written")
    assert switch.value is True  # seed 000 as written passes the gaps on as context
    switch.set_value(False)
    run = load_run(_ask(at).session_state["ask.run_id"])
    assert run.preset == "as-written" and run.config["gaps_as_context"] is False
    assert not [e for e in run.events if e.event_type == "gap_context"]
