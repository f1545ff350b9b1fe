"""The first five minutes in real headless Chromium (issue 17): `workbench demo` on a fresh data
dir, then every page at 1440x900 and 1024x768 shows data rather than its empty state, the
answer key's verdicts are labelled as such, the queue is worked from the keyboard, and removing
the demo leaves a store without runs. A screenshot of every page at 1440 wide is taken; it is
written to docs/screenshots/ (the README shows them) only when asked:

    WORKBENCH_SCREENSHOTS=docs/screenshots .venv/bin/pytest tests/e2e/test_demo_walkthrough.py

and otherwise to a temporary folder, so a test run leaves the tracked images alone."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e._app import BROWSER_MARKS, CHROMIUM, CHROMIUM_ARGS, ROOT, running_app

SCREENSHOTS_ENV = "WORKBENCH_SCREENSHOTS"  # a folder (relative to the checkout) to keep the screenshots in
VIEWPORTS = ((1440, 900), (1024, 768))
WORKBENCH = Path(sys.executable).with_name("workbench")
MAIN = "[data-testid=stMain]"

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = BROWSER_MARKS


def _workbench() -> list[str]:
    """The console script beside this interpreter, or the same app run through Python."""
    if WORKBENCH.exists():
        return [str(WORKBENCH)]
    return [sys.executable, "-c", "from services.cli import app; app()"]


@pytest.fixture(scope="module")
def demo_env() -> Iterator[dict[str, str]]:
    """A fresh data dir (outside root's home, parents traversable) filled by `workbench demo`."""
    data_dir = Path(tempfile.mkdtemp(prefix="workbench-demo-e2e-", dir="/tmp"))
    data_dir.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "ANTHROPIC_API_KEY", "LLM_BASE_URL")}
    env |= {"WORKBENCH_DATA_DIR": str(data_dir), "HF_HUB_OFFLINE": "1"}
    loaded = subprocess.run([*_workbench(), "demo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert "75 demo runs" in loaded.stdout and "answer-key verdicts (not a person's)" in loaded.stdout
    yield env
    shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """Where the 1440-wide screenshots go: $WORKBENCH_SCREENSHOTS when set, else a temporary folder."""
    asked = os.environ.get(SCREENSHOTS_ENV, "").strip()
    return ROOT / asked if asked else tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def server(demo_env: dict[str, str]) -> Iterator[str]:
    with running_app(demo_env, Path(demo_env["WORKBENCH_DATA_DIR"]) / "streamlit.log") as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


def _new_tab(browser, width: int, height: int):  # type: ignore[no-untyped-def]
    tab = browser.new_context(viewport={"width": width, "height": height}).new_page()
    tab.set_default_timeout(180_000)
    return tab


def _settle(tab, heading: str) -> None:  # type: ignore[no-untyped-def]
    """A real heading, Streamlit done running the script, and its charts drawn."""
    tab.get_by_role("heading", name=heading, exact=True).first.wait_for()
    tab.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=180_000)
    tab.locator("[data-testid=stApp][data-test-script-state=notRunning]").wait_for(timeout=180_000)
    tab.wait_for_function("() => [...document.querySelectorAll('[data-testid=\"stPlotlyChart\"]')]"
                          ".every(chart => chart.querySelector('.main-svg'))", timeout=60_000)
    tab.wait_for_timeout(500)  # plotly lays out after its svg arrives


def _text(tab) -> str:  # type: ignore[no-untyped-def]
    return tab.locator(MAIN).inner_text()


def _shows(tab, pattern: re.Pattern[str]) -> None:  # type: ignore[no-untyped-def]
    """Fails unless the main block comes to show `pattern` within a minute. A run's elements
    stream in, and those of a container made early and filled late (the Corpus page's figures)
    arrived after the script read as done, once, on a loaded machine."""
    from playwright.sync_api import expect

    expect(tab.locator(MAIN)).to_contain_text(pattern, use_inner_text=True, timeout=60_000)


def _charts(tab, at_least: int) -> int:  # type: ignore[no-untyped-def]
    """How many plotly charts are drawn, once at least `at_least` are (they arrive after the text)."""
    tab.locator(f"{MAIN} .js-plotly-plot").nth(at_least - 1).wait_for(timeout=60_000)
    return tab.locator(f"{MAIN} .js-plotly-plot").count()


def _screenshot(tab, path: Path) -> None:  # type: ignore[no-untyped-def]
    """The whole page: Streamlit scrolls inside its main block, so the viewport grows to fit it."""
    size = tab.viewport_size
    height = tab.evaluate("() => document.querySelector('[data-testid=stMain]').scrollHeight")
    tab.set_viewport_size({"width": size["width"], "height": min(max(height, size["height"]), 6000)})
    tab.wait_for_timeout(800)
    path.parent.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=path)
    tab.set_viewport_size(size)
    from PIL import Image, ImageStat

    assert ImageStat.Stat(Image.open(path).convert("L")).stddev[0] > 5, f"{path} looks blank"


# --- what each page shows once the demo is loaded ---------------------------------------------------

def _home(tab) -> None:  # type: ignore[no-untyped-def]
    text = _text(tab)
    assert "75 demo runs are loaded, 50 with answer-key verdicts" in text and "not from a person's review" in text
    assert "Four things to try" in text and "Where each page fits" in text


def _ask(tab) -> None:  # type: ignore[no-untyped-def]
    # Before a question of one's own, the newest stored run; asking one is tests/e2e/test_browser.py's.
    text = _text(tab)
    assert "New here?" not in text  # the demo offer is for a store without runs
    assert "Showing the newest stored run" in text and "Retrieval confidence" in text and _charts(tab, 2) >= 2


def _search(tab) -> None:  # type: ignore[no-untyped-def]
    tab.get_by_role("textbox", name="Question").fill("pulsecoder battery replacement")
    tab.get_by_role("button", name="Search", exact=True).click()
    tab.locator(f"{MAIN} [data-testid=stDataFrame]").first.wait_for()
    _settle(tab, "Search the corpus")
    assert _charts(tab, 2) >= 2


def _review(tab) -> None:  # type: ignore[no-untyped-def]
    # the progress line streams in after the queue's caption (read once, it was missing on a clean clone)
    _shows(tab, re.compile(r"50 of \d+ queued runs reviewed"))
    assert "calibrated probability of approval" in _text(tab)
    assert tab.locator(f"{MAIN} [data-testid=stDataFrame]").count() == 1 and _charts(tab, 1) == 1


def _import_runs(tab) -> None:  # type: ignore[no-untyped-def]
    # The demo imports nothing: the page shows what to upload and the intake counts.
    assert "What to upload" in _text(tab) and "Assess queued runs" in _text(tab)


def _export(tab) -> None:  # type: ignore[no-untyped-def]
    assert re.search(r"Runs matching\s+50", _text(tab))  # the reviewed runs (the answer key's), not all 75
    assert tab.locator(f"{MAIN} [data-testid=stDataFrame]").count() == 1


def _tuning(tab) -> None:  # type: ignore[no-untyped-def]
    assert "75 stored runs" in _text(tab) and _charts(tab, 3) >= 3


def _routes(tab) -> None:  # type: ignore[no-untyped-def]
    assert tab.locator(f"{MAIN} .js-plotly-plot .sankey").count() == 1
    assert "No stored runs match" not in _text(tab)


def _evaluate(tab) -> None:  # type: ignore[no-untyped-def]
    assert "20 judged queries in collection default; the demo questions" in _text(tab)
    assert _charts(tab, 2) == 2


def _corpus(tab) -> None:  # type: ignore[no-untyped-def]
    _shows(tab, re.compile(r"Documents\s+46"))


def _documents(tab) -> None:  # type: ignore[no-untyped-def]
    assert "Fix first" in _text(tab) and _charts(tab, 2) >= 2


# (url path, title, screenshot name, check)
PAGES: tuple[tuple[str, str, str, Callable], ...] = (
    ("", "Start here", "01-start-here", _home),
    ("ask", "Ask", "02-ask", _ask),
    ("search", "Search the corpus", "03-search", _search),
    ("review", "Review queue", "04-review-queue", _review),
    ("import_runs", "Import runs", "05-import-runs", _import_runs),
    ("export", "Export reviewed answers", "06-export", _export),
    ("tuning", "Tune confidence weights", "07-tuning", _tuning),
    ("routes", "Router paths", "08-router-paths", _routes),
    ("evaluate", "Evaluate retrieval", "09-evaluate", _evaluate),
    ("corpus", "Corpus", "10-corpus", _corpus),
    ("documents", "Document trends", "11-document-trends", _documents),
)


@pytest.mark.parametrize(("width", "height"), VIEWPORTS, ids=[f"{w}x{h}" for w, h in VIEWPORTS])
def test_after_workbench_demo_every_page_shows_data_and_fits_the_screen(server, browser, screenshots, width, height,
                                                                        tmp_path):
    tab = _new_tab(browser, width, height)
    for path, title, name, check in PAGES:
        tab.goto(f"{server}/{path}")
        _settle(tab, title)
        check(tab)
        assert tab.locator("[data-testid=stException]").count() == 0, f"{title}: an exception is shown"
        assert tab.get_by_role("button", name="Deploy").count() == 0
        scroll_width, client_width = tab.evaluate(
            "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert scroll_width <= client_width, f"{title} is wider than a {width}px screen"
        _screenshot(tab, (screenshots if width == 1440 else tmp_path) / f"{name}.png")
    tab.context.close()


def test_answer_key_verdicts_are_labelled_and_the_queue_is_worked_from_the_keyboard(server, browser, screenshots):
    tab = _new_tab(browser, 1440, 900)
    tab.goto(f"{server}/tuning")
    _settle(tab, "Tune confidence weights")
    tab.get_by_role("tab", name="Calibration").click()
    _settle(tab, "Tune confidence weights")
    assert "50 of these verdicts are answer-key verdicts of the demo runs" in _text(tab)
    _screenshot(tab, screenshots / "07b-tuning-calibration.png")

    tab.goto(f"{server}/review")
    _settle(tab, "Review queue")
    tab.get_by_test_id("stSidebar").get_by_role("textbox", name="Reviewer").fill("e2e reviewer")
    tab.get_by_test_id("stSidebar").get_by_role("textbox", name="Reviewer").press("Enter")
    _settle(tab, "Review queue")
    tab.get_by_test_id("stMultiSelect").filter(has_text="Status").get_by_role("combobox").click()
    tab.get_by_role("option", name="approved", exact=True).click()
    tab.keyboard.press("Escape")
    _settle(tab, "Review queue")
    # the run detail's label is tests/pages/test_review_work.py's (AppTest)
    assert "Reviewer 'demo answer key': Answer-key verdicts come from the demo questions' answer key" in _text(tab)
    _screenshot(tab, screenshots / "04c-review-answer-key-verdicts.png")
    tab.get_by_role("tab", name="Work the queue").click()
    _settle(tab, "Review queue")
    before = int(re.search(r"(\d+) pending left", _text(tab)).group(1))  # type: ignore[union-attr]
    first = re.search(r"Run (\d+) ·", _text(tab)).group(1)  # type: ignore[union-attr]
    tab.get_by_role("heading", name="Review queue").click()  # keys go to the page, not a text box
    tab.keyboard.press("a")
    tab.get_by_text(f"Run {first} approved.").wait_for()
    _settle(tab, "Review queue")
    assert f"{before - 1} pending left · 1 reviewed here this session" in _text(tab)
    assert re.search(r"Run (\d+) ·", _text(tab)).group(1) != first  # type: ignore[union-attr]
    tab.keyboard.press("n")
    tab.get_by_text(re.compile(r"Run \d+ skipped; it stays pending")).wait_for()
    _screenshot(tab, screenshots / "04b-review-work-the-queue.png")

    tab.goto(f"{server}/export")
    _settle(tab, "Export reviewed answers")
    tab.locator(MAIN).get_by_role("textbox", name="Reviewer").fill("demo answer key")  # the filter, not the sidebar
    tab.locator(MAIN).get_by_role("textbox", name="Reviewer").press("Enter")
    _settle(tab, "Export reviewed answers")
    assert re.search(r"Runs matching\s+50", _text(tab))
    tab.context.close()


def test_removing_the_demo_leaves_a_store_without_runs_or_verdicts(server, browser, demo_env):
    tab = _new_tab(browser, 1440, 900)
    tab.goto(server)
    _settle(tab, "Start here")
    tab.get_by_role("button", name="Remove demo runs").click()
    notice = tab.get_by_text(re.compile(r"Removed 75 demo runs and \d+ review actions on them\."))
    notice.wait_for()
    # 50 answer-key verdicts, and the keyboard test's approval of a demo run when it ran first
    assert int(re.search(r"and (\d+) review", notice.inner_text()).group(1)) >= 50  # type: ignore[union-attr]
    # and the offer to load the demo is back: the page streams its elements, the notice first,
    # so under load the rest of the rerun arrives after it
    tab.get_by_text("The store holds no runs yet").first.wait_for()
    load = tab.get_by_role("button", name="Load demo runs")
    load.wait_for()
    assert load.count() == 1
    removed = subprocess.run([*_workbench(), "demo", "--remove", "--json"], cwd=ROOT, env=demo_env,
                             capture_output=True, text=True, timeout=300)
    assert removed.returncode == 0 and '"removed_runs": 0' in removed.stdout  # nothing of the demo is left
    for path, title, empty in (("review", "Review queue", "No runs are stored yet"),
                               ("routes", "Router paths", "No stored runs match"),
                               ("documents", "Document trends", "No stored run has retrieved or cited a document")):
        tab.goto(f"{server}/{path}")
        _settle(tab, title)
        assert empty in _text(tab)
    tab.goto(f"{server}/corpus")
    _settle(tab, "Corpus")
    _shows(tab, re.compile(r"Documents\s+46"))  # the handbook stays: it is the corpus, not the demo
    tab.context.close()
