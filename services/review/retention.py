"""Retention of runs: whole months older than an age leave the store by dropping their partition,
reviewed runs and everything recorded about them stay unless the caller says otherwise.

runs is range-partitioned by UTC month (migration 0016), and so are the rows recorded about each
run, by their run's month (RUN_MONTH_CHILDREN: iterations, events, LLM calls, review history; 0021).
Pruning a month:

- with nothing to keep, drops the month's table of runs and its children's month tables, and
  deletes the runs' intake records (run_intake is one table): nothing else is deleted row by row;
- with reviewed runs to keep, copies those and their children into new tables for the month (a
  tenth of it, say), and swaps each new table in for the old one, which is dropped.

A reviewed run is one with a verdict (reviewed_at set, or a reviewer's status) or any review
history (sent to review by hand, verdicts taken back). Only months that ended before the cutoff
go: a month straddling it stays whole, so runs live between `older_than` and `older_than` plus a
month. The month's table is locked (SHARE) first: a review saved meanwhile waits, then lands on a
run that was kept, or finds its run gone.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from db.models import RUN_CHILDREN, RUN_MONTH_CHILDREN
from services.errors import InputError
from services.settings import Settings
from services.store import transaction

MONTHS_AHEAD = 2  # a month's table exists before its first run: this month and the next two
_MAX_DAYS = 36_500
_AGE = re.compile(r"\s*(?P<n>[+-]?\d+)\s*(?P<unit>d|days?|w|weeks?)\s*", re.IGNORECASE)


def parse_age(value: str) -> timedelta:
    """'90d', '12w', '30 days' as a timedelta; anything else is refused, saying what is accepted."""
    match = _AGE.fullmatch(value or "")
    if match is None:
        raise InputError(f"an age is a whole number of days or weeks, like 90d or 12w; got {value!r}")
    n = int(match["n"])
    days = n * 7 if match["unit"].lower().startswith("w") else n
    if n <= 0:
        raise InputError(f"the age must be at least one day (got {value!r}): runs younger than it are kept, "
                         "so a negative or zero age would remove everything before this month")
    if days > _MAX_DAYS:
        raise InputError(f"an age of {days} days is over a hundred years; give at most {_MAX_DAYS}d")
    return timedelta(days=days)


@dataclass(frozen=True)
class MonthPlan:
    """What pruning does to one month: `remove` of its `runs` go, `keep` (reviewed) stay."""

    month: date
    partition: str
    runs: int
    reviewed: int
    remove: int
    keep: int
    bytes: int  # the month's table and its indexes as they are (0 while its runs wait in runs_default)


@dataclass(frozen=True)
class PruneReport:
    cutoff: datetime
    keep_reviewed: bool
    dry_run: bool
    months: tuple[MonthPlan, ...]
    children_removed: dict[str, int] = field(default_factory=dict)
    bytes_freed: int = 0  # the months' tables dropped, less the tables of kept runs that replaced them

    @property
    def runs_removed(self) -> int:
        return sum(m.remove for m in self.months)

    @property
    def runs_kept(self) -> int:
        return sum(m.keep for m in self.months)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "runs_removed": self.runs_removed, "runs_kept": self.runs_kept}


_REVIEWED = """(r.reviewed_at IS NOT NULL OR r.status IN ('approved', 'flagged', 'corrected')
               OR EXISTS (SELECT 1 FROM review_history h WHERE h.run_id = r.id))"""

# Months that ended before the cutoff, wherever their runs are (their table or runs_default).
_PLAN_SQL = """
SELECT date_trunc('month', r.created_at, 'UTC') AS month, count(*) AS runs,
       count(*) FILTER (WHERE """ + _REVIEWED + """) AS reviewed,
       runs_month_bytes(date_trunc('month', r.created_at, 'UTC')) AS bytes
