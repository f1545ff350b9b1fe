"""The Router paths page under AppTest, over runs stored by the real pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from services.answering import pipeline
from services.answering.runs import load_run
from tests.pages._support import open_page
from tests.services.test_pipeline import ScriptedBackend, demo_docs  # noqa: F401  (fixture)

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture()
def runs(demo_docs):  # type: ignore[no-untyped-def]  # noqa: F811
    return [
        pipeline.run("How often is J2 grease replaced?", "balanced", backend=ScriptedBackend((0.3, 0.6, 0.2))),
        pipeline.run("What does SRVO-062 mean?", "minimal", backend=ScriptedBackend()),
        pipeline.run("What does <b>SRVO-062</b> mean?", "minimal", backend=ScriptedBackend()),
    ]


def _routes_page() -> AppTest:
    return open_page(AppTest.from_file(APP, default_timeout=300), "routes", "Router paths")


def _figures(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def _sankey_labels(at: AppTest) -> set[str]:
    sankey = [f["data"][0] for f in _figures(at) if f["data"][0]["type"] == "sankey"]
    assert len(sankey) == 1
    return set(sankey[0]["node"]["label"])


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def _timeline(at: AppTest) -> dict:
    return next(f for f in _figures(at) if f["layout"].get("xaxis", {}).get("title", {}).get("text") == "elapsed (ms)")


def test_sankey_and_counts_follow_the_filters(runs):
    refined = runs[0].route
    assert refined[:2] == ("REFINE_QUERY", "REFINE_QUERY")  # the script makes the first run refine twice
    at = _routes_page()
    assert _metric(at, "Runs") == "3"
    assert _metric(at, "Mean iterations") == f"{(len(refined) + 2) / 3:.2f}"
    assert _sankey_labels(at) == {"START", "1 · REFINE_QUERY", "2 · REFINE_QUERY", f"3 · {refined[2]}",
                                  "1 · ACCEPT_BEST", "END · pending"}
    bars = next(f["data"][0] for f in _figures(at) if f["data"][0]["type"] == "bar")
    assert bars["y"][0] == "ACCEPT_BEST" and bars["x"][0] == 2  # the most common route first

    at.multiselect(key="routes.presets").select("minimal").run()
    assert not at.exception
    assert _metric(at, "Runs") == "2" and _metric(at, "Ending in ACCEPT_BEST") == "100%"
    assert _sankey_labels(at) == {"START", "1 · ACCEPT_BEST", "END · pending"}

    at.multiselect(key="routes.statuses").select("approved").run()
    assert not at.exception and "No stored runs match" in at.info[0].value
    assert not [f for f in _figures(at) if f["data"][0]["type"] == "sankey"]


def test_drill_down_shows_the_chosen_runs_timeline_and_events(runs):
    at = _routes_page()
    picker = at.selectbox(key="routes.selected_run")
    assert picker.options[0].startswith(f"#{runs[-1].run_id} · ")  # newest first
    assert "<b>SRVO-062</b>" in picker.options[0]  # the question as typed, not markup

    newest = load_run(runs[-1].run_id)
    timeline = _timeline(at)
    assert sorted(x for trace in timeline["data"] for x in trace["x"]) == pytest.approx(
        sorted(e.elapsed_ms for e in newest.events))
    events = next(d.value for d in at.dataframe if "event" in d.value.columns)
    assert list(events["event"]) == [e.event_type for e in newest.events]

    picker.select(runs[0].run_id).run()  # the oldest: three iterations
    assert not at.exception
    oldest = load_run(runs[0].run_id)
    timeline = _timeline(at)
    assert {t["name"] for t in timeline["data"]} == {"start", "iteration 1", "iteration 2", "iteration 3"}
    assert sum(len(t["x"]) for t in timeline["data"]) == len(oldest.events)
    events = next(d.value for d in at.dataframe if "event" in d.value.columns)
    assert len(events) == len(oldest.events) and events["iteration"].max() == 3
    route = next(f for f in _figures(at) if f["data"][0].get("text", [None])[0] == "START")
    assert route["data"][0]["text"][1:4] == [f"{i}. {d}" for i, d in enumerate(oldest.route, 1)]


def test_no_runs_says_so(clean_db):
    at = _routes_page()
    assert "No stored runs match" in at.info[0].value
    assert [link.value for link in at.get("page_link")] == ["Start here: load the demo runs", "Ask a question"]


def test_date_inputs_become_whole_utc_days_end_included():
    from datetime import UTC, date, datetime

    from app_pages.routes import filters_from_inputs

    filters = filters_from_inputs(["minimal"], [], [date(2025, 3, 1), date(2025, 3, 31)])
    assert filters.presets == ("minimal",) and filters.statuses == ()
    assert filters.since == datetime(2025, 3, 1, tzinfo=UTC) and filters.until == datetime(2025, 4, 1, tzinfo=UTC)
    half_picked = filters_from_inputs([], ["pending"], [date(2025, 3, 1)])  # the second date not chosen yet
    assert half_picked.since == datetime(2025, 3, 1, tzinfo=UTC) and half_picked.until is None
