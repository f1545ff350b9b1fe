"""A page's own URL opened first on a server that just started (a bookmark, a link in a chat)
renders through app.py's navigation and shared sidebar, not as an old-style page of a
`pages/` folder (Streamlit serves those until some session has run st.navigation)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.e2e._app import BROWSER_MARKS, CHROMIUM, CHROMIUM_ARGS, ROOT, running_app

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = BROWSER_MARKS
NAV = "[data-testid=stSidebarNav]"


@pytest.fixture()
def fresh_server(clean_db, tmp_path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A new `streamlit run app.py` that no browser has opened yet."""
    with running_app(dict(os.environ), tmp_path / "streamlit.log") as url:
        yield url


def test_the_app_has_no_folder_streamlit_would_read_as_old_style_pages():
    # Streamlit decides once per server, from this path alone, to serve pages/ the old way.
    assert not (ROOT / "pages").exists()


@pytest.mark.parametrize(("path", "heading", "title"), [("review", "Review queue", "Review queue"),
                                                         ("tuning", "Tune confidence weights", "Tuning")])
def test_a_deep_link_opened_first_renders_the_page_inside_the_apps_navigation(fresh_server, path, heading, title):
    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        tab = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
        tab.set_default_timeout(120_000)
        tab.goto(f"{fresh_server}/{path}")  # before anything has opened the root
        tab.get_by_role("heading", name=heading, exact=True).first.wait_for()
        tab.locator("[data-testid=stApp][data-test-script-state=notRunning]").wait_for()
        nav = tab.locator(NAV)
        # app.py's navigation: its titles and sections, not file names such as "app" or "tuning"
        for link in ("Start here", "Review queue", "Tuning", "Router paths", "Document trends"):
            assert nav.get_by_role("link", name=link, exact=True).count() == 1, f"{link} is not in {nav.inner_text()}"
        assert nav.get_by_text("Answer", exact=True).count() == 1 and nav.get_by_text("Tune", exact=True).count() == 1
        assert nav.get_by_role("link", name="app", exact=True).count() == 0
        # the shared sidebar app.py draws around every page
        assert tab.get_by_test_id("stSidebar").get_by_role("combobox", name="Preset").count() == 1
        # the link of this page is the current one (its text is the icon's ligature, then the title)
        assert tab.locator(f"{NAV} a[aria-current=page]").inner_text().splitlines()[-1].strip() == title
        assert tab.locator("[data-testid=stException]").count() == 0
        browser.close()
