"""The answering pipeline: retrieve, score, correct, generate, reflect, route, repeat, store."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from services.answering import decisions
from services.answering.llm.backends import backend_for
from services.answering.llm.base import AnswerBackend, LLMCall
from services.answering.presets import FeatureConfig, get_preset
from services.answering.runs import Event, Iteration, Run, save_run
from services.domain import Hit, RetrievalResult
from services.errors import LLMError
from services.retrieval.fallback import CollectionFallback
from services.retrieval.search import clean_query, default_params, search_in_session
from services.scoring import confidence as conf
from services.scoring.crag import CragVerdict, FallbackSource, evaluate_retrieval
from services.settings import Settings, get_settings
from services.store import transaction

EventCallback = Callable[[Event], None]
GAP_QUERY_LIMIT = 2
INSUFFICIENT = "insufficient data: the corpus returned nothing for this question"


@dataclass
class _Emitter:
    """Timestamps events, keeps them for the stored run, and streams them to the caller."""

    on_event: EventCallback | None
    started: float = field(default_factory=time.perf_counter)
    events: list[Event] = field(default_factory=list)

    def __call__(self, event_type: str, message: str, **data: Any) -> None:
        event = Event(len(self.events) + 1, event_type, message, datetime.now(UTC),
                      (time.perf_counter() - self.started) * 1000, data)
        self.events.append(event)
        if self.on_event is not None:
            self.on_event(event)


@dataclass(frozen=True)
class _Plan:
    """How the next iteration retrieves."""

    queries: tuple[str, ...]
    sub_queries: tuple[str, ...] = ()
    use_fallback: bool = False


def run(
    query: str,
    preset: str = "balanced",
    weights_profile: conf.WeightsProfile | None = None,
    on_event: EventCallback | None = None,
    *,
    backend: AnswerBackend | None = None,
    fallback: FallbackSource | None = None,
    collection: str = "default",
    source: str = "ask",
    settings: Settings | None = None,
    config: FeatureConfig | None = None,
    force_pending: bool = False,
    requested_by: str = "",
) -> Run:
    """Answer `query`, store the run atomically, and return it with its id.

    `force_pending` queues the run for review whatever its confidence (evaluation sets
    collect verdicts on confident runs too, or calibration would see a biased sample).
    """
    settings = settings or get_settings()
    config = config or get_preset(preset)
    query = clean_query(query, max_chars=settings.max_query_chars)
    profile_id = None
    if weights_profile is None:
        from services.scoring.profiles import active_profile

        weights_profile, profile_id = active_profile()
    backend = backend or backend_for(settings)
    if fallback is None and config.fallback_collection:
        fallback = CollectionFallback(config.fallback_collection, settings)
    emit = _Emitter(on_event)
    emit("adaptive_refinement_start", f"Answering with the {preset} preset", preset=preset, backend=backend.name)

    iterations: list[Iteration] = []
    plan = _Plan((query,))
    fallback_used = decomposed = False
    for ordinal in range(1, config.max_iterations + 1):
        emit("refinement_iteration_start", f"Iteration {ordinal}", iteration=ordinal, queries=list(plan.queries))
        iteration = _iterate(query, ordinal, plan, config, weights_profile, backend, fallback, collection, settings,
                             emit, fallback_used=fallback_used, decomposed=decomposed)
        iterations.append(iteration)
        if iteration.decision in ("COMPLETE", "ACCEPT_BEST"):
            break
        plan = _next_plan(query, iteration, backend, fallback, emit)
        fallback_used |= plan.use_fallback
        decomposed |= bool(plan.sub_queries)
        iterations[-1] = dataclasses.replace(iterations[-1], llm_calls=iterations[-1].llm_calls + tuple(backend.log.drain()))

    best = _best_iteration(iterations)
    final_level = weights_profile.level(best.confidence)
    reflection_ok = bool(best.reflection and best.reflection.get("reflection_score", 0) >= config.reflection_min_score)
    crag_ok = bool(best.crag and best.crag["verdict"] == "CORRECT")
    auto = final_level == "HIGH" and crag_ok and reflection_ok and bool(best.answer)
    status = "auto_accepted" if auto and not force_pending else "pending"
    hits = best.retrieval["hits"]
    note = INSUFFICIENT if not hits else ("" if best.answer else "no answer could be produced from the retrieved text")
    emit("adaptive_refinement_complete", f"Done after {len(iterations)} iteration(s): {status}",
         attempts=len(iterations), final_confidence=best.confidence, best_iteration=best.ordinal, status=status,
         would_auto_accept=auto)
    run_record = Run(
        query=query, preset=preset, collection=collection, source=source, backend=backend.name, model=backend.model,
        status=status, final_answer=best.answer, citations=best.citations, final_confidence=best.confidence,
        final_level=final_level, retrieval_confidence=best.retrieval_confidence, components=best.components,
        reflection_score=(best.reflection or {}).get("reflection_score"),
        grade=(best.grade or {}).get("score"), crag_verdict=(best.crag or {}).get("verdict"), signals=best.signals,
        route=tuple(it.decision for it in iterations), best_iteration=best.ordinal,
        weights_profile=weights_profile.label, weights_profile_id=profile_id,
        config={"preset": preset, **config.to_dict(), "profile": weights_profile.to_dict(),
                "force_pending": force_pending, "requested_by": requested_by},
        outcome_note=note, latency_ms=emit.events[-1].elapsed_ms, iterations=tuple(iterations),
        events=tuple(emit.events),
    )
    with transaction(settings) as session:
        run_id = save_run(run_record, session=session)
    return dataclasses.replace(run_record, run_id=run_id)


def _iterate(
    query: str, ordinal: int, plan: _Plan, config: FeatureConfig, profile: conf.WeightsProfile,
    backend: AnswerBackend, fallback: FallbackSource | None, collection: str, settings: Settings,
    emit: _Emitter, *, fallback_used: bool, decomposed: bool,
) -> Iteration:
    latency: dict[str, float] = {}
    errors: list[dict[str, str]] = []
    calls: list[LLMCall] = []

    def timed(stage: str, fn: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        try:
            return fn()
        finally:
            latency[stage] = latency.get(stage, 0.0) + (time.perf_counter() - started) * 1000
            calls.extend(backend.log.drain())

    def guarded(stage: str, fn: Callable[[], Any]) -> Any:
        """An LLM failure is recorded on the iteration and the run goes on without it."""
        try:
            return timed(stage, fn)
        except LLMError as exc:
            errors.append({"stage": stage, "kind": exc.kind, "message": str(exc)})
            emit("llm_error", f"{stage} failed ({exc.kind}): {exc}", stage=stage, kind=exc.kind)
            return None

    result, vectors = timed("retrieval", lambda: _retrieve(plan, config, collection, settings, fallback))
    emit("retrieval_complete", f"{len(result.hits)} hits ({result.mode})", hits=len(result.hits),
         queries=list(plan.queries), fallback=plan.use_fallback)

    raw = timed("scoring", lambda: conf.raw_metrics(result.hits, result.query_entities, mode=result.mode))
    components = conf.components_from_raw(raw)
    retrieval_conf = conf.overall(components, profile)
    emit("confidence_scored", f"retrieval confidence {retrieval_conf:.2f} ({profile.level(retrieval_conf)})",
         confidence=retrieval_conf, components=dict(zip(conf.COMPONENTS, components.tolist())))

    chunks: Sequence[Hit] = result.hits
    verdict: CragVerdict | None = None
    if config.enable_crag_evaluation:
        verdict = timed("crag", lambda: evaluate_retrieval(query, result.hits, chunk_vectors=vectors, config=config.crag))
        if verdict.verdict != "CORRECT" and (fallback is None or fallback_used):
            outcome = "fallback unavailable" if fallback is None else "fallback already used"
            verdict = dataclasses.replace(verdict, action_outcome=outcome)
            emit("fallback_unavailable", f"CRAG {verdict.verdict}: {outcome}", verdict=verdict.verdict)
        if verdict.kept_chunk_ids:  # decompose-then-recompose: drop chunks with no relevant strip
            kept = set(verdict.kept_chunk_ids)
            chunks = [h for h in result.hits if h.chunk_id in kept]
        emit("crag_evaluated", verdict.reasoning, verdict=verdict.verdict, score=verdict.score, action=verdict.action)

    generation = guarded("generation", lambda: backend.generate(query, chunks)) if chunks else None
    answer = generation.answer if generation else ""
    emit("generation_complete", f"{len(answer)} characters, {len(generation.citations) if generation else 0} citations")

    reflection = None
    if config.enable_self_reflection and answer:
        reflection = guarded("reflection", lambda: backend.reflect(query, answer, chunks))
        if reflection is not None:
            emit("reflection_complete", reflection.reflection_reason, reflection_score=reflection.reflection_score,
                 grounded=reflection.answer_grounded)
    grade = guarded("grading", lambda: backend.grade(query, answer)) if config.enable_answer_grading and answer else None
    if grade is not None:
        emit("answer_graded", f"grade {grade.score}/5 ({grade.label})", score=grade.score, gaps=list(grade.gaps))
    gaps: list[str] = []
    if config.enable_gap_detection and result.hits:
        gaps = guarded("gaps", lambda: backend.identify_gaps(query, answer, chunks)) or []
        if gaps:
            emit("gaps_identified", f"{len(gaps)} gap(s): {', '.join(gaps[:3])}", gaps=gaps)

    heuristic = decisions.heuristic_confidence(result.hits, answer, query)
    blended, signals = decisions.blended_confidence(
        retrieval=retrieval_conf, reflection=reflection.reflection_score if reflection else None,
        grade=grade.score if grade else None, heuristic=heuristic)
    if not answer:
        blended = min(blended, retrieval_conf)  # nothing was answered: no credit beyond retrieval
    signals["heuristic_value"] = heuristic
    if config.enable_adaptive_refinement:
        state = decisions.RouterState(
            confidence=blended, source_count=len(result.hits),
            query_complexity=decisions.query_complexity(query, ()) if config.enable_decomposition else "simple",
            iteration=ordinal, max_iterations=config.max_iterations,
            reflection_approved=None if reflection is None else reflection.reflection_score >= config.reflection_min_score,
            has_gaps=bool(gaps) or bool(grade and grade.gaps), fallback_available=fallback is not None and not fallback_used,
            fallback_used=fallback_used, decomposed=decomposed)
        thresholds = dataclasses.replace(config.router, complete=config.min_confidence_threshold)
        decision = timed("decision", lambda: decisions.decide(state, thresholds))
    else:
        decision = decisions.Decision("ACCEPT_BEST", "adaptive refinement is off in this preset")
    if not result.hits:
        decision = decisions.Decision("ACCEPT_BEST", INSUFFICIENT)
    emit("adaptive_refinement_decision", f"{decision.action}: {decision.reason}", decision=decision.action,
         confidence=blended)
    return Iteration(
        ordinal=ordinal, query_used=" | ".join(plan.queries), sub_queries=plan.sub_queries, retrieval=result.to_dict(),
        components=tuple(float(c) for c in components), raw_metrics=raw, retrieval_confidence=retrieval_conf,
        confidence=blended, level=profile.level(blended), crag=verdict.to_dict() if verdict else None,
        answer=answer, citations=tuple(dataclasses.asdict(c) for c in (generation.citations if generation else ())),
        reflection=dataclasses.asdict(reflection) if reflection else None,
        grade={**dataclasses.asdict(grade), "label": grade.label} if grade else None,
        gaps=tuple(gaps), decision=decision.action, decision_reason=decision.reason, signals=signals,
        latency_ms=latency, errors=tuple(errors), llm_calls=tuple(calls),
    )


def _retrieve(plan: _Plan, config: FeatureConfig, collection: str, settings: Settings,
              fallback: FallbackSource | None) -> tuple[RetrievalResult, np.ndarray | None]:
    params = default_params(settings, mode=config.retrieval_mode, k=config.k, collection=collection)
    with transaction(settings) as session:
        results = [search_in_session(q, params, session=session, settings=settings) for q in plan.queries]
        if plan.use_fallback and fallback is not None:
            results.append(fallback.search(plan.queries[0], config.k))
        merged = results[0] if len(results) == 1 else merge_results(results, k=config.k)
        vectors = _chunk_vectors(session, [h.chunk_id for h in merged.hits[:3]])
    return merged, vectors


def merge_results(results: Sequence[RetrievalResult], *, k: int, rrf_k: int = 60) -> RetrievalResult:
    """Fuse the hit lists of several queries by RRF; each chunk keeps its best-ranked scores."""
    scores: dict[int, float] = {}
    best: dict[int, Hit] = {}
    for result in results:
        for hit in result.hits:
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + 1.0 / (rrf_k + hit.rank)
            if hit.chunk_id not in best or hit.rank < best[hit.chunk_id].rank:
                best[hit.chunk_id] = hit
    order = sorted(scores, key=lambda cid: (-scores[cid], cid))[:k]
    hits = tuple(dataclasses.replace(best[cid], rank=i + 1, fused_score=scores[cid]) for i, cid in enumerate(order))
    first = results[0]  # the original question: its entities are what entity support checks
    return dataclasses.replace(first, query=" | ".join(r.query for r in results), hits=hits,
                               latency_ms=sum(r.latency_ms for r in results))


_CHUNK_VECTORS = "SELECT id, CAST(embedding AS real[]) FROM chunks WHERE id = ANY(:ids)"


def _chunk_vectors(session: Session, chunk_ids: list[int]) -> np.ndarray | None:
    if not chunk_ids:
        return None
    rows: dict[int, Any] = dict(session.execute(text(_CHUNK_VECTORS), {"ids": chunk_ids}).all())
    return np.array([np.asarray(rows[i], dtype=np.float32) for i in chunk_ids if i in rows])


def _next_plan(query: str, iteration: Iteration, backend: AnswerBackend, fallback: FallbackSource | None,
               emit: _Emitter) -> _Plan:
    if iteration.decision == "FALLBACK_SEARCH":
        emit("refinement_triggered", f"Searching the fallback source {getattr(fallback, 'name', '')}")
        return _Plan((query,), use_fallback=True)
    if iteration.decision == "DECOMPOSE":
        try:
            parts = tuple(backend.decompose(query)) or (query,)
        except LLMError as exc:
            emit("llm_error", f"decompose failed ({exc.kind}): {exc}", stage="decompose", kind=exc.kind)
            parts = (query,)
        emit("refinement_queries_generated", f"{len(parts)} sub-questions", refined_queries=list(parts))
        return _Plan(tuple(dict.fromkeys([query, *parts])), sub_queries=parts)
    gaps = list(iteration.gaps) or list((iteration.grade or {}).get("gaps", ()))
    feedback = "\n".join(filter(None, [
        (iteration.reflection or {}).get("reflection_reason", ""),
        f"missing: {', '.join(repr(g) for g in gaps)}" if gaps else "",
        f"prf: {' '.join(_prf_terms(query, iteration))}",
    ]))
    try:
        refined = backend.refine_query(query, feedback)
    except LLMError as exc:
        emit("llm_error", f"refine_query failed ({exc.kind}): {exc}", stage="refine_query", kind=exc.kind)
        refined = query
    gap_queries = [f"{gap} {' '.join(query.split()[:5])}" for gap in gaps[:GAP_QUERY_LIMIT]]
    # The original question stays in the pool: refinements add evidence, they do not
    # replace the question the confidence is about.
    queries = tuple(dict.fromkeys([query, refined, *gap_queries]))
    emit("refinement_triggered", f"Low confidence - refining (attempt {iteration.ordinal})",
         attempt=iteration.ordinal, gaps=gaps, refined_queries=list(queries))
    emit("refinement_queries_generated", f"{len(queries)} refined queries", refined_queries=list(queries))
    return _Plan(queries)


def _prf_terms(query: str, iteration: Iteration) -> list[str]:
    from services.answering.llm.offline import prf_terms

    hits = [Hit.from_dict(h) for h in iteration.retrieval["hits"][:3]]
    return prf_terms(query, hits)


def _best_iteration(iterations: Sequence[Iteration]) -> Iteration:
    """The completing iteration, else the most confident one (earliest on ties)."""
    if iterations[-1].decision == "COMPLETE":
        return iterations[-1]
    return max(iterations, key=lambda it: (it.confidence, -it.ordinal))
