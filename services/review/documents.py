"""Confidence trends per document: which documents keep turning up in weak or flagged answers.

A document "appears" in a run when the run's best iteration retrieved it (a hit) or the
final answer cited it; a run counts once per document however many of its chunks showed
up. Documents are keyed by collection and external id: the corpus's for the workbench's
own runs, the source system's document id (or, lacking one, its source) for imported
runs. "Troubled" runs are
the ones a team should look at: flagged or corrected by a reviewer, or answered with LOW or
VERY LOW confidence and not approved (a reviewer who approved a low-confidence answer found
nothing to fix). The fix-first order puts the documents with the most troubled runs on top,
then the larger troubled share, then the busier document.

An imported context whose document id names no document of the corpus has a negative
document id (services/intake/context_scores.py): it is listed under OUTSIDE_CORPUS and the
run's source ("outside the corpus (import)"), not under the run's collection, which does
not hold it. One that names neither a document id nor a source becomes a hit called
"context <rank>"; it is no document anyone could fix, so it is left out here.

Everything is aggregated in SQL, one statement per question, so a page never loads runs
to count them. The trends read a rollup per document and UTC day that triggers keep with every
write of runs (migration 0015), the drill-down an index of each document's runs kept the same way
(0018); document_trends_check computes both from the runs themselves (document_trends_from_runs,
document_runs_from_runs), the references they are tested against.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from services.errors import InputError

LOW_LEVELS = ("LOW", "VERY LOW")
OUTSIDE_CORPUS = "outside the corpus"
REJECTED = ("flagged", "corrected")  # a reviewer's verdict that the answer was wrong


def outside_corpus(source: str) -> str:
    """The collection name documents from outside the corpus are listed under, by the runs' source."""
    return f"{OUTSIDE_CORPUS} ({source})"


@dataclass(frozen=True)
class WeekPoint:
    """One week (Monday, UTC) of a document's runs."""

    week: date
    runs: int
    mean_confidence: float
    troubled: int


@dataclass(frozen=True)
class DocumentTrend:
    """How one document fared in the stored runs it appeared in."""

    collection: str
    external_id: str
    title: str
    runs: int  # runs that retrieved or cited it
    retrieved: int  # of those, runs whose best iteration retrieved it
    cited: int  # of those, runs whose final answer cited it
    mean_confidence: float  # mean final confidence of those runs
    approved: int
    flagged: int
    corrected: int
    pending: int
    auto_accepted: int
    low_confidence: int  # runs answered with LOW or VERY LOW confidence (any status)
    troubled: int  # runs flagged or corrected, or low-confidence and not approved (each run once)
    weeks: tuple[WeekPoint, ...]

    def __post_init__(self) -> None:
        statuses = self.approved + self.flagged + self.corrected + self.pending + self.auto_accepted
        if not 0 < max(self.retrieved, self.cited) <= self.runs or statuses != self.runs:
            raise ValueError(f"inconsistent counts for document {self.external_id!r}")
        if not self.rejected <= self.troubled <= min(self.runs, self.rejected + self.low_confidence):
            raise ValueError(f"inconsistent troubled count for document {self.external_id!r}")

    @property
    def troubled_share(self) -> float:
        return self.troubled / self.runs

    @property
    def rejected(self) -> int:
        """Runs a reviewer flagged or corrected: the first segment of the fix-first bars."""
        return self.flagged + self.corrected

    @property
    def low_not_flagged(self) -> int:
        """Low-confidence runs not yet reviewed either way: the second segment of the fix-first bars."""
        return self.troubled - self.rejected


@dataclass(frozen=True)
class DocumentRun:
    """One run a document appeared in, for the drill-down."""

    run_id: int
    query: str
    source: str
    status: str
    final_confidence: float
    final_level: str
    created_at: datetime
    best_rank: int | None  # the document's best hit rank in the best iteration; None when only cited
    cited: bool


# Runs in scope, each with its best iteration's hits (none when stored without iterations).
_SCOPED = """
WITH scoped AS (
    SELECT r.id, r.query, r.source, r.collection, r.status, r.final_confidence, r.final_level, r.created_at,
           r.citations, COALESCE(it.retrieval -> 'hits', '[]'::jsonb) AS hits
    FROM runs r
    LEFT JOIN run_iterations it ON it.run_id = r.id AND it.ordinal = r.best_iteration
    WHERE (CAST(:collection AS text) IS NULL OR r.collection = CAST(:collection AS text))
      AND (CAST(:since AS timestamptz) IS NULL OR r.created_at >= CAST(:since AS timestamptz))
      AND (CAST(:until AS timestamptz) IS NULL OR r.created_at < CAST(:until AS timestamptz))
)"""
# A hit that stands for a document: not an imported context that named none.
_NAMED_HIT = """
NOT (COALESCE(CAST(h ->> 'document_id' AS bigint), 0) < 0 AND h ->> 'external_id' = :anonymous || (h ->> 'rank'))"""
# Where a hit's document is listed: its run's collection, or outside the corpus by the run's source.
_HIT_COLLECTION = """
CASE WHEN COALESCE(CAST(h ->> 'document_id' AS bigint), 0) < 0 THEN :outside || ' (' || s.source || ')'
     ELSE s.collection END"""

# The page's sums over the rollup (migration 0015: per UTC day, runs' collection, listed collection
# and document, with runs per status counted in columns, kept by triggers on every write of runs and
# their best iteration): at most documents x days rows, however many runs there are.
# Each counted column summed under its own name (written out: SQL is built from constants only).
_SUMS = """CAST(sum(runs) AS bigint) AS runs, CAST(sum(retrieved) AS bigint) AS retrieved,
           CAST(sum(cited) AS bigint) AS cited, CAST(sum(approved) AS bigint) AS approved,
           CAST(sum(flagged) AS bigint) AS flagged, CAST(sum(corrected) AS bigint) AS corrected,
           CAST(sum(pending) AS bigint) AS pending, CAST(sum(auto_accepted) AS bigint) AS auto_accepted,
           CAST(sum(low_confidence) AS bigint) AS low_confidence, CAST(sum(troubled) AS bigint) AS troubled"""
