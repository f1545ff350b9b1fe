"""The Start here page and the demo offer under AppTest, on the real store and pipeline: what
the workbench does, four things to try with links, where each page fits, and the demo runs
loaded and removed from the pages."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from services.demo import answer_key, demo_status, load_demo
from tests.pages._support import open_page

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")


def _home() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600).run()  # the default page
    assert not at.exception, at.exception
    assert at.title[0].value == "Start here"
    return at


def _links(at: AppTest) -> list[str]:
    return [link.proto.page for link in at.get("page_link")]


def test_the_first_screen_says_what_it_does_what_to_try_and_where_pages_fit(clean_db) -> None:
    at = _home()
    text = " ".join(m.value for m in at.markdown)
    assert "review queue" in text and "calibrate" in text  # the three lines
    assert [s.value for s in at.subheader] == ["The live demo", "Four things to try", "Where each page fits"]
    assert {"Ask", "Work the review queue", "Router paths", "Tuning"} <= {link.proto.label for link in at.get("page_link")}
    assert "| 2. Review | **Review queue** |" in text
    # an empty store: the offer to load the demo, nothing to remove
    assert at.button(key="home.load_demo") and not [b for b in at.button if b.key == "home.remove_demo"]


def test_with_demo_runs_the_first_screen_counts_them_and_one_click_removes_them(clean_db) -> None:
    load_demo(presets=("minimal", "balanced"), questions=answer_key()[:2])
    at = _home()
    caption = " ".join(c.value for c in at.caption)
    assert "4 demo runs are loaded, 2 with answer-key verdicts" in caption
    assert "not from a person's review" in caption
    at.button(key="home.remove_demo").click().run()
    assert not at.exception, at.exception
    assert "Removed 4 demo runs and 2 review actions" in at.success[0].value
    assert demo_status().store_empty
    assert at.button(key="home.load_demo")  # the offer is back


def test_the_ask_page_offers_the_demo_only_while_the_store_has_no_runs(clean_db) -> None:
    at = open_page(AppTest.from_file(APP, default_timeout=600), "ask", "Ask")
    assert [b for b in at.button if b.key == "ask.load_demo"]
    load_demo(presets=("minimal",), questions=answer_key()[:1])
    st.cache_data.clear()  # what asking a question does to the status the page caches
    at.run()
    assert not [b for b in at.button if b.key == "ask.load_demo"]


@pytest.mark.slow
def test_load_demo_runs_on_the_ask_page_fills_the_store_with_every_preset(clean_db) -> None:
    at = open_page(AppTest.from_file(APP, default_timeout=600), "ask", "Ask")
    at.button(key="ask.load_demo").click().run()
    assert not at.exception, at.exception
    assert at.success[0].value.startswith("Loaded 75 demo runs")
    status = demo_status()
    assert (status.runs, status.demo_runs, status.answer_key_verdicts) == (75, 75, 50)
    assert not [b for b in at.button if b.key == "ask.load_demo"]
