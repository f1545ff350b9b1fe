"""Document trends computed from the runs themselves: the reference the rollup is checked against.

services/review/documents.document_trends reads the rollup the triggers of migration 0015 keep;
this reads every run in scope and its best iteration's hits, as the page did before (0.1-0.2 ms
a run: 115 s at a million runs). Tests hold the two equal on small stores through inserts,
verdicts and deletes; bench/volume.py can check them on a large one. The same for the drill-down:
documents.document_runs reads the index of 0018, document_runs_from_runs the runs' hits.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import text
from sqlalchemy.orm import Session

from services.domain import ANONYMOUS_CONTEXT
from services.review.documents import (
    _HIT_COLLECTION,
    _NAMED_HIT,
    _SCOPED,
    LOW_LEVELS,
    OUTSIDE_CORPUS,
    REJECTED,
    DocumentRun,
    DocumentTrend,
    check_trend_filters,
    trend_from_row,
)

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


def document_trends_from_runs(*, collection: str | None = None, since: datetime | None = None,
                              until: datetime | None = None, min_runs: int = 1, limit: int | None = None,
                              session: Session) -> list[DocumentTrend]:
    """What document_trends lists, counted from the runs (any bounds, not only whole days)."""
    check_trend_filters(min_runs=min_runs, limit=limit)
    rows = session.execute(_TRENDS, {
        "collection": collection, "since": since, "until": until, "min_runs": min_runs, "limit": limit,
        "low_levels": list(LOW_LEVELS), "anonymous": ANONYMOUS_CONTEXT, "rejected": list(REJECTED),
        "outside": OUTSIDE_CORPUS,
    }).mappings()
    return [trend_from_row(row) for row in rows]


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


def document_runs_from_runs(external_id: str, *, collection: str, since: datetime | None = None,
                            until: datetime | None = None, limit: int = 200, session: Session) -> list[DocumentRun]:
    """What document_runs lists, read from every run in [since, until) and its best iteration's hits
    (the drill-down before 0018: 25-58 s for a rare document at a million runs)."""
    rows = session.execute(_DOCUMENT_RUNS, {
        "external_id": external_id, "collection": None, "document_collection": collection, "since": since,
        "until": until, "limit": limit, "anonymous": ANONYMOUS_CONTEXT, "outside": OUTSIDE_CORPUS,
    }).mappings()
    return [DocumentRun(**row) for row in rows]
