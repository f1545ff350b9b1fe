"""Runs as stored: events, iterations, the final state; saved atomically, loaded whole."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import LLMCallRow, RunEvent, RunIteration
from db.models import Run as RunRow
from services.answering.llm.base import LLMCall
from services.errors import NotFoundError
from services.store import transaction

STATUSES = ("auto_accepted", "pending", "approved", "flagged", "corrected")


@dataclass(frozen=True)
class Event:
    seq: int
    event_type: str
    message: str
    ts: datetime
    elapsed_ms: float
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ts": self.ts.isoformat()}


@dataclass(frozen=True)
class Iteration:
    """One pass of retrieve -> score -> CRAG -> generate -> reflect -> grade -> decide."""

    ordinal: int
    query_used: str
    sub_queries: tuple[str, ...]
    retrieval: dict[str, Any]  # RetrievalResult.to_dict(): every hit with all its scores
    components: tuple[float, ...]
    raw_metrics: dict[str, Any]
    retrieval_confidence: float
    confidence: float  # blended
    level: str
    crag: dict[str, Any] | None
    answer: str
    citations: tuple[dict[str, Any], ...]
    reflection: dict[str, Any] | None
    grade: dict[str, Any] | None
    gaps: tuple[str, ...]
    decision: str
    decision_reason: str
    signals: dict[str, float]
    latency_ms: dict[str, float]
    errors: tuple[dict[str, str], ...] = ()
    llm_calls: tuple[LLMCall, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["llm_calls"] = [c.to_dict() for c in self.llm_calls]
        return data


@dataclass(frozen=True)
class Run:
    query: str
    preset: str
    collection: str
    source: str
    backend: str
    model: str
    status: str
    final_answer: str
    citations: tuple[dict[str, Any], ...]
    final_confidence: float
    final_level: str
    retrieval_confidence: float
    components: tuple[float, ...]
    reflection_score: float | None
    grade: int | None
    crag_verdict: str | None
    signals: dict[str, float]  # the best iteration's blend inputs: re-blended when weights change
    route: tuple[str, ...]
    best_iteration: int
    weights_profile: str
    weights_profile_id: int | None
    config: dict[str, Any]
    outcome_note: str
    latency_ms: float
    iterations: tuple[Iteration, ...]
    events: tuple[Event, ...]
    run_id: int | None = None
    created_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["iterations"] = [i.to_dict() for i in self.iterations]
        data["events"] = [e.to_dict() for e in self.events]
        data["created_at"] = self.created_at.isoformat() if self.created_at else None
        return data


def save_run(run: Run, *, session: Session) -> int:
    """Insert the run with its iterations, events and LLM calls (caller owns the transaction)."""
    row = RunRow(
        query=run.query, preset=run.preset, collection=run.collection, source=run.source, backend=run.backend,
        model=run.model, status=run.status, final_answer=run.final_answer, citations=list(run.citations),
        final_confidence=run.final_confidence, final_level=run.final_level,
        retrieval_confidence=run.retrieval_confidence, components=list(run.components),
        reflection_score=run.reflection_score, grade=run.grade, crag_verdict=run.crag_verdict,
        signals=run.signals, route=list(run.route), best_iteration=run.best_iteration, iterations_count=len(run.iterations),
        weights_profile_id=run.weights_profile_id, weights_profile=run.weights_profile, config=run.config,
        outcome_note=run.outcome_note, latency_ms=run.latency_ms,
    )
    session.add(row)
    session.flush()
    for it in run.iterations:
        data = it.to_dict()
        data.pop("llm_calls")
        session.add(RunIteration(run_id=row.id, **{k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}))
        for call in it.llm_calls:
            session.add(LLMCallRow(run_id=row.id, iteration=it.ordinal, **call.to_dict()))
    for ev in run.events:
        session.add(RunEvent(run_id=row.id, seq=ev.seq, ts=ev.ts, elapsed_ms=ev.elapsed_ms,
                             event_type=ev.event_type, message=ev.message, data=ev.data))
    session.flush()
    return row.id


def load_run(run_id: int, *, session: Session | None = None) -> Run:
    if session is None:
        with transaction() as own:
            return load_run(run_id, session=own)
    row = session.get(RunRow, run_id)
    if row is None:
        raise NotFoundError(f"run {run_id} does not exist")
    iterations = session.scalars(select(RunIteration).where(RunIteration.run_id == run_id).order_by(RunIteration.ordinal)).all()
    calls = session.scalars(select(LLMCallRow).where(LLMCallRow.run_id == run_id).order_by(LLMCallRow.id)).all()
    events = session.scalars(select(RunEvent).where(RunEvent.run_id == run_id).order_by(RunEvent.seq)).all()
    return _run_from_rows(row, iterations, calls, events)


_CALL_FIELDS = tuple(LLMCall.__dataclass_fields__)


def _run_from_rows(row: RunRow, iterations, calls, events) -> Run:  # type: ignore[no-untyped-def]
    calls_by_iteration: dict[int, list[LLMCall]] = {}
    for c in calls:
        calls_by_iteration.setdefault(c.iteration or 0, []).append(LLMCall(**{f: getattr(c, f) for f in _CALL_FIELDS}))
    return Run(
        query=row.query, preset=row.preset, collection=row.collection, source=row.source, backend=row.backend,
        model=row.model, status=row.status, final_answer=row.final_answer, citations=tuple(row.citations),
        final_confidence=row.final_confidence, final_level=row.final_level,
        retrieval_confidence=row.retrieval_confidence, components=tuple(row.components),
        reflection_score=row.reflection_score, grade=row.grade, crag_verdict=row.crag_verdict,
        signals=row.signals, route=tuple(row.route), best_iteration=row.best_iteration, weights_profile=row.weights_profile,
        weights_profile_id=row.weights_profile_id, config=row.config, outcome_note=row.outcome_note,
        latency_ms=row.latency_ms, run_id=row.id, created_at=row.created_at,
        iterations=tuple(
            Iteration(
                ordinal=it.ordinal, query_used=it.query_used, sub_queries=tuple(it.sub_queries), retrieval=it.retrieval,
                components=tuple(it.components), raw_metrics=it.raw_metrics,
                retrieval_confidence=it.retrieval_confidence, confidence=it.confidence, level=it.level, crag=it.crag,
                answer=it.answer, citations=tuple(it.citations), reflection=it.reflection, grade=it.grade,
                gaps=tuple(it.gaps), decision=it.decision, decision_reason=it.decision_reason, signals=it.signals,
                latency_ms=it.latency_ms, errors=tuple(it.errors),
                llm_calls=tuple(calls_by_iteration.get(it.ordinal, ())),
            )
            for it in iterations
        ),
        events=tuple(Event(e.seq, e.event_type, e.message, e.ts, e.elapsed_ms, e.data) for e in events),
    )
