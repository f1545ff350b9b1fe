"""Runs as stored: events, iterations, the final state; saved atomically, loaded whole.

Iterations and runs hold typed objects (the RetrievalResult, CragVerdict, Reflection, Grade
and Citations, and StrEnums for the status, decisions and CRAG verdict). They become JSON
here and nowhere else: in save_run and load_run (the database boundary) and in to_dict, the
shape exports and `workbench ask --json` print. A StrEnum's value is the stored string.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from db.models import LLMCallRow, RunEvent, RunIteration
from db.models import Run as RunRow
from services.answering.llm.base import Citation, Grade, LLMCall, Reflection
from services.domain import Hit, RetrievalResult, RouterAction, RunStatus, plain
from services.errors import InputError, NotFoundError
from services.judging import ClaimCheck, Verdict
from services.scoring.confidence import ConfidenceBreakdown, breakdown_from_raw
from services.scoring.crag import CragVerdict, KnowledgeStrip, RetrievalVerdict
from services.scoring.profiles import profile_for_run
from services.scoring.weights import WeightsProfile
from services.store import transaction

E = TypeVar("E", bound=StrEnum)
T = TypeVar("T")


def _member(enum: type[E], value: str, what: str) -> E:
    try:
        return enum(value)
    except ValueError:
        raise InputError(f"unknown {what} {value!r} (expected one of {', '.join(enum)})") from None


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
    retrieval: RetrievalResult  # every hit with all its scores
    components: tuple[float, ...]
    raw_metrics: dict[str, Any]
    retrieval_confidence: float
    confidence: float  # blended
    level: str
    crag: CragVerdict | None
    answer: str
    citations: tuple[Citation, ...]
    reflection: Reflection | None
    grade: Grade | None
    gaps: tuple[str, ...]
    decision: RouterAction
    decision_reason: str
    signals: dict[str, float]
    latency_ms: dict[str, float]
    errors: tuple[dict[str, str], ...] = ()
    llm_calls: tuple[LLMCall, ...] = ()
    verdict: Verdict | None = None  # the judge's (services.judging), None where no answer was judged

    def __post_init__(self) -> None:
        object.__setattr__(self, "decision", _member(RouterAction, self.decision, "decision"))

    @property
    def hits(self) -> tuple[Hit, ...]:
        return self.retrieval.hits

    def to_dict(self) -> dict[str, Any]:
        data = plain(self)  # nested dataclasses become dicts, as they are stored
        data["decision"] = self.decision.value
        data["grade"] = _grade_json(self.grade)
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
    status: RunStatus
    final_answer: str
    citations: tuple[Citation, ...]
    final_confidence: float
    final_level: str
    retrieval_confidence: float
    components: tuple[float, ...]
    reflection_score: float | None
    grade: int | None
    crag_verdict: RetrievalVerdict | None
    signals: dict[str, float]  # the best iteration's blend inputs: re-blended when weights change
    route: tuple[RouterAction, ...]
    best_iteration: int
    weights_profile: str
    weights_profile_id: int | None
    config: dict[str, Any]
    outcome_note: str
    latency_ms: float
    iterations: tuple[Iteration, ...]
    events: tuple[Event, ...]
    trace_id: str | None = None  # the source system's id, for runs imported or pushed from outside
    external: dict[str, Any] | None = None  # the source system's metadata (app, model, user, timestamp, extra)
    run_id: int | None = None
    created_at: datetime | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", _member(RunStatus, self.status, "run status"))
        object.__setattr__(self, "route", tuple(_member(RouterAction, a, "decision") for a in self.route))
        if self.crag_verdict is not None:
            object.__setattr__(self, "crag_verdict", _member(RetrievalVerdict, self.crag_verdict, "CRAG verdict"))

    def best(self) -> Iteration | None:
        """The iteration the final answer came from; None when the run was stored without it."""
        return next((it for it in self.iterations if it.ordinal == self.best_iteration), None)

    @property
    def p_supported(self) -> float | None:
        """The judge's P(answer supported) on the final answer; None when it was not judged."""
        best = self.best()
        return best.verdict.p_supported if best is not None and best.verdict is not None else None

    def to_dict(self) -> dict[str, Any]:
        data = plain(self)
        data["status"] = self.status.value
        data["crag_verdict"] = self.crag_verdict.value if self.crag_verdict is not None else None
        data["route"] = [action.value for action in self.route]
        data["iterations"] = [i.to_dict() for i in self.iterations]
        data["p_supported"] = self.p_supported
        data["events"] = [e.to_dict() for e in self.events]
        data["created_at"] = self.created_at.isoformat() if self.created_at else None
        return data


