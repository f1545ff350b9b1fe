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
to count them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from services.domain import ANONYMOUS_CONTEXT
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

_TRENDS = text(_SCOPED + """,
appearances AS (  -- one row per (run, document)
    SELECT d.collection, d.external_id, s.status, s.final_confidence, s.created_at,
           s.status = ANY(CAST(:rejected AS text[]))
           OR (s.final_level = ANY(CAST(:low_levels AS text[])) AND s.status <> 'approved') AS troubled,
           s.final_level = ANY(CAST(:low_levels AS text[])) AS low,
           bool_or(d.retrieved) AS retrieved, bool_or(d.cited) AS cited, max(d.title) AS title
    FROM scoped s
    CROSS JOIN LATERAL (
        SELECT""" + _HIT_COLLECTION + """, h ->> 'external_id', NULLIF(h ->> 'title', ''), true, false
        FROM jsonb_array_elements(s.hits) h
        WHERE""" + _NAMED_HIT + """
        UNION ALL
        SELECT s.collection, c ->> 'external_id', NULL, false, true FROM jsonb_array_elements(s.citations) c
    ) AS d(collection, external_id, title, retrieved, cited)
    WHERE d.external_id <> ''
    GROUP BY s.id, d.collection, s.status, s.final_confidence, s.final_level, s.created_at, d.external_id
), totals AS (
    SELECT collection, external_id, COALESCE(max(title), '') AS title, count(*) AS runs,
           count(*) FILTER (WHERE retrieved) AS retrieved, count(*) FILTER (WHERE cited) AS cited,
           avg(final_confidence) AS mean_confidence,
           count(*) FILTER (WHERE status = 'approved') AS approved,
           count(*) FILTER (WHERE status = 'flagged') AS flagged,
           count(*) FILTER (WHERE status = 'corrected') AS corrected,
           count(*) FILTER (WHERE status = 'pending') AS pending,
           count(*) FILTER (WHERE status = 'auto_accepted') AS auto_accepted,
           count(*) FILTER (WHERE low) AS low_confidence,
           count(*) FILTER (WHERE troubled) AS troubled
    FROM appearances
    GROUP BY collection, external_id
    HAVING count(*) >= :min_runs
), weekly AS (
    SELECT collection, external_id, CAST(date_trunc('week', created_at AT TIME ZONE 'UTC') AS date) AS week,
           count(*) AS runs, avg(final_confidence) AS mean_confidence, count(*) FILTER (WHERE troubled) AS troubled
    FROM appearances
    GROUP BY 1, 2, 3
), series AS (
    SELECT collection, external_id,
           jsonb_agg(jsonb_build_array(week, runs, mean_confidence, troubled) ORDER BY week) AS weeks
    FROM weekly
    GROUP BY collection, external_id
)
SELECT t.*, s.weeks
FROM totals t JOIN series s USING (collection, external_id)
ORDER BY t.troubled DESC, CAST(t.troubled AS float8) / t.runs DESC, t.runs DESC, t.collection, t.external_id
LIMIT CAST(:limit AS bigint)
""")


def document_trends(*, collection: str | None = None, since: datetime | None = None, until: datetime | None = None,
                    min_runs: int = 1, limit: int | None = None, session: Session) -> list[DocumentTrend]:
    """Every document the runs created in [since, until) retrieved or cited, fix-first order.

    `collection` None means every collection; `limit` None means every document.
    """
    if min_runs < 1:
        raise InputError("min_runs must be at least 1")
    if limit is not None and limit < 1:
        raise InputError("limit must be at least 1 (or None for every document)")
    rows = session.execute(_TRENDS, {
        "collection": collection, "since": since, "until": until, "min_runs": min_runs, "limit": limit,
        "low_levels": list(LOW_LEVELS), "anonymous": ANONYMOUS_CONTEXT, "rejected": list(REJECTED),
        "outside": OUTSIDE_CORPUS,
    }).mappings()
    return [_trend(row) for row in rows]


def _trend(row: Any) -> DocumentTrend:
    weeks = tuple(WeekPoint(date.fromisoformat(week), int(runs), float(mean), int(troubled))
                  for week, runs, mean, troubled in row["weeks"])
    values = {key: row[key] for key in DocumentTrend.__dataclass_fields__ if key != "weeks"}
    return DocumentTrend(**{**values, "mean_confidence": float(row["mean_confidence"]), "weeks": weeks})


_DOCUMENT_RUNS = text(_SCOPED + """
SELECT s.id AS run_id, s.query, s.source, s.status, s.final_confidence, s.final_level, s.created_at,
       hit.best_rank, cite.cited
FROM scoped s
CROSS JOIN LATERAL (
    SELECT count(*) > 0 AS retrieved, min(CAST(h ->> 'rank' AS integer)) AS best_rank
    FROM jsonb_array_elements(s.hits) h
    WHERE h ->> 'external_id' = :external_id AND""" + _HIT_COLLECTION + """ = :document_collection
      AND""" + _NAMED_HIT + """
) hit
CROSS JOIN LATERAL (
    SELECT s.collection = :document_collection
           AND EXISTS (SELECT 1 FROM jsonb_array_elements(s.citations) c WHERE c ->> 'external_id' = :external_id) AS cited
) cite
WHERE hit.retrieved OR cite.cited
ORDER BY s.created_at DESC, s.id DESC
LIMIT :limit
""")


def document_runs(external_id: str, *, collection: str, since: datetime | None = None,
                  until: datetime | None = None, limit: int = 200, session: Session) -> list[DocumentRun]:
    """The runs (newest first) whose best iteration retrieved the document or whose answer cited it;
    `collection` as document_trends lists it (a run's collection, or outside_corpus(source))."""
    if limit < 1:
        raise InputError("limit must be at least 1")
    rows = session.execute(_DOCUMENT_RUNS, {
        "external_id": external_id, "collection": None, "document_collection": collection, "since": since,
        "until": until, "limit": limit, "anonymous": ANONYMOUS_CONTEXT, "outside": OUTSIDE_CORPUS,
    }).mappings()
    return [DocumentRun(**row) for row in rows]
