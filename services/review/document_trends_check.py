"""Document trends computed from the runs themselves: the reference the rollup is checked against.

services/review/documents.document_trends reads the rollup the triggers of migration 0015 keep;
this reads every run in scope and its best iteration's hits, as the page did before (0.1-0.2 ms
a run: 115 s at a million runs). Tests hold the two equal on small stores through inserts,
verdicts and deletes; bench/volume.py can check them on a large one.
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
