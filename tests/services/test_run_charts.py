"""Run figures as pure functions: reflection, route, Sankey, route frequency, event timeline."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from services.answering.llm.base import Reflection
from services.answering.runs import Event, Iteration, Run
from services.charts import run as charts
from services.domain import RetrievalResult
from services.review.paths import RoutePath

XSS = "<script>alert(1)</script>"


def _iteration(ordinal: int, decision: str, *, confidence: float, reflection: float | None) -> Iteration:
    return Iteration(
        ordinal=ordinal, query_used=f"q{ordinal}", sub_queries=(), retrieval=RetrievalResult(f"q{ordinal}", "hybrid", ()),
        components=(0.5,) * 7, raw_metrics={}, retrieval_confidence=0.5, confidence=confidence, level="LOW", crag=None,
        answer="a", citations=(),
        reflection=None if reflection is None else Reflection(True, False, reflection, (), "r", reflection < 0.8),
        grade=None, gaps=(), decision=decision, decision_reason=f"because {XSS}", signals={"retrieval": 0.5},
        latency_ms={"retrieval": 1.0},
    )


def _event(seq: int, event_type: str, ms: float, message: str = "", **data) -> Event:  # type: ignore[no-untyped-def]
    return Event(seq, event_type, message or event_type, datetime(2025, 1, 1, tzinfo=UTC), ms, data)


def make_run(decisions=("REFINE_QUERY", "REFINE_QUERY", "ACCEPT_BEST"), reflections=(0.3, None, 0.9),  # type: ignore[no-untyped-def]
             best: int = 3, status: str = "pending", query: str = "how?") -> Run:
    iterations = tuple(_iteration(i, d, confidence=0.4 + 0.1 * i, reflection=r)
                       for i, (d, r) in enumerate(zip(decisions, reflections), 1))
    events = (
        _event(1, "adaptive_refinement_start", 0.5),
        _event(2, "refinement_iteration_start", 1.0, iteration=1),
        _event(3, "retrieval_complete", 12.0, message=f"8 hits {XSS}"),
        _event(4, "refinement_iteration_start", 20.0, iteration=2),
        _event(5, "retrieval_complete", 31.0),
        _event(6, "adaptive_refinement_complete", 40.0),
    )
    return Run(
        query=query, preset="balanced", collection="default", source="ask", backend="scripted", model="m",
        status=status, final_answer="a", citations=(), final_confidence=0.6, final_level="LOW",
        retrieval_confidence=0.5, components=(0.5,) * 7, reflection_score=0.9, grade=None, crag_verdict=None,
        signals={"retrieval": 0.5}, route=tuple(decisions), best_iteration=best, weights_profile="default v1",
        weights_profile_id=None, config={}, outcome_note="", latency_ms=40.0, iterations=iterations, events=events,
        run_id=7,
    )


def _spec(fig) -> dict:  # type: ignore[no-untyped-def]
    return json.loads(fig.to_json())


def test_reflection_figure_plots_each_iteration_against_the_threshold():
    spec = _spec(charts.reflection_figure(make_run(), threshold=0.8))
    reflection = next(t for t in spec["data"] if t["name"] == "reflection score")
    assert reflection["x"] == [1, 2, 3]
    assert reflection["y"] == [0.3, None, 0.9]  # no reflection is a gap, never a zero
    confidence = next(t for t in spec["data"] if t["name"] == "blended confidence")
    assert confidence["y"] == pytest.approx([0.5, 0.6, 0.7])
    horizontal = [s for s in spec["layout"]["shapes"] if s["y0"] == s["y1"]]
    assert [s["y0"] for s in horizontal] == [0.8]
    default = _spec(charts.reflection_figure(make_run()))  # the threshold defaults to seed 004's 0.8
    assert [s["y0"] for s in default["layout"]["shapes"] if s["y0"] == s["y1"]] == [0.8]


def test_route_figure_draws_start_decisions_end_left_to_right():
    run = make_run(query=XSS)
    spec = _spec(charts.route_figure(run))
    nodes = spec["data"][0]
    assert nodes["text"] == ["START", "1. REFINE_QUERY", "2. REFINE_QUERY", "3. ACCEPT_BEST", "END (pending)"]
    assert nodes["x"] == [0, 1, 2, 3, 4]
    colors = nodes["marker"]["color"]
    assert colors[1] == charts.DECISION_COLORS["REFINE_QUERY"] and colors[3] == charts.DECISION_COLORS["ACCEPT_BEST"]
    assert colors[4] == charts.STATUS_COLORS["pending"]
    assert nodes["marker"]["size"][3] > nodes["marker"]["size"][1]  # the best iteration stands out
    arrows = spec["layout"]["annotations"]
    assert [(a["ax"], a["x"]) for a in arrows] == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert all("<script>" not in h for h in nodes["hovertext"])  # user/model text is escaped for plotly
    assert "&lt;script&gt;" in nodes["hovertext"][0]


def test_route_sankey_counts_transitions_between_steps():
    paths = [
        RoutePath(("COMPLETE",), "auto_accepted", 5),
        RoutePath(("REFINE_QUERY", "COMPLETE"), "pending", 3),
        RoutePath(("REFINE_QUERY", "ACCEPT_BEST"), "pending", 2),
    ]
    spec = _spec(charts.route_sankey_figure(paths))
    sankey = spec["data"][0]
    labels = sankey["node"]["label"]
    assert labels[0] == "START"
    assert set(labels) == {"START", "1 · COMPLETE", "1 · REFINE_QUERY", "2 · COMPLETE", "2 · ACCEPT_BEST",
                           "END · auto_accepted", "END · pending"}
    links = {(labels[s], labels[t]): v for s, t, v in zip(sankey["link"]["source"], sankey["link"]["target"],
                                                          sankey["link"]["value"])}
    assert links[("START", "1 · REFINE_QUERY")] == 5 and links[("START", "1 · COMPLETE")] == 5
    assert links[("1 · REFINE_QUERY", "2 · COMPLETE")] == 3 and links[("2 · ACCEPT_BEST", "END · pending")] == 2
    assert links[("2 · COMPLETE", "END · pending")] == 3 and links[("1 · COMPLETE", "END · auto_accepted")] == 5
    assert len(links) == 7
    out_of_start = sum(v for (s, _), v in links.items() if s == "START")
    into_end = sum(v for (_, t), v in links.items() if t.startswith("END"))
    assert out_of_start == into_end == 10
    colors = {(labels[s], labels[t]): c for s, t, c in zip(sankey["link"]["source"], sankey["link"]["target"],
                                                           sankey["link"]["color"])}
    assert colors[("1 · COMPLETE", "END · auto_accepted")] == "rgba(26,127,55,0.35)"  # a link takes its target's color


def test_route_frequency_merges_statuses_and_ranks_routes():
    paths = [
        RoutePath(("COMPLETE",), "auto_accepted", 2),
        RoutePath(("REFINE_QUERY", "COMPLETE"), "pending", 3),
        RoutePath(("COMPLETE",), "pending", 4),
    ]
    bar = _spec(charts.route_frequency_figure(paths))["data"][0]
    assert bar["y"] == ["COMPLETE", "REFINE_QUERY → COMPLETE"] and bar["x"] == [6, 3]
    assert len(_spec(charts.route_frequency_figure(paths, top=1))["data"][0]["y"]) == 1


def test_timeline_places_events_on_a_time_axis_by_iteration():
    run = make_run()
    assert charts.event_iterations(run.events) == [0, 1, 1, 2, 2, 2]
    spec = _spec(charts.timeline_figure(run.events))
    by_name = {t["name"]: t for t in spec["data"]}
    assert set(by_name) == {"start", "iteration 1", "iteration 2"}
    assert by_name["iteration 1"]["x"] == [1.0, 12.0]
    assert by_name["iteration 1"]["y"] == ["refinement_iteration_start", "retrieval_complete"]
    assert by_name["iteration 2"]["x"] == [20.0, 31.0, 40.0]
    hover = by_name["iteration 1"]["hovertext"][1]
    assert "8 hits" in hover and "12 ms" in hover and "<script>" not in hover
    assert spec["layout"]["yaxis"]["categoryarray"][0] == "adaptive_refinement_start"
    assert sorted(s["x0"] for s in spec["layout"]["shapes"]) == [1.0, 20.0]  # a marker at each iteration start
