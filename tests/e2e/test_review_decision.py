"""The reviewer's decision view in real headless Chromium, on an imported answer with one
invented name: Work the queue shows the passages it was given, the "why this score" strip and the
invented word highlighted; a ?trace_id= link opens a run by its trace id. Screenshots of the view
at 1440x900 and 1024x768 go to the test's temporary directory, or to WORKBENCH_SCREENSHOTS when it
is set (`WORKBENCH_SCREENSHOTS=docs/screenshots`, as test_demo_walkthrough.py does)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e._app import BROWSER_MARKS, CHROMIUM, CHROMIUM_ARGS, running_app
from tests.pages.test_claim_evidence import CONTEXTS, FABRICATED, store_import

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = BROWSER_MARKS
SIZES = ((1440, 900), (1024, 768))


@pytest.fixture()
def imported(clean_db, settings, tmp_path) -> Iterator[tuple[str, dict[str, int]]]:  # type: ignore[no-untyped-def]
    """Two imported answers (the invented one, and "Osaka" under trace id t-Osaka), then the app."""
    runs = {"invented": store_import(FABRICATED, settings), "right": store_import("Osaka", settings)}
    with running_app(dict(os.environ), tmp_path / "streamlit.log") as url:
        yield url, runs


def _open(url: str, width: int, height: int):  # type: ignore[no-untyped-def]
    pw = playwright_api.sync_playwright().start()
    browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
    tab = browser.new_context(viewport={"width": width, "height": height}).new_page()
    tab.set_default_timeout(180_000)
    tab.goto(url)
    tab.get_by_role("heading", name="Review queue").first.wait_for()
    return pw, browser, tab


def _settled(tab) -> None:  # type: ignore[no-untyped-def]
    tab.locator("[data-testid=stApp][data-test-script-state=notRunning]").wait_for()


def _assert_not_blank(path: Path) -> None:
    from PIL import Image, ImageStat

    assert ImageStat.Stat(Image.open(path).convert("L")).stddev[0] > 5, f"{path} looks blank"


def test_work_the_queue_shows_passages_the_why_strip_and_the_invented_word(imported, tmp_path):
    url, runs = imported
    for width, height in SIZES:
        pw, browser, tab = _open(f"{url}/review?view=work", width, height)
        try:
            tab.get_by_text(f"Run {runs['invented']}", exact=False).first.wait_for()
            tab.get_by_text("Why this score", exact=True).wait_for()
            tab.get_by_text("Judge P(supported)", exact=True).wait_for()  # the strip's fifth figure
            tab.get_by_text(CONTEXTS[1], exact=True).wait_for()
            _settled(tab)
            for label in ("Retrieval confidence", "CRAG verdict", "Reflection", "Answer grade", "Confidence"):
                assert tab.get_by_text(label, exact=True).count() >= 1, label
            assert tab.get_by_text(re.compile(r"^Confidence \d\.\d\d = retrieval confidence ")).count() == 1
            for context in CONTEXTS:  # the passages the answer was given
                assert tab.get_by_text(context, exact=True).count() == 1, context
            invented = tab.locator("[data-testid=stMarkdownContainer] span", has_text=re.compile(r"^Kobe$")).first
            background = invented.evaluate("element => getComputedStyle(element).backgroundColor")
            assert background not in ("rgba(0, 0, 0, 0)", "transparent"), background  # highlighted
            assert tab.get_by_text("heuristic_value").count() == 0
            assert tab.locator("[data-testid=stException]").count() == 0
            # What a reviewer sees in this window: the run's top (answer and why-strip), then its passages.
            tab.get_by_text(re.compile(r"^Run \d+$")).first.scroll_into_view_if_needed()
            for part, anchor in (("", "Why this score"), ("-passages", "The judge's evidence")):
                tab.get_by_text(anchor, exact=True).first.scroll_into_view_if_needed()
                shot = Path(os.environ.get("WORKBENCH_SCREENSHOTS") or tmp_path) / f"04d-decision-view-{width}x{height}{part}.png"
                tab.screenshot(path=shot)
                _assert_not_blank(shot)
        finally:
            browser.close()
            pw.stop()


def test_a_trace_id_link_opens_its_run(imported):
    url, runs = imported
    pw, browser, tab = _open(f"{url}/review?trace_id=t-Osaka", 1440, 900)
    try:
        tab.get_by_role("heading", name=f"Run {runs['right']}").wait_for()
        _settled(tab)
        assert tab.get_by_text("Why this score", exact=True).count() == 1
        assert "trace_id" not in tab.url  # read once: the reviewer can move on from here
    finally:
        browser.close()
        pw.stop()
