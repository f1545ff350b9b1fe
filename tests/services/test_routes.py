"""Route statistics over stored runs on the real store, runs made by the real pipeline."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import text

from services.answering import pipeline
from services.errors import InputError
from services.review.paths import RecentRun, RouteFilters, RoutePath, count_routes, count_transitions, recent_runs, route_stats
from services.review.queue import submit_review
from services.scoring.weights import DEFAULT_PROFILE
from tests.services.test_pipeline import ScriptedBackend, demo_docs  # noqa: F401  (fixture)


@pytest.fixture()
def runs(demo_docs):  # type: ignore[no-untyped-def]  # noqa: F811
    """Four runs with three different routes over two presets."""
    return [
        pipeline.run("How often is J2 grease replaced?", "balanced", DEFAULT_PROFILE, backend=ScriptedBackend((0.3, 0.6, 0.2))),
        pipeline.run("What does SRVO-062 mean?", "minimal", DEFAULT_PROFILE, backend=ScriptedBackend()),
        pipeline.run("What does SRVO-062 mean?", "minimal", DEFAULT_PROFILE, backend=ScriptedBackend()),
        pipeline.run("What does SRVO-062 mean?", "balanced", DEFAULT_PROFILE, backend=ScriptedBackend((0.9,))),
    ]


def test_stats_count_every_route_and_status(runs):
    stats = route_stats(RouteFilters())
    assert stats.n_runs == 4
    expected = Counter((r.route, r.status) for r in runs)
    assert {(p.route, p.status): p.count for p in stats.paths} == dict(expected)
    assert [p.count for p in stats.paths] == sorted((p.count for p in stats.paths), reverse=True)
    assert stats.mean_iterations == pytest.approx(sum(len(r.iterations) for r in runs) / 4)
    assert stats.share_accept_best == pytest.approx(sum(r.route[-1] == "ACCEPT_BEST" for r in runs) / 4)
    assert ("ACCEPT_BEST",) in {p.route for p in stats.paths}  # the minimal preset never refines
    assert ("REFINE_QUERY", "REFINE_QUERY", "ACCEPT_BEST") in {p.route for p in stats.paths}
    start = sum(t.count for t in stats.transitions if t.source == "START")
    assert start == 4


def test_filters_narrow_by_preset_status_and_date(runs, engine):
    minimal = route_stats(RouteFilters(presets=("minimal",)))
    assert minimal.n_runs == 2 and [(p.route, p.count) for p in minimal.paths] == [(("ACCEPT_BEST",), 2)]
    assert minimal.share_accept_best == 1.0 and minimal.mean_iterations == 1.0

    submit_review(runs[0].run_id, expected_version=0, action="flag", reviewer="ana", flag_reason="wrong answer")
    flagged = route_stats(RouteFilters(statuses=("flagged",)))
    assert flagged.n_runs == 1 and flagged.paths[0].route == runs[0].route and flagged.paths[0].status == "flagged"
    assert route_stats(RouteFilters(statuses=("pending",))).n_runs == 3

    with engine.begin() as conn:
        conn.execute(text("UPDATE runs SET created_at = :old WHERE id = :id"),
                     {"old": datetime(2020, 1, 1, tzinfo=UTC), "id": runs[1].run_id})
    now = datetime.now(UTC)
    assert route_stats(RouteFilters(since=now - timedelta(days=1))).n_runs == 3
    assert route_stats(RouteFilters(until=datetime(2021, 1, 1, tzinfo=UTC))).n_runs == 1
    assert route_stats(RouteFilters(presets=("balanced",), since=now + timedelta(days=1))).n_runs == 0


def test_recent_runs_newest_first_with_filters_and_limit(runs):
    recent = recent_runs(RouteFilters(), limit=10)
    assert [r.run_id for r in recent] == [r.run_id for r in reversed(runs)]
    assert isinstance(recent[0], RecentRun) and recent[0].route == runs[-1].route and recent[0].query == runs[-1].query
    assert [r.run_id for r in recent_runs(RouteFilters(presets=("minimal",)), limit=1)] == [runs[2].run_id]
    with pytest.raises(InputError):
        recent_runs(RouteFilters(), limit=0)


def test_no_runs_is_zero_not_an_error(clean_db):
    stats = route_stats(RouteFilters())
    assert stats.n_runs == 0 and stats.paths == () and stats.mean_iterations == 0.0 and stats.share_accept_best == 0.0


def test_an_inverted_date_range_is_an_input_error():
    now = datetime.now(UTC)
    with pytest.raises(InputError):
        RouteFilters(since=now, until=now - timedelta(days=1))


def test_transitions_and_route_counts_are_pure_sums_of_paths():
    paths = [RoutePath(("REFINE_QUERY", "COMPLETE"), "pending", 3), RoutePath(("REFINE_QUERY", "COMPLETE"), "approved", 1),
             RoutePath(("COMPLETE",), "auto_accepted", 2)]
    edges = {(t.source, t.target): t.count for t in count_transitions(paths)}
    assert edges[("START", "1 · REFINE_QUERY")] == 4 and edges[("1 · REFINE_QUERY", "2 · COMPLETE")] == 4
    assert edges[("2 · COMPLETE", "END · pending")] == 3 and edges[("2 · COMPLETE", "END · approved")] == 1
    assert count_routes(paths) == [("REFINE_QUERY → COMPLETE", 4), ("COMPLETE", 2)]
