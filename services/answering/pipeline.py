"""The answering pipeline: retrieve, score, correct, generate, reflect, route, repeat, store.

One iteration's stages are in services.answering.stages; this module runs the loop, plans
each next iteration from the router's decision, picks the best iteration and stores the run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from services.answering.cache import MARK_KEY, collection_mark, find_cached
from services.answering.llm.backends import backend_for
from services.answering.llm.base import AnswerBackend
from services.answering.presets import FeatureConfig, configured, with_thresholds
from services.answering.runs import Event, Iteration, Run, load_run, save_run
from services.answering.stages import INSUFFICIENT, Plan, RunSetup, auto_accepts, iterate
from services.domain import FINAL_ACTIONS, RouterAction, RunStatus
from services.errors import LLMError
from services.judging.refit import active_model
from services.retrieval.expansion import expansion_terms
from services.retrieval.fallback import configured_fallback
from services.retrieval.search import clean_query
from services.scoring.crag import FallbackSource
from services.scoring.weights import WeightsProfile
from services.settings import Settings, get_settings
from services.store import read_transaction, transaction

EventCallback = Callable[[Event], None]


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


def run(
    query: str,
    preset: str = "balanced",
    weights_profile: WeightsProfile | None = None,
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
    options: Mapping[str, Any] | None = None,
    use_cache: bool = False,
) -> Run:
    """Answer `query`, store the run atomically, and return it with its id.

    The loop runs with `config`, else the preset with the environment's thresholds, the
    weights profile's loop thresholds and then `options` (services.answering.presets) over it.
    `force_pending` queues the run for review whatever its confidence (evaluation sets
    collect verdicts on confident runs too, or calibration would see a biased sample).
    `use_cache` (the Ask page, `workbench ask`) returns the stored run of the same question,
    collection, preset and loop when it was HIGH and approved or auto-accepted and nothing was
    ingested since (services.answering.cache); a "cache_hit" event says so.
    """
    settings = settings or get_settings()
    query = clean_query(query, max_chars=settings.max_query_chars)
    profile_id = None
    if weights_profile is None:
        from services.scoring.profiles import active_profile

        weights_profile, profile_id = active_profile()
    config = config or configured(preset, settings, weights_profile.loop)
    if options:
        config = with_thresholds(config, **options)
    loop = {"preset": preset, **config.to_dict()}
    with read_transaction(settings) as session:
        mark = collection_mark(collection, session=session)
        hit = find_cached(query, collection=collection, preset=preset, loop=loop, mark=mark,
                          session=session) if use_cache else None
        if hit is not None:
            _Emitter(on_event)("cache_hit", hit.message, **hit.to_dict())
            return load_run(hit.run_id, session=session)
        judge_model = active_model(session=session)
    backend = backend or backend_for(settings)
    if fallback is None and config.enable_fallback:
        fallback = configured_fallback(config.fallback_collection, settings)
    emit = _Emitter(on_event)  # the run's clock starts with its first event, as the Ask page streams it
    emit("adaptive_refinement_start", f"Answering with the {preset} preset", preset=preset, backend=backend.name)
    setup = RunSetup(query, config, weights_profile, backend, fallback, collection, settings, emit, judge_model)

    iterations: list[Iteration] = []
    plan = Plan((query,))
    fallback_used = decomposed = False
    for ordinal in range(1, config.max_iterations + 1):
        emit("refinement_iteration_start", f"Iteration {ordinal}", iteration=ordinal, queries=list(plan.queries))
        iteration = iterate(setup, ordinal, plan, fallback_used=fallback_used, decomposed=decomposed)
        iterations.append(iteration)
        if iteration.decision in FINAL_ACTIONS:
            break
        plan = _next_plan(query, iteration, config, backend, fallback, emit)
        fallback_used |= plan.use_fallback
        decomposed |= bool(plan.sub_queries)
        iterations[-1] = dataclasses.replace(iterations[-1], llm_calls=iterations[-1].llm_calls + tuple(backend.log.drain()))

    best = best_of(iterations)
    final_level = weights_profile.level(best.confidence)
    auto = auto_accepts(best, level=final_level, config=config)
    status = RunStatus.AUTO_ACCEPTED if auto and not force_pending else RunStatus.PENDING
    note = INSUFFICIENT if not best.hits else ("" if best.answer else "no answer could be produced from the retrieved text")
    emit("adaptive_refinement_complete", f"Done after {len(iterations)} iteration(s): {status}",
         attempts=len(iterations), final_confidence=best.confidence, best_iteration=best.ordinal, status=status,
         would_auto_accept=auto)
    run_record = Run(
        query=query, preset=preset, collection=collection, source=source, backend=backend.name, model=backend.model,
        status=status, final_answer=best.answer, citations=best.citations, final_confidence=best.confidence,
        final_level=final_level, retrieval_confidence=best.retrieval_confidence, components=best.components,
        reflection_score=best.reflection.reflection_score if best.reflection else None,
        grade=best.grade.score if best.grade else None, crag_verdict=best.crag.verdict if best.crag else None,
        signals=best.signals, route=tuple(it.decision for it in iterations), best_iteration=best.ordinal,
        weights_profile=weights_profile.label, weights_profile_id=profile_id,
        config={**loop, "profile": weights_profile.to_dict(), "force_pending": force_pending,
                "requested_by": requested_by, MARK_KEY: mark},
        outcome_note=note, latency_ms=emit.events[-1].elapsed_ms, iterations=tuple(iterations),
        events=tuple(emit.events),
    )
    with transaction(settings) as session:
        run_id = save_run(run_record, session=session)
    return dataclasses.replace(run_record, run_id=run_id)


def _next_plan(query: str, iteration: Iteration, config: FeatureConfig, backend: AnswerBackend,
               fallback: FallbackSource | None, emit: _Emitter) -> Plan:
    if iteration.decision == RouterAction.FALLBACK_SEARCH:
        emit("refinement_triggered", f"Searching the fallback source {getattr(fallback, 'name', '')}")
        return Plan((query,), use_fallback=True)
    if iteration.decision == RouterAction.DECOMPOSE:
        try:
            parts = tuple(backend.decompose(query)) or (query,)
        except LLMError as exc:
            emit("llm_error", f"decompose failed ({exc.kind}): {exc}", stage="decompose", kind=exc.kind)
            parts = (query,)
        emit("refinement_queries_generated", f"{len(parts)} sub-questions", refined_queries=list(parts))
        return Plan(tuple(dict.fromkeys([query, *parts])), sub_queries=parts)
    gaps = list(iteration.gaps) or list(iteration.grade.gaps if iteration.grade else ())
    try:
        refined = backend.refine_query(
            query, reason=iteration.reflection.reflection_reason if iteration.reflection else "", gaps=gaps,
            expansion_terms=expansion_terms(query, iteration.hits))
    except LLMError as exc:
        emit("llm_error", f"refine_query failed ({exc.kind}): {exc}", stage="refine_query", kind=exc.kind)
        refined = query
    gap_queries = [f"{gap} {' '.join(query.split()[:5])}" for gap in gaps[:config.gap_query_limit]]
    suggested = list(iteration.grade.refinements) if config.use_grader_refinements and iteration.grade else []
    # The original question stays in the pool: refinements add evidence, they do not
    # replace the question the confidence is about. With gaps_as_context the gap queries are
    # searched on their own and their passages given as additional context (gap_context).
    pooled = [] if config.gaps_as_context else gap_queries
    queries = tuple(dict.fromkeys([query, refined, *suggested, *pooled]))
    beside = tuple(dict.fromkeys(gap_queries)) if config.gaps_as_context else ()
    emit("refinement_triggered", f"Low confidence - refining (attempt {iteration.ordinal})",
         attempt=iteration.ordinal, gaps=gaps, refined_queries=list(queries), gap_queries=list(beside))
    emit("refinement_queries_generated", f"{len(queries)} refined queries"
         + (f", {len(beside)} gap queries for additional context" if beside else ""),
         refined_queries=list(queries), gap_queries=list(beside))
    return Plan(queries, gap_queries=beside)


def best_of(iterations: Sequence[Iteration]) -> Iteration:
    """The completing iteration, else the most confident one (earliest on ties)."""
    if iterations[-1].decision == RouterAction.COMPLETE:
        return iterations[-1]
    return max(iterations, key=lambda it: (it.confidence, -it.ordinal))
