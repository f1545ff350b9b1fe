"""The Search page under AppTest, on the real store and model."""

from __future__ import annotations

import json
from pathlib import Path

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def test_search_shows_hits_and_breakdown(clean_db, tmp_path):
    from services.corpus.ingest import ingest_paths

    (tmp_path / "alarm.md").write_text("# SRVO-062 Encoder backup lost\nReplace the battery pack, then remaster axis J2.")
    (tmp_path / "grease.md").write_text("# Reducer grease\nReplace J2 reducer grease every 20,000 hours.")
    ingest_paths([tmp_path])
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("app_pages/search.py").run()
    assert not at.exception and at.title[0].value == "Search the corpus"
    at.text_input(key="search.query").input("What does SRVO-062 mean?")
    at.button[0].click().run()
    assert not at.exception
    assert at.subheader[0].value.split(" - ")[0] in {"HIGH", "MEDIUM", "LOW", "VERY LOW"}
    frame = at.dataframe[0].value
    assert frame.iloc[0]["document"] == "alarm.md" and frame.iloc[0]["bm25 rank"] == 1
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    stacked = [s for s in specs if s["layout"].get("barmode") == "stack"][0]
    assert len(stacked["data"]) == 7  # one bar per weighted component


def test_empty_query_shows_an_error_not_a_traceback(clean_db):
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.switch_page("app_pages/search.py").run()
    at.text_input(key="search.query").input("   ")
    at.button[0].click().run()
    assert not at.exception and "empty" in at.error[0].value


def test_sidebar_says_plainly_that_no_reranker_runs(clean_db, monkeypatch):
    from services.settings import get_settings

    at = AppTest.from_file(APP, default_timeout=120).run()
    sidebar = [str(getattr(e, "value", "")) for e in at.sidebar]
    assert "Reranking — no reranker configured (set RERANKER_MODEL to a local cross-encoder)" in sidebar

    monkeypatch.setenv("RERANKER_MODEL", "/nowhere/cross-encoder")  # configured, but cannot be loaded here
    get_settings.cache_clear()
    try:
        at = AppTest.from_file(APP, default_timeout=120).run()
    finally:
        monkeypatch.delenv("RERANKER_MODEL")
        get_settings.cache_clear()
    sidebar = [str(getattr(e, "value", "")) for e in at.sidebar]
    assert any(s.startswith("Reranking — reranker '/nowhere/cross-encoder' could not be loaded") and s.endswith("reranking is off")
               for s in sidebar), sidebar