def run_row_values(run: Run) -> dict[str, Any]:
    """The runs row of `run`, column by column (save_run writes it; intake's batches write many at
    once with these values, services.intake.store_runs)."""
    return dict(
        query=run.query, preset=run.preset, collection=run.collection, source=run.source, backend=run.backend,
        model=run.model, status=run.status.value, final_answer=run.final_answer,
        citations=[asdict(c) for c in run.citations], final_confidence=run.final_confidence,
        final_level=run.final_level, retrieval_confidence=run.retrieval_confidence, components=list(run.components),
        reflection_score=run.reflection_score, grade=run.grade,
        crag_verdict=run.crag_verdict.value if run.crag_verdict is not None else None, signals=run.signals,
        route=[action.value for action in run.route], best_iteration=run.best_iteration,
        iterations_count=len(run.iterations), weights_profile_id=run.weights_profile_id,
        weights_profile=run.weights_profile, config=run.config, outcome_note=run.outcome_note, latency_ms=run.latency_ms,
        trace_id=run.trace_id, external=run.external, p_supported=run.p_supported,
    )


@dataclass(frozen=True)
class ChildRows:
    """The run_iterations, llm_calls and run_events rows of a run stored as `run_id`."""

    iterations: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    events: list[dict[str, Any]]


def child_row_values(run_id: int, created_at: datetime, run: Run) -> ChildRows:
    """`created_at` is the stored run's: its children are partitioned by its month (migration 0021)."""
    iterations: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    of_run = {"run_id": run_id, "run_created_at": created_at}
    for it in run.iterations:
        data = it.to_dict()
        data.pop("llm_calls")
        iterations.append({**of_run, **{k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}})
        calls.extend({**of_run, "iteration": it.ordinal, **call.to_dict()} for call in it.llm_calls)
    events = [{**of_run, "seq": ev.seq, "ts": ev.ts, "elapsed_ms": ev.elapsed_ms, "event_type": ev.event_type,
               "message": ev.message, "data": ev.data} for ev in run.events]
    return ChildRows(iterations, calls, events)


def save_run(run: Run, *, session: Session) -> int:
    """Insert the run with its iterations, events and LLM calls (caller owns the transaction)."""
    row = RunRow(**run_row_values(run))
    session.add(row)
    session.flush()
    children = child_row_values(row.id, row.created_at, run)
    session.add_all([RunIteration(**values) for values in children.iterations])
    session.add_all([LLMCallRow(**values) for values in children.calls])
    session.add_all([RunEvent(**values) for values in children.events])
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


# --- from the JSON columns back to typed objects -------------------------------------------

def _grade_json(grade: Grade | None) -> dict[str, Any] | None:
    return None if grade is None else {**asdict(grade), "label": grade.label}


def _from_json(cls: type[T], data: Mapping[str, Any], **converted: Any) -> T:
    """A dataclass from its stored JSON: lists back to tuples, keys it has no field for (a
    grade's label) dropped, and fields added after the run was stored left at their defaults."""
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in names}
    return cls(**{**values, **converted})


def _retrieval_from_json(data: Mapping[str, Any]) -> RetrievalResult:
    return _from_json(RetrievalResult, data, hits=tuple(Hit.from_dict(h) for h in data.get("hits", ())))


