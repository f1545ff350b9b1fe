"""/docs in headless Chromium with the network closed: every request the page makes to any host
but the API itself is refused, and Swagger UI still draws the API's operations (its script and
styles come from the API, not a CDN)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from playwright import sync_api as playwright_api

from api.app import DOCS_ASSETS, create_app
from tests.api._server import serving
from tests.e2e._app import BROWSER_MARKS, CHROMIUM, CHROMIUM_ARGS

pytestmark = BROWSER_MARKS


@pytest.fixture()
def api_url(engine, settings) -> Iterator[str]:  # type: ignore[no-untyped-def]
    with serving(create_app(settings, assess=False)) as url:
        yield url


def test_the_docs_page_names_only_assets_the_api_serves(api_url: str) -> None:
    page = httpx.get(f"{api_url}/docs").text
    assert "cdn." not in page and "unpkg" not in page
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css"):
        assert f"{DOCS_ASSETS}/{asset}" in page
        assert httpx.get(f"{api_url}{DOCS_ASSETS}/{asset}").status_code == 200


def test_docs_render_in_chromium_without_a_network(api_url: str) -> None:
    refused: list[str] = []

    def only_the_api(route: playwright_api.Route) -> None:
        if route.request.url.startswith(api_url):
            route.continue_()
        else:
            refused.append(route.request.url)
            route.abort()

    with playwright_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            tab = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            tab.route("**/*", only_the_api)
            tab.goto(f"{api_url}/docs")
            title = tab.locator(".swagger-ui .info .title")
            title.wait_for(timeout=60_000)
            assert "RAG Confidence Workbench API" in title.inner_text()
            assert tab.locator(".opblock-summary-path", has_text="/runs").count() >= 1  # the operations are drawn
        finally:
            browser.close()
    assert refused == []  # nothing was asked of another host
