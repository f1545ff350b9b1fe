"""Spans from OTLP exports kept until their trace is whole, then each trace assembled once
into an intake record (source 'otlp') that the assessment turns into a reviewable run.

A trace is ready when its root span (the one without a parent) has arrived and no span
of it has arrived for `settle_seconds`, or, rootless, when none has for `quiet_seconds`.
otlp_traces remembers every trace id: spans of a trace already assembled, dropped or
refused are counted as late (or as repeats, when sent before) and never make a second run.
Span rows live only while their trace is open: closing a trace deletes them and keeps their
number and ids on the trace row, which is all a later span of it is checked against.
A trace belongs to the app of the key that sent it: trace ids are unique per app, so two
apps sending the same trace id make two traces, and two runs.
Functions take `*, session` and do not commit: an export's spans land together or not at all.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.orm import Session

from services.errors import NotAuthenticatedError
from services.intake.api_keys import DEFAULT_APP, check_app_name
from services.intake.intake import accept_records
from services.intake.otlp import Span
from services.intake.span_facts import SpanRefusedError, span_facts
from services.intake.trace_runs import TraceSpan, assemble_trace
from services.settings import Settings
from services.store import transaction

MAX_REASON_CHARS = 2_000


@dataclass(frozen=True)
class RefusedTrace:
    trace_id: str
    spans: int
    reason: str


@dataclass(frozen=True)
class StoredExport:
    """What one export did: new spans kept, spans sent before, spans of closed traces, refusals."""

    accepted: int
    duplicates: int
    late: int
    refused: list[RefusedTrace] = field(default_factory=list)

    @property
    def rejected_spans(self) -> int:
        return sum(r.spans for r in self.refused)


# An API key taken on trust (trace_keys.TraceKeys) is checked here, where it writes: by id and
# hash, still active, or the statement stores nothing.
_ACTIVE_KEY = """
SELECT CAST(:api_key_id AS integer) AS id
WHERE CAST(:key_hash AS text) IS NULL OR EXISTS (
    SELECT 1 FROM api_keys WHERE id = CAST(:api_key_id AS integer) AND key_hash = :key_hash AND revoked_at IS NULL)
"""
# One statement per export: the key checked, the traces upserted (the row lock orders exports
# of one trace), then the spans new to the store of the traces still open; each trace's state
# and how many of its spans were kept come back (no row at all: the key was revoked). The
# parent rows come from the same statement: the foreign key is checked at its end.
_STORE = text(f"""
WITH caller AS ({_ACTIVE_KEY}), traces AS (
    INSERT INTO otlp_traces AS t (app, trace_id, service_name, api_key_id, judges)
    SELECT :app, trace_id, service_name, caller.id, :judges
    FROM unnest(CAST(:trace_ids AS text[]), CAST(:services AS text[])) AS u(trace_id, service_name) CROSS JOIN caller
    ON CONFLICT (app, trace_id) DO UPDATE SET last_received_at = now(),
        service_name = COALESCE(t.service_name, EXCLUDED.service_name)
    RETURNING trace_id, state
), kept AS (
    INSERT INTO otlp_spans (app, trace_id, span_id, parent_span_id, facts)
    SELECT :app, s.trace_id, s.span_id, s.parent, s.facts
    FROM unnest(CAST(:span_traces AS text[]), CAST(:span_ids AS text[]), CAST(:parents AS text[]),
                CAST(:facts AS jsonb[])) AS s(trace_id, span_id, parent, facts)
    JOIN traces ON traces.trace_id = s.trace_id AND traces.state = 'open'
    ON CONFLICT DO NOTHING
    RETURNING trace_id
)
SELECT traces.trace_id, traces.state, count(kept.trace_id) AS kept
FROM traces LEFT JOIN kept ON kept.trace_id = traces.trace_id
GROUP BY traces.trace_id, traces.state
""")
# Spans of closed traces (rows already locked by _STORE): those whose id the trace has not
# seen are late, counted and their ids added; the others are repeats.
_COUNT_LATE = text("""
UPDATE otlp_traces t SET late_spans = t.late_spans + n.late, span_ids = t.span_ids || n.ids
FROM (SELECT s.trace_id, count(*) AS late, array_agg(s.span_id) AS ids
      FROM (SELECT DISTINCT trace_id, span_id
            FROM unnest(CAST(:trace_ids AS text[]), CAST(:span_ids AS text[])) AS u(trace_id, span_id)) s
      JOIN otlp_traces o ON o.app = :app AND o.trace_id = s.trace_id AND NOT s.span_id = ANY(o.span_ids)
      GROUP BY s.trace_id) n
