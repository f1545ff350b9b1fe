"""The workbench in real headless Chromium: ask, see the breakdown, approve, export.

Also checks that HTML/JS in questions and document text is shown as text and never runs.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.e2e._app import BROWSER_MARKS, CHROMIUM, CHROMIUM_ARGS, running_app

XSS_DOC = ('# Hostile page <script>window.__xss = "doc-script"</script>\n'
           'SRVO-062 backup <img src=x onerror="window.__xss = \'doc-img\'"> means the encoder lost its count.')
XSS_QUESTION = 'What does SRVO-062 mean? <img src=x onerror="window.__xss=\'question\'"><script>window.__xss=1</script>'

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = BROWSER_MARKS


@pytest.fixture()
def corpus(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    from services.corpus.ingest import ingest_paths
    from tests.services.test_pipeline import DOCS

    docs = tmp_path / "docs"
    docs.mkdir()
    for name, body in DOCS.items():
        (docs / name).write_text(body, encoding="utf-8")
    (docs / "hostile.md").write_text(XSS_DOC, encoding="utf-8")
    ingest_paths([docs])


@pytest.fixture()
def server(corpus, tmp_path):  # type: ignore[no-untyped-def]
    """`streamlit run app.py` against the test session's embedded database."""
    with running_app(dict(os.environ), tmp_path / "streamlit.log") as url:
        yield url


@pytest.fixture()
def tab(tmp_path):  # type: ignore[no-untyped-def]
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        tab = context.new_page()
        tab.set_default_timeout(180_000)
        dialogs: list[str] = []
        tab.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        tab.dialogs = dialogs  # type: ignore[attr-defined]
        yield tab
        context.close()
        browser.close()


def _settle(tab, heading: str) -> None:  # type: ignore[no-untyped-def]
    """Wait for a real heading and for Streamlit to finish running the script."""
    tab.get_by_role("heading", name=heading).first.wait_for()
    tab.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=180_000)


def _assert_not_blank(path: Path) -> None:
    from PIL import Image, ImageStat

    image = Image.open(path).convert("L")
    assert ImageStat.Stat(image).stddev[0] > 5, f"{path} looks blank"


def test_ask_approve_export_in_a_real_browser(server, tab, tmp_path):
    page = tab  # type: ignore[no-untyped-def]
    page.goto(f"{server}/ask")  # a deep link first is fine (tests/e2e/test_deep_link.py)
    _settle(page, "Ask")
    page.get_by_role("textbox", name="Reviewer").fill("e2e reviewer")
    page.get_by_role("textbox", name="Reviewer").press("Enter")
    page.get_by_role("textbox", name="Question").fill(XSS_QUESTION)
    page.get_by_role("button", name="Ask").click()
    page.locator(".js-plotly-plot").nth(1).wait_for()  # gauge and breakdown are drawn
    _settle(page, "Ask")
    page.screenshot(path=tmp_path / "ask.png", full_page=True)
    _assert_not_blank(tmp_path / "ask.png")
    assert page.get_by_text("<script>window.__xss=1</script>", exact=False).count() >= 1  # shown as text
    assert page.evaluate("() => window.__xss") is None and page.dialogs == []
    # The judge may support the answer well enough to auto-accept it: a reviewer sends it on.
    send = page.get_by_role("button", name="Send to review")
    if send.count():
        send.click()
        page.get_by_text(re.compile(r"Run \d+ was sent to the review queue")).wait_for()

    # The queue now shows the judge's evidence and P(supported): a taller window keeps room below
    # "Open run" for its list of runs to open downwards.
    page.set_viewport_size({"width": 1400, "height": 1800})
    page.goto(f"{server}/review")  # a new browser session: the reviewer name is entered again
    _settle(page, "Review queue")
    page.get_by_role("textbox", name="Reviewer").fill("e2e reviewer")
    page.get_by_role("textbox", name="Reviewer").press("Enter")
    _settle(page, "Review queue")
    page.get_by_role("combobox", name="Open run").click()
    page.get_by_role("option").filter(has_text="#").first.click()
    _settle(page, "Review queue")
    page.get_by_role("button", name="Approve").click()
    page.get_by_text(re.compile(r"Saved: run \d+ is now approved")).wait_for()
    _settle(page, "Review queue")
    page.screenshot(path=tmp_path / "review.png", full_page=True)
    _assert_not_blank(tmp_path / "review.png")

    page.goto(f"{server}/export")
    _settle(page, "Export reviewed answers")
    page.get_by_text("jsonl", exact=True).click()
    _settle(page, "Export reviewed answers")
    with page.expect_download() as download_info:
        page.get_by_role("button", name=re.compile(r"Download .* as jsonl")).click()
    exported = Path(download_info.value.path()).read_text(encoding="utf-8")
    page.screenshot(path=tmp_path / "export.png", full_page=True)
    _assert_not_blank(tmp_path / "export.png")
    assert '"verdict": "approved"' in exported and "e2e reviewer" in exported
    assert "SRVO-062" in exported
    assert page.evaluate("() => window.__xss") is None and page.dialogs == []
