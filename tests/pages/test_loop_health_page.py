"""Router paths' Loop health tab under AppTest, over runs stored by the real pipeline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from services.answering import pipeline
from services.review.loop_health import loop_health
from tests.pages._support import frame_by_first_column, open_page
from tests.services.test_pipeline import ScriptedBackend, demo_docs  # noqa: F401  (fixture)

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture()
def runs(demo_docs):  # type: ignore[no-untyped-def]  # noqa: F811
    return [
        pipeline.run("How often is J2 grease replaced?", "balanced", backend=ScriptedBackend((0.3, 0.6, 0.2))),
        pipeline.run("What does SRVO-062 mean?", "minimal", backend=ScriptedBackend()),
        pipeline.run("What does <b>SRVO-062</b> mean?", "as-written", backend=ScriptedBackend((0.9,))),
    ]


def _health_tab() -> AppTest:
    at = open_page(AppTest.from_file(APP, default_timeout=300), "routes", "Router paths")
    assert not [c for c in at.get("plotly_chart") if "health" in (c.proto.id or "")]  # lazy: not drawn until opened
    at.session_state["routes.tab"] = "Loop health"
    at.run()
    assert not at.exception, at.exception
    return at


def test_the_tab_plots_the_loops_health_per_preset_from_stored_runs(runs):
    at = _health_tab()
    figures = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    assert len(figures) == 3  # rates, iterations, CRAG verdicts; the paths tab's figures are not drawn
    rates = figures[0]
    assert {t["name"] for t in rates["data"]} == {"balanced", "minimal", "as-written"}
    table = frame_by_first_column(at, "preset")
    assert list(table["preset"]) == ["as-written", "balanced", "minimal", "all"]
    totals = loop_health().totals("balanced")
    row = table[table["preset"] == "balanced"].iloc[0]
    assert row["runs"] == 1 and row["refined"] == 1 and row["mean iterations"] == 3
    assert row["refinement success"] == pytest.approx(totals.refinement_success, abs=1e-3)
    assert row["mean reflection"] == pytest.approx(totals.mean_reflection, abs=1e-3)


def test_the_preset_filter_applies_to_the_tab(runs):
    at = _health_tab()
    at.multiselect(key="routes.presets").select("minimal").run()
    assert not at.exception
    table = frame_by_first_column(at, "preset")
    assert list(table["preset"]) == ["minimal"] and table.iloc[0]["runs"] == 1
    assert pytest.approx(table.iloc[0]["mean iterations"]) == 1.0