WHERE t.app = :app AND t.trace_id = n.trace_id
RETURNING n.late
""")
_REFUSE_TRACES = text("""
INSERT INTO otlp_traces AS t (app, trace_id, service_name, api_key_id, state, reason, closed_at)
SELECT :app, trace_id, service_name, CAST(:api_key_id AS integer), 'refused', reason, now()
FROM unnest(CAST(:trace_ids AS text[]), CAST(:services AS text[]), CAST(:reasons AS text[])) AS u(trace_id, service_name, reason)
ON CONFLICT (app, trace_id) DO UPDATE SET state = 'refused', reason = EXCLUDED.reason, closed_at = now(),
    last_received_at = now()
WHERE t.state = 'open'
""")
# Closing traces, given as (app, trace id) pairs: their span rows go, their number and ids
# stay on the trace row.
_RETIRE_SPANS = text("""
WITH closing AS (SELECT * FROM unnest(CAST(:apps AS text[]), CAST(:trace_ids AS text[])) AS c(app, trace_id)),
gone AS (
    DELETE FROM otlp_spans s USING closing c WHERE s.app = c.app AND s.trace_id = c.trace_id
    RETURNING s.app, s.trace_id, s.span_id
)
UPDATE otlp_traces t SET spans = g.spans, span_ids = g.span_ids
FROM (SELECT app, trace_id, count(*) AS spans, array_agg(span_id) AS span_ids FROM gone GROUP BY app, trace_id) g
WHERE t.app = g.app AND t.trace_id = g.trace_id
""")


def store_spans(spans: Sequence[Span], *, app: str = DEFAULT_APP, api_key_id: int | None = None,
                key_hash: str | None = None, judges: bool = True, session: Session) -> StoredExport:
    """Keep an export's spans under their traces, of `app`. A trace with a span that can never
    be part of a record (span_facts.SpanRefusedError) is refused whole: none of its spans is
    kept, spans of it kept before are dropped, and it will not be assembled. With `key_hash`,
    the key `api_key_id` must still be active (NotAuthenticatedError, nothing stored)."""
    check_app_name(app)
    by_trace: dict[str, list[Span]] = defaultdict(list)
    for span in spans:
        by_trace[span.trace_id].append(span)
    facts: dict[tuple[str, str], dict[str, object]] = {}
    refused: list[RefusedTrace] = []
    for trace_id, members in by_trace.items():
        try:
            facts.update({(s.trace_id, s.span_id): span_facts(s) for s in members})
        except SpanRefusedError as exc:
            refused.append(RefusedTrace(trace_id, len(members), str(exc)[:MAX_REASON_CHARS]))
    if refused:
        key = {"api_key_id": api_key_id, "key_hash": key_hash}
        if key_hash is not None and session.execute(text(_ACTIVE_KEY), key).first() is None:
            raise _revoked()
        _refuse(refused, by_trace, app=app, api_key_id=api_key_id, session=session)
    # Trace rows are locked in one order by every export, so two exports sharing traces never deadlock.
    keep = {t: by_trace[t] for t in sorted(by_trace) if t not in {r.trace_id for r in refused}}
    if not keep:
        return StoredExport(0, 0, 0, refused)
    rows = [s for members in keep.values() for s in members]
    states = session.execute(_STORE, {
        "trace_ids": list(keep), "services": [m[0].service_name for m in keep.values()], "app": app,
        "api_key_id": api_key_id, "key_hash": key_hash, "judges": judges,
        "span_traces": [s.trace_id for s in rows], "span_ids": [s.span_id for s in rows],
        "parents": [s.parent_span_id for s in rows], "facts": [json.dumps(facts[(s.trace_id, s.span_id)]) for s in rows],
    }).all()
    if not states:
        raise _revoked()
    accepted = sum(row.kept for row in states)
    closed = [s for row in states if row.state != "open" for s in keep[row.trace_id]]
    late = _count_late(closed, app=app, session=session) if closed else 0
    return StoredExport(accepted, len(rows) - accepted - late, late, refused)


def _revoked() -> NotAuthenticatedError:
    return NotAuthenticatedError("that API key was revoked; ask for a new one")


def _count_late(spans: list[Span], *, app: str, session: Session) -> int:
    return sum(session.execute(_COUNT_LATE, {"app": app, "trace_ids": [s.trace_id for s in spans],
                                             "span_ids": [s.span_id for s in spans]}).scalars())


def _refuse(refused: list[RefusedTrace], by_trace: dict[str, list[Span]], *, app: str, api_key_id: int | None,
            session: Session) -> None:
    reasons = {r.trace_id: r.reason for r in refused}
    ids = sorted(reasons)
    session.execute(_REFUSE_TRACES, {"app": app, "trace_ids": ids, "services": [by_trace[t][0].service_name for t in ids],
                                     "reasons": [reasons[t] for t in ids], "api_key_id": api_key_id})
    session.execute(_RETIRE_SPANS, {"apps": [app] * len(ids), "trace_ids": ids})  # spans kept before, of a trace refused now


# --- assembly --------------------------------------------------------------------------------

@dataclass(frozen=True)
class AssemblySummary:
    assembled: int  # became intake records (created, or already there under the same trace id)
    dropped: int  # not RAG, or not a valid record: the reason is on the trace


# SKIP LOCKED: an export holding a trace's row (adding spans) is not waited for, and any
# number of assemblers can run; each trace is claimed by one.
_READY = text("""
SELECT app, trace_id, service_name, api_key_id, judges FROM otlp_traces t
WHERE state = 'open' AND (
    (last_received_at <= now() - make_interval(secs => :settle)
     AND EXISTS (SELECT 1 FROM otlp_spans s WHERE s.app = t.app AND s.trace_id = t.trace_id AND s.parent_span_id IS NULL))
    OR last_received_at <= now() - make_interval(secs => :quiet))
