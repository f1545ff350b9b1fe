"""Router paths across stored runs: which decision sequences happen, how often, how they end."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import text

from services.domain import RouterAction
from services.errors import InputError
from services.store import transaction

START = "START"
ACCEPT_BEST = RouterAction.ACCEPT_BEST


@dataclass(frozen=True)
class RouteFilters:
    """Which stored runs to look at; an empty tuple means "any"; `until` is exclusive."""

    presets: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise InputError("the start of the date range must be before its end")

    def params(self) -> dict[str, object]:
        return {"presets": list(self.presets), "statuses": list(self.statuses), "since": self.since, "until": self.until}


@dataclass(frozen=True)
class RoutePath:
    """One full route (the decision of each iteration) with the status it ended in."""

    route: tuple[str, ...]
    status: str
    count: int

    @property
    def label(self) -> str:
        return " → ".join(self.route) if self.route else "(no iterations)"

    def nodes(self) -> tuple[str, ...]:
        """START, one node per (step, decision), then the final status."""
        return (START, *(decision_node(i, d) for i, d in enumerate(self.route, 1)), end_node(self.status))


@dataclass(frozen=True)
class Transition:
    source: str
    target: str
    count: int


@dataclass(frozen=True)
class RouteStats:
    n_runs: int
    paths: tuple[RoutePath, ...]  # most frequent first
    transitions: tuple[Transition, ...]
    mean_iterations: float
    share_accept_best: float  # share of runs whose last decision was ACCEPT_BEST

    def route_counts(self) -> list[tuple[str, int]]:
        return count_routes(self.paths)


class RecentRun(NamedTuple):
    run_id: int
    query: str
    created_at: datetime
    route: tuple[str, ...]


def decision_node(step: int, decision: str) -> str:
    return f"{step} · {decision}"


def end_node(status: str) -> str:
    return f"END · {status}"


def count_transitions(paths: Iterable[RoutePath]) -> tuple[Transition, ...]:
    """Edges between consecutive nodes of every path, weighted by how many runs took them."""
    counts: Counter[tuple[str, str]] = Counter()
    for path in paths:
        nodes = path.nodes()
        for source, target in zip(nodes, nodes[1:]):
            counts[(source, target)] += path.count
    return tuple(Transition(s, t, n) for (s, t), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def count_routes(paths: Iterable[RoutePath]) -> list[tuple[str, int]]:
    """Runs per full route (whatever status it ended in), most common first."""
    counts: Counter[str] = Counter()
    for path in paths:
        counts[path.label] += path.count
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


# Grouped in the database: the page reads one row per distinct (route, status), not per run.
_ROUTE_STATS_SQL = """
SELECT route, status, count(*) AS runs, sum(iterations_count) AS iterations
FROM runs
WHERE (cardinality(CAST(:presets AS text[])) = 0 OR preset = ANY(:presets))
  AND (cardinality(CAST(:statuses AS text[])) = 0 OR status = ANY(:statuses))
  AND (CAST(:since AS timestamptz) IS NULL OR created_at >= :since)
  AND (CAST(:until AS timestamptz) IS NULL OR created_at < :until)
GROUP BY route, status
ORDER BY runs DESC, route, status
"""


def route_stats(filters: RouteFilters = RouteFilters()) -> RouteStats:
    with transaction() as session:
        rows = session.execute(text(_ROUTE_STATS_SQL), filters.params()).all()
    paths = tuple(RoutePath(tuple(r.route or ()), r.status, int(r.runs)) for r in rows)
    return summarize(paths, iterations=sum(int(r.iterations or 0) for r in rows))


def summarize(paths: Sequence[RoutePath], *, iterations: int) -> RouteStats:
    n = sum(p.count for p in paths)
    accept_best = sum(p.count for p in paths if p.route and p.route[-1] == ACCEPT_BEST)
    return RouteStats(
        n_runs=n, paths=tuple(paths), transitions=count_transitions(paths),
        mean_iterations=iterations / n if n else 0.0, share_accept_best=accept_best / n if n else 0.0,
    )


_RECENT_RUNS_SQL = """
SELECT id, query, created_at, route
FROM runs
WHERE (cardinality(CAST(:presets AS text[])) = 0 OR preset = ANY(:presets))
  AND (cardinality(CAST(:statuses AS text[])) = 0 OR status = ANY(:statuses))
  AND (CAST(:since AS timestamptz) IS NULL OR created_at >= :since)
  AND (CAST(:until AS timestamptz) IS NULL OR created_at < :until)
ORDER BY created_at DESC, id DESC
LIMIT :limit
"""


def recent_runs(filters: RouteFilters = RouteFilters(), limit: int = 50) -> list[RecentRun]:
    """The newest runs matching the filters, newest first."""
    if limit < 1:
        raise InputError(f"limit must be at least 1, got {limit}")
    with transaction() as session:
        rows = session.execute(text(_RECENT_RUNS_SQL), {**filters.params(), "limit": limit}).all()
    return [RecentRun(r.id, r.query, r.created_at, tuple(r.route or ())) for r in rows]