def _crag_from_json(data: Mapping[str, Any]) -> CragVerdict:
    return _from_json(CragVerdict, data, verdict=_member(RetrievalVerdict, data["verdict"], "CRAG verdict"),
                      strips=tuple(_from_json(KnowledgeStrip, s) for s in data.get("strips", ())))


def _iteration_from_row(it: RunIteration, calls: tuple[LLMCall, ...]) -> Iteration:
    return Iteration(
        ordinal=it.ordinal, query_used=it.query_used, sub_queries=tuple(it.sub_queries),
        retrieval=_retrieval_from_json(it.retrieval), components=tuple(it.components), raw_metrics=it.raw_metrics,
        retrieval_confidence=it.retrieval_confidence, confidence=it.confidence, level=it.level,
        crag=_crag_from_json(it.crag) if it.crag else None, answer=it.answer,
        citations=tuple(_from_json(Citation, c) for c in it.citations),
        reflection=_from_json(Reflection, it.reflection) if it.reflection else None,
        grade=_from_json(Grade, it.grade) if it.grade else None, gaps=tuple(it.gaps),
        decision=_member(RouterAction, it.decision, "decision"), decision_reason=it.decision_reason, signals=it.signals,
        latency_ms=it.latency_ms, errors=tuple(it.errors), llm_calls=calls,
        verdict=_verdict_from_json(it.verdict) if it.verdict else None,
    )


def _verdict_from_json(data: Mapping[str, Any]) -> Verdict:
    return _from_json(Verdict, data, features=dict(data.get("features", {})), claims=tuple(
        _from_json(ClaimCheck, c, reversed=tuple(c["reversed"]) if c.get("reversed") else None)
        for c in data.get("claims", ())))


_CALL_FIELDS = tuple(LLMCall.__dataclass_fields__)


def _run_from_rows(row: RunRow, iterations, calls, events) -> Run:  # type: ignore[no-untyped-def]
    calls_by_iteration: dict[int, list[LLMCall]] = {}
    for c in calls:
        calls_by_iteration.setdefault(c.iteration or 0, []).append(LLMCall(**{f: getattr(c, f) for f in _CALL_FIELDS}))
    return Run(
        query=row.query, preset=row.preset, collection=row.collection, source=row.source, backend=row.backend,
        model=row.model, status=_member(RunStatus, row.status, "run status"), final_answer=row.final_answer,
        citations=tuple(_from_json(Citation, c) for c in row.citations), final_confidence=row.final_confidence,
        final_level=row.final_level, retrieval_confidence=row.retrieval_confidence, components=tuple(row.components),
        reflection_score=row.reflection_score, grade=row.grade,
        crag_verdict=_member(RetrievalVerdict, row.crag_verdict, "CRAG verdict") if row.crag_verdict is not None else None,
        signals=row.signals, route=tuple(_member(RouterAction, a, "decision") for a in row.route), best_iteration=row.best_iteration,
        weights_profile=row.weights_profile, weights_profile_id=row.weights_profile_id, config=row.config,
        outcome_note=row.outcome_note, latency_ms=row.latency_ms, trace_id=row.trace_id, external=row.external,
        run_id=row.id, created_at=row.created_at,
        iterations=tuple(_iteration_from_row(it, tuple(calls_by_iteration.get(it.ordinal, ()))) for it in iterations),
        events=tuple(Event(e.seq, e.event_type, e.message, e.ts, e.elapsed_ms, e.data) for e in events),
    )


def retrieval_breakdown(run: Run) -> tuple[WeightsProfile, ConfidenceBreakdown] | None:
    """The weights the run was scored with (services.scoring.profiles.profile_for_run) and its
    best iteration's seven-component breakdown under them, as Ask and Review show it; None
    when the run was stored without its best iteration's metrics."""
    best = run.best()
    if best is None or not best.raw_metrics:
        return None
    profile = profile_for_run(stored=run.config.get("profile"), profile_id=run.weights_profile_id)
    return profile, breakdown_from_raw(best.raw_metrics, profile, reranker=best.retrieval.reranker)