ORDER BY last_received_at LIMIT :limit
FOR UPDATE SKIP LOCKED
""")
_SPANS_OF = text("""
SELECT s.app, s.trace_id, s.span_id, s.parent_span_id, s.facts
FROM otlp_spans s JOIN unnest(CAST(:apps AS text[]), CAST(:trace_ids AS text[])) AS c(app, trace_id)
    ON s.app = c.app AND s.trace_id = c.trace_id
WHERE s.facts IS NOT NULL
""")
_CLOSE = text("""
UPDATE otlp_traces t SET state = c.state, reason = c.reason, intake_id = c.intake_id, closed_at = now()
FROM unnest(CAST(:apps AS text[]), CAST(:trace_ids AS text[]), CAST(:states AS text[]), CAST(:reasons AS text[]),
            CAST(:intake_ids AS bigint[])) AS c(app, trace_id, state, reason, intake_id)
WHERE t.app = c.app AND t.trace_id = c.trace_id
""")


def assemble_ready_traces(*, settle_seconds: float, quiet_seconds: float, limit: int = 200,
                          session: Session) -> AssemblySummary:
    """Turn up to `limit` ready traces into queued intake records, or drop them with the reason."""
    ready = session.execute(_READY, {"settle": settle_seconds, "quiet": quiet_seconds, "limit": limit}).all()
    if not ready:
        return AssemblySummary(0, 0)
    spans: dict[tuple[str, str], list[TraceSpan]] = defaultdict(list)
    for row in session.execute(_SPANS_OF, {"apps": [r.app for r in ready], "trace_ids": [r.trace_id for r in ready]}):
        spans[(row.app, row.trace_id)].append(TraceSpan(row.span_id, row.parent_span_id, row.facts))
    closed: dict[tuple[str, str], tuple[str, str | None, int | None]] = {}
    batches: dict[tuple[str, int | None, bool], list] = defaultdict(list)  # type: ignore[type-arg]
    for row in ready:
        outcome = assemble_trace(row.trace_id, spans[(row.app, row.trace_id)], service_name=row.service_name)
        if outcome.record is None:
            closed[(row.app, row.trace_id)] = ("dropped", (outcome.reason or "")[:MAX_REASON_CHARS], None)
        else:
            batches[(row.app, row.api_key_id, row.judges)].append(outcome.record)
    for (app, api_key_id, judges), records in batches.items():
        for accepted in accept_records(records, source="otlp", app=app, api_key_id=api_key_id, judges=judges,
                                       session=session):
            assert accepted.trace_id is not None
            closed[(app, accepted.trace_id)] = ("assembled", None, accepted.intake_id)
    keys = list(closed)
    apps, ids = [k[0] for k in keys], [k[1] for k in keys]
    session.execute(_CLOSE, {"apps": apps, "trace_ids": ids, "states": [closed[k][0] for k in keys],
                             "reasons": [closed[k][1] for k in keys], "intake_ids": [closed[k][2] for k in keys]})
    session.execute(_RETIRE_SPANS, {"apps": apps, "trace_ids": ids})
    dropped = sum(1 for c in closed.values() if c[0] == "dropped")
    return AssemblySummary(len(closed) - dropped, dropped)


def assemble_traces(*, settings: Settings, batch: int = 200) -> AssemblySummary:
    """Assemble every trace ready now, `batch` per transaction (`workbench intake process`)."""
    assembled = dropped = 0
    while True:
        with transaction(settings) as session:
            done = assemble_ready_traces(settle_seconds=settings.otlp_settle_seconds,
                                         quiet_seconds=settings.otlp_quiet_seconds, limit=batch, session=session)
        assembled, dropped = assembled + done.assembled, dropped + done.dropped
        if done.assembled + done.dropped < batch:
            return AssemblySummary(assembled, dropped)
