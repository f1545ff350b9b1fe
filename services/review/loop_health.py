"""The answering loop's health from stored runs (seed 004's monitoring), per UTC day and preset:
mean reflection score, how many iterations runs took, how often the judge found an unsupported
claim, how often a refinement raised confidence, CRAG's verdicts and the fallback's use.

One grouped statement does the counting: the page reads a row per (day, preset, iterations),
never a run, so a store of a million runs costs the database a scan, not the page a load.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from sqlalchemy import text

from services.domain import RouterAction
from services.scoring.crag import RetrievalVerdict
from services.store import read_transaction

VERDICTS = tuple(v.value for v in RetrievalVerdict)

# The best iteration's verdict names an unsupported claim when any claim lists a word no context
# holds. A refinement "succeeds" when a later iteration's confidence passes the first one's.
# CRAG's action searched the fallback when its outcome says what the search did
# (services.answering.corrective); the router's own fallback step is in the route.
_HEALTH_SQL = """
WITH picked AS (
    SELECT r.id, r.preset, r.iterations_count, r.best_iteration, r.reflection_score, r.crag_verdict, r.route,
           CAST(r.created_at AT TIME ZONE 'UTC' AS date) AS day
    FROM runs r
    WHERE (cardinality(CAST(:presets AS text[])) = 0 OR r.preset = ANY(:presets))
      AND (CAST(:since AS timestamptz) IS NULL OR r.created_at >= :since)
      AND (CAST(:until AS timestamptz) IS NULL OR r.created_at < :until)
), per_run AS (
    SELECT i.run_id,
           bool_or(i.ordinal = p.best_iteration AND i.verdict IS NOT NULL) AS judged,
           bool_or(i.ordinal = p.best_iteration AND jsonb_path_exists(i.verdict, '$.claims[*].unsupported[0]'))
               AS hallucinated,
           max(i.confidence) FILTER (WHERE i.ordinal = 1) AS first_confidence,
           max(i.confidence) FILTER (WHERE i.ordinal > 1) AS later_confidence,
           bool_or(i.crag ->> 'action_outcome' ~ '^(discarded|fused) ') AS fallback_answered,
           bool_or(i.crag ->> 'action_outcome' ~ '^(discarded|fused) |^fallback .* (failed|found nothing)')
               AS crag_searched
    FROM run_iterations i JOIN picked p ON p.id = i.run_id
    GROUP BY i.run_id
)
SELECT p.day, p.preset, p.iterations_count AS iterations, count(*) AS runs,
       count(p.reflection_score) AS reflected, coalesce(sum(p.reflection_score), 0) AS reflection_sum,
       count(*) FILTER (WHERE x.judged) AS judged,
       count(*) FILTER (WHERE x.hallucinated) AS hallucinated,
       count(*) FILTER (WHERE :refine = ANY(p.route)) AS refined,
       count(*) FILTER (WHERE :refine = ANY(p.route) AND x.later_confidence > x.first_confidence) AS refined_up,
       count(*) FILTER (WHERE p.crag_verdict = 'CORRECT') AS crag_correct,
       count(*) FILTER (WHERE p.crag_verdict = 'AMBIGUOUS') AS crag_ambiguous,
       count(*) FILTER (WHERE p.crag_verdict = 'INCORRECT') AS crag_incorrect,
       count(*) FILTER (WHERE x.crag_searched OR :fallback = ANY(p.route)) AS fallback_searched,
       count(*) FILTER (WHERE x.fallback_answered) AS fallback_answered
FROM picked p LEFT JOIN per_run x ON x.run_id = p.id
GROUP BY p.day, p.preset, p.iterations_count
ORDER BY p.day, p.preset, p.iterations_count
"""
_COUNTS = ("runs", "reflected", "judged", "hallucinated", "refined", "refined_up", "crag_correct", "crag_ambiguous",
           "crag_incorrect", "fallback_searched", "fallback_answered")


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


@dataclass
class HealthCell:
    """One day and preset: the counts, and the rates read from them (None where nothing counts)."""

    day: date
    preset: str
    counts: Counter[str] = field(default_factory=Counter)
    reflection_sum: float = 0.0
    iterations: Counter[int] = field(default_factory=Counter)  # iterations a run took -> runs

    @property
    def runs(self) -> int:
        return self.counts["runs"]

    @property
    def mean_reflection(self) -> float | None:
        return self.reflection_sum / self.counts["reflected"] if self.counts["reflected"] else None

    @property
    def mean_iterations(self) -> float | None:
        return sum(k * n for k, n in self.iterations.items()) / self.runs if self.runs else None

    @property
    def hallucination_rate(self) -> float | None:
        """Of the runs whose final answer was judged, the share with an unsupported claim."""
        return _share(self.counts["hallucinated"], self.counts["judged"])

    @property
    def refinement_success(self) -> float | None:
        """Of the runs that refined their query, the share whose confidence rose after it."""
        return _share(self.counts["refined_up"], self.counts["refined"])

    @property
    def fallback_use(self) -> float | None:
        return _share(self.counts["fallback_searched"], self.runs)

    def verdict_shares(self) -> dict[str, float]:
        """CRAG's verdict on the final answer's retrieval, as shares of the runs (CRAG off: none)."""
        return {v: self.counts[f"crag_{v.lower()}"] / self.runs for v in VERDICTS} if self.runs else {}


@dataclass(frozen=True)
class LoopHealth:
    cells: tuple[HealthCell, ...]  # by day, then preset

    @property
    def n_runs(self) -> int:
        return sum(c.runs for c in self.cells)

    @property
    def presets(self) -> tuple[str, ...]:
        return tuple(sorted({c.preset for c in self.cells}))

    @property
    def max_iterations(self) -> int:
        return max((k for c in self.cells for k in c.iterations), default=0)

    def totals(self, preset: str | None = None) -> HealthCell:
        """Every day (of one preset, or of all) as one cell."""
        chosen = [c for c in self.cells if preset is None or c.preset == preset]
        total = HealthCell(chosen[0].day if chosen else date.min, preset or "all")
        for cell in chosen:
            total.counts.update(cell.counts)
            total.iterations.update(cell.iterations)
            total.reflection_sum += cell.reflection_sum
        return total


def cells_from_rows(rows: Iterable[Any]) -> LoopHealth:
    """The grouped rows (day, preset, iterations and the counts) folded into one cell per day and preset."""
    cells: dict[tuple[date, str], HealthCell] = defaultdict(lambda: HealthCell(date.min, ""))
    for row in rows:
        key = (row.day, row.preset)
        cell = cells[key]
        cell.day, cell.preset = key
        cell.counts.update({name: int(getattr(row, name)) for name in _COUNTS})
        cell.iterations[int(row.iterations)] += int(row.runs)
        cell.reflection_sum += float(row.reflection_sum)
    return LoopHealth(tuple(cells[k] for k in sorted(cells)))


def loop_health(*, presets: Sequence[str] = (), since: datetime | None = None,
                until: datetime | None = None) -> LoopHealth:
    """The loop's health over the runs created in [since, until) with one of `presets` (all when empty)."""
    values = {"presets": list(presets), "since": since, "until": until, "refine": RouterAction.REFINE_QUERY.value,
              "fallback": RouterAction.FALLBACK_SEARCH.value}
    with read_transaction() as session:
        rows = session.execute(text(_HEALTH_SQL), values).all()
    return cells_from_rows(rows)