_TRENDS = text("""
WITH weekly AS (
    SELECT collection, external_id, CAST(date_trunc('week', CAST(day AS timestamp)) AS date) AS week,
           max(title) AS title, sum(confidence_sum) AS confidence_sum, """ + _SUMS + """
    FROM document_day_rollup
    WHERE (CAST(:collection AS text) IS NULL OR run_collection = CAST(:collection AS text))
      AND (CAST(:first_day AS date) IS NULL OR day >= CAST(:first_day AS date))
      AND (CAST(:end_day AS date) IS NULL OR day < CAST(:end_day AS date))
    GROUP BY 1, 2, 3
    HAVING sum(runs) > 0
), totals AS (
    SELECT collection, external_id, COALESCE(max(title), '') AS title,
           CAST(sum(confidence_sum) / sum(runs) AS float8) AS mean_confidence, """ + _SUMS + """,
           jsonb_agg(jsonb_build_array(week, runs, CAST(confidence_sum / runs AS float8), troubled)
                     ORDER BY week) AS weeks
    FROM weekly
    GROUP BY collection, external_id
    HAVING sum(runs) >= :min_runs
)
SELECT * FROM totals t
ORDER BY t.troubled DESC, CAST(t.troubled AS float8) / t.runs DESC, t.runs DESC, t.collection, t.external_id
LIMIT CAST(:limit AS bigint)
""")


def document_trends(*, collection: str | None = None, since: datetime | None = None, until: datetime | None = None,
                    min_runs: int = 1, limit: int | None = None, session: Session) -> list[DocumentTrend]:
    """Every document the runs created in [since, until) retrieved or cited, fix-first order.

    `collection` None means every collection; `limit` None means every document. The counts are
    kept per UTC day, so `since` and `until` are whole days (midnight UTC, as day_range gives).
    """
    check_trend_filters(min_runs=min_runs, limit=limit)
    rows = session.execute(_TRENDS, {
        "collection": collection, "first_day": _whole_day(since, "since"), "end_day": _whole_day(until, "until"),
        "min_runs": min_runs, "limit": limit,
    }).mappings()
    return [trend_from_row(row) for row in rows]


def check_trend_filters(*, min_runs: int, limit: int | None) -> None:
    if min_runs < 1:
        raise InputError("min_runs must be at least 1")
    if limit is not None and limit < 1:
        raise InputError("limit must be at least 1 (or None for every document)")


def _whole_day(bound: datetime | None, name: str) -> date | None:
    if bound is None:
        return None
    if bound == datetime.max.replace(tzinfo=UTC):  # day_end(date.max): no end
        return None
    utc = bound.astimezone(UTC) if bound.tzinfo is not None else None
    if utc is None or utc.time() != time():
        raise InputError(f"document trends are counted per UTC day: {name} must be midnight UTC "
                         f"(services.review.days.day_range gives such bounds), not {bound.isoformat()}")
    return utc.date()


def trend_from_row(row: Any) -> DocumentTrend:
    weeks = tuple(WeekPoint(date.fromisoformat(week), int(runs), float(mean), int(troubled))
                  for week, runs, mean, troubled in row["weeks"])
    values = {key: row[key] for key in DocumentTrend.__dataclass_fields__ if key != "weeks"}
    return DocumentTrend(**{**values, "mean_confidence": float(row["mean_confidence"]), "weeks": weeks})


# The drill-down from document_run_index (migration 0018: one row per listed collection, document
# and run, kept by triggers on runs and run_iterations): the newest `limit` along its key, then the
# columns shown read from runs by (id, created_at), one key probe per run listed (a LATERAL, so it
# stays a probe: joined plainly, the planner misjudged the join and hashed a scan of every run,
# 1.0 s for a document in 45,801 runs). document_trends_check.document_runs_from_runs reads the
# same from the runs' hits, as a reference.
_DOCUMENT_RUNS = text("""
WITH newest AS MATERIALIZED (
    SELECT run_id, created_at, best_rank, cited FROM document_run_index
    WHERE collection = :collection AND external_id = :external_id
      AND (CAST(:since AS timestamptz) IS NULL OR created_at >= CAST(:since AS timestamptz))
      AND (CAST(:until AS timestamptz) IS NULL OR created_at < CAST(:until AS timestamptz))
    ORDER BY created_at DESC, run_id DESC
    LIMIT :limit
)
SELECT i.run_id, r.query, r.source, r.status, r.final_confidence, r.final_level, i.created_at, i.best_rank, i.cited
FROM newest i
CROSS JOIN LATERAL (
    SELECT query, source, status, final_confidence, final_level FROM runs
    WHERE runs.id = i.run_id AND runs.created_at = i.created_at
) r
ORDER BY i.created_at DESC, i.run_id DESC
""")


def document_runs(external_id: str, *, collection: str, since: datetime | None = None,
                  until: datetime | None = None, limit: int = 200, session: Session) -> list[DocumentRun]:
    """The runs (newest first) whose best iteration retrieved the document or whose answer cited it;
    `collection` as document_trends lists it (a run's collection, or outside_corpus(source))."""
    if limit < 1:
        raise InputError("limit must be at least 1")
    rows = session.execute(_DOCUMENT_RUNS, {"external_id": external_id, "collection": collection, "since": since,
                                            "until": until, "limit": limit}).mappings()
    return [DocumentRun(**row) for row in rows]