FROM runs r
WHERE r.created_at < date_trunc('month', CAST(:cutoff AS timestamptz), 'UTC')
GROUP BY 1 ORDER BY 1
"""
_MONTH = "r.created_at >= :low AND r.created_at < CAST(:low AS timestamptz) + interval '1 month'"
_GONE_SQL = {
    True: "CREATE TEMP TABLE retention_gone ON COMMIT DROP AS SELECT r.id FROM runs r WHERE " + _MONTH
          + " AND NOT " + _REVIEWED,
    False: "CREATE TEMP TABLE retention_gone ON COMMIT DROP AS SELECT r.id FROM runs r WHERE " + _MONTH,
}
_COUNTS_SQL = "SELECT (SELECT count(*) FROM retention_gone), (SELECT count(*) FROM runs r WHERE " + _MONTH + ")"
_BYTES_SQL = "SELECT runs_month_bytes(:low)"  # the month's tables of runs and of their children (0021)
# Every row recorded about a removed run goes, run_intake's too: a record's payload is most of its
# bytes, and its trace id may come again once its run is gone (tests check the keys match RUN_CHILDREN).
# The month's tables of the others go with the runs' (runs_month_drop, runs_month_keep_only); what is
# in them is counted first, for the report.
_GONE_INTAKE = "DELETE FROM run_intake WHERE run_id IN (SELECT id FROM retention_gone)"
_IN_MONTH = (" WHERE run_id IN (SELECT id FROM retention_gone) AND run_created_at >= :low "
             "AND run_created_at < CAST(:low AS timestamptz) + interval '1 month'")
# Written out, not built from RUN_MONTH_CHILDREN: tests/security/test_sql_parameterized.py admits
# only constant SQL text, and the assert below keeps the two lists in step.
_GONE_IN_MONTH = {
    "review_history": "SELECT count(*) FROM review_history" + _IN_MONTH,
    "run_iterations": "SELECT count(*) FROM run_iterations" + _IN_MONTH,
    "run_events": "SELECT count(*) FROM run_events" + _IN_MONTH,
    "llm_calls": "SELECT count(*) FROM llm_calls" + _IN_MONTH,
}
assert {*_GONE_IN_MONTH, "run_intake"} == {*RUN_MONTH_CHILDREN, "run_intake"} == set(RUN_CHILDREN), \
    "a table holding rows of runs is not pruned with them"
# Tables triggers on runs keep, which dropping a month's table does not fire: their rows of the runs
# that go are deleted here (the Tuning matrix's numbers, 0017; the drill-down's index of runs, 0018),
# and the Document trends rollup is recounted (_refresh_rollup) in the same transaction. No iteration
# is deleted row by row any more, so the triggers on deleted ones (0015, 0018) do not fire either.
_KEPT_BY_TRIGGERS = {
    "run_matrix_rows": "DELETE FROM run_matrix_rows WHERE id IN (SELECT id FROM retention_gone)",
    "document_run_index": "DELETE FROM document_run_index WHERE run_id IN (SELECT id FROM retention_gone)",
}
# Migration 0020's triggers on deleted iterations skip while it is 'on': prune set it around its
# deletes of iterations until 0021 made them a table's drop; a writer that recounts itself may set it.
PRUNING_SETTING = "workbench.pruning"


def partition_name(month: date | datetime) -> str:
    return f"runs_{month.year:04d}_{month.month:02d}"


def plan_prune(*, older_than: timedelta, keep_reviewed: bool = True, now: datetime | None = None,
               session: Session) -> tuple[datetime, list[MonthPlan]]:
    """The cutoff and, per month wholly before it, what pruning would remove and keep; changes nothing."""
    cutoff = (now or datetime.now(UTC)) - older_than
    plans = []
    for row in session.execute(text(_PLAN_SQL), {"cutoff": cutoff}):
        month = row.month.astimezone(UTC).date()
        keep = int(row.reviewed) if keep_reviewed else 0
        plans.append(MonthPlan(month, partition_name(month), int(row.runs), int(row.reviewed), int(row.runs) - keep,
                               keep, int(row.bytes)))
    return cutoff, plans


def ensure_month_partitions(*, now: datetime | None = None, months_ahead: int = MONTHS_AHEAD,
                            session: Session) -> list[str]:
    """This month's table and the next ones, and a table for every month whose runs wait in
    runs_default (moved into it): created when missing, named either way."""
    start = (now or datetime.now(UTC)).astimezone(UTC)
    ahead = [datetime(start.year + (start.month - 1 + k) // 12, (start.month - 1 + k) % 12 + 1, 1, tzinfo=UTC)
             for k in range(months_ahead + 1)]
    waiting = session.execute(text(
        "SELECT DISTINCT date_trunc('month', created_at, 'UTC') FROM runs_default")).scalars().all()
    return [session.execute(text("SELECT runs_month_partition_add(:m)"), {"m": month}).scalar_one()
            for month in sorted({*ahead, *waiting})]


def prune_month(plan: MonthPlan, *, keep_reviewed: bool = True, session: Session) -> tuple[dict[str, int], int]:
    """Remove one month's runs but its reviewed ones (all, without `keep_reviewed`) with their
    children; its table must exist (ensure_month_partitions). Rows removed per child table, bytes freed."""
    low = datetime(plan.month.year, plan.month.month, 1, tzinfo=UTC)
    if session.execute(text("SELECT to_regclass(runs_month_table(:low))"), {"low": low}).scalar() is None:
        raise InputError(f"{plan.partition} does not exist: create the month's table first (ensure_month_partitions)")
    session.execute(text("SELECT runs_month_lock(:low)"), {"low": low})
    session.execute(text(_GONE_SQL[keep_reviewed]), {"low": low})
    gone, total = session.execute(text(_COUNTS_SQL), {"low": low}).one()
    removed: dict[str, int] = {}
    before = int(session.execute(text(_BYTES_SQL), {"low": low}).scalar_one())
    if gone:
        session.execute(text("ANALYZE retention_gone"))
        for child in RUN_MONTH_CHILDREN:
            removed[child] = int(session.execute(text(_GONE_IN_MONTH[child]), {"low": low}).scalar_one())
        removed["run_intake"] = session.execute(text(_GONE_INTAKE)).rowcount  # type: ignore[attr-defined]
        for table in _KEPT_BY_TRIGGERS:
            session.execute(text(_KEPT_BY_TRIGGERS[table]))
        # The tables go last: dropping or detaching them locks runs and the children's tables until the commit.
        if gone == total:
            session.execute(text("SELECT runs_month_drop(:low)"), {"low": low})
        else:
            session.execute(text("SELECT runs_month_keep_only(:low)"), {"low": low})
        _refresh_rollup(plan.month, session=session)
    session.execute(text("DROP TABLE retention_gone"))
    return removed, before - int(session.execute(text(_BYTES_SQL), {"low": low}).scalar_one())


def _refresh_rollup(month: date, *, session: Session) -> None:
    """Dropping a table fires no trigger: the Document trends rollup (0015) recounts the month's days."""
    if session.execute(text("SELECT to_regprocedure('refresh_document_day_rollup(date, date)')")).scalar() is None:
        return
    last = date(month.year + month.month // 12, month.month % 12 + 1, 1) - timedelta(days=1)
    session.execute(text("SELECT refresh_document_day_rollup(:first, :last)"), {"first": month, "last": last})


def prune(*, older_than: timedelta, keep_reviewed: bool = True, dry_run: bool = False, now: datetime | None = None,
          settings: Settings | None = None) -> PruneReport:
    """Plan, and unless `dry_run` prune, every month wholly older than `older_than`: the months
    ahead are created first, then each month is pruned in a transaction of its own (a failure
    leaves that month and the ones after it as they were; the report of a retry says what is left)."""
    now = now or datetime.now(UTC)
    with transaction(settings) as session:
        if not dry_run:
            ensure_month_partitions(now=now, session=session)
        cutoff, plans = plan_prune(older_than=older_than, keep_reviewed=keep_reviewed, now=now, session=session)
    if dry_run:
        return PruneReport(cutoff, keep_reviewed, True, tuple(plans))
    removed: dict[str, int] = {child: 0 for child in RUN_CHILDREN}
    freed = 0
    for plan in plans:
        with transaction(settings) as session:
            month_removed, month_freed = prune_month(plan, keep_reviewed=keep_reviewed, session=session)
        freed += month_freed
        for child, count in month_removed.items():
            removed[child] += count
    return PruneReport(cutoff, keep_reviewed, False, tuple(plans), removed, freed)
