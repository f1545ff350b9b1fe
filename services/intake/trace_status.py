"""What the Import runs page shows of the traces: counts per state, the backlog still to go
through (traces waiting for spans, runs from traces waiting for their assessment), and the
traces that became no run, each with its reason. Read-only views of otlp_traces."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.orm import Session


@dataclass(frozen=True)
class TraceCounts:
    open: int  # waiting for the root span or the quiet period
    assembled: int
    dropped: int
    refused: int
    late_spans: int
    runs_waiting: int  # assembled into a run that is still queued for its assessment

    @property
    def backlog(self) -> int:
        """Traces not through yet: waiting to be assembled, or their run waiting to be assessed."""
        return self.open + self.runs_waiting

    @property
    def through(self) -> int:
        """Traces done with, ever: their run assessed (or failed), or dropped, or refused."""
        return self.assembled - self.runs_waiting + self.dropped + self.refused


@dataclass(frozen=True)
class DroppedTrace:
    trace_id: str
    service_name: str | None
    state: str  # dropped or refused
    reason: str
    spans: int
    closed_at: object


# The intake row says whether an assembled trace's run is still queued; one whose row is
# gone (deleted) is through.
_TRACE_COUNTS = text("""
SELECT count(*) FILTER (WHERE t.state = 'open') AS open, count(*) FILTER (WHERE t.state = 'assembled') AS assembled,
       count(*) FILTER (WHERE t.state = 'dropped') AS dropped, count(*) FILTER (WHERE t.state = 'refused') AS refused,
       COALESCE(sum(t.late_spans), 0) AS late_spans,
       count(*) FILTER (WHERE t.state = 'assembled' AND i.status = 'queued') AS runs_waiting
FROM otlp_traces t LEFT JOIN run_intake i ON i.id = t.intake_id
""")
_DROPPED = text("""
SELECT trace_id, service_name, state, COALESCE(reason, '') AS reason, spans, closed_at
FROM otlp_traces WHERE state IN ('dropped', 'refused') ORDER BY closed_at DESC NULLS LAST LIMIT :limit
""")


def trace_counts(*, session: Session) -> TraceCounts:
    row = session.execute(_TRACE_COUNTS).mappings().one()
    return TraceCounts(**{k: int(v) for k, v in row.items()})


def dropped_traces(*, limit: int = 50, session: Session) -> list[DroppedTrace]:
    """The newest traces that became no run, each with the reason."""
    return [DroppedTrace(**row) for row in session.execute(_DROPPED, {"limit": limit}).mappings()]
