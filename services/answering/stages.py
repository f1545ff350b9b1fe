"""One iteration of the pipeline, stage by stage: retrieve, score, correct (CRAG), generate,
judge (reflect, grade, find gaps), blend and decide. The stages share an IterationContext."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from services.answering import decisions

# `correct` is re-exported: intake's assessment runs CRAG through the stages too.
from services.answering.corrective import correct as correct
from services.answering.corrective import (
    correct_and_act,
    fallback_failed,
    merge_results,
    search_fallback,
    strips_only,
    with_origin,
)
from services.answering.decisions import Decision
from services.answering.gap_context import add_gap_context, with_gap_context
from services.answering.llm.base import AnswerBackend, Generation, Grade, LLMCall, Reflection
from services.answering.offline import reflection_from_verdict
from services.answering.presets import FeatureConfig
from services.answering.runs import Iteration
from services.corpus.indexing import find_collection
from services.domain import Hit, RetrievalResult, RouterAction
from services.errors import InputError, LLMError, WorkbenchError
from services.judging import Verdict, judge_answer
from services.judging.model import JudgeModel
from services.judging.nli import Entail, nli_scorer
from services.judging.vectors import cached_embedder
from services.retrieval.adaptive import cut_for_question
from services.retrieval.search import default_params, search_in_session
from services.scoring import confidence as conf
from services.scoring.blend import blended_confidence
from services.scoring.crag import CragVerdict, FallbackSource, RetrievalVerdict
from services.scoring.weights import COMPONENTS, WeightsProfile
from services.settings import Settings
from services.store import read_transaction

INSUFFICIENT = "insufficient data: the corpus returned nothing for this question"
T = TypeVar("T")


class Emit(Protocol):
    def __call__(self, event_type: str, message: str, **data: Any) -> None: ...


@dataclass(frozen=True)
class Plan:
    """How an iteration retrieves."""

    queries: tuple[str, ...]
    sub_queries: tuple[str, ...] = ()
    use_fallback: bool = False
    # Searched on their own for additional context (preset option gaps_as_context), not fused.
    gap_queries: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunSetup:
    """What every iteration of one run works with."""

    query: str
    config: FeatureConfig
    profile: WeightsProfile
    backend: AnswerBackend
    fallback: FallbackSource | None
    collection: str
    settings: Settings
    emit: Emit
    judge_model: JudgeModel | None = None  # the active refitted judge; None: the shipped one


@dataclass
class IterationContext:
    """One iteration's plan, and what its stages record: time per stage, LLM failures, calls."""

    setup: RunSetup
    ordinal: int
    plan: Plan
    fallback_used: bool = False
    decomposed: bool = False
    crag_fallback: bool = False  # CRAG's corrective action searched the fallback in this iteration
    latency: dict[str, float] = field(default_factory=dict)
    errors: list[dict[str, str]] = field(default_factory=list)
    calls: list[LLMCall] = field(default_factory=list)

    def timed(self, stage: str, fn: Callable[[], T]) -> T:
        started = time.perf_counter()
        try:
            return fn()
        finally:
            self.latency[stage] = self.latency.get(stage, 0.0) + (time.perf_counter() - started) * 1000
            self.calls.extend(self.setup.backend.log.drain())

    def guarded(self, stage: str, fn: Callable[[], T]) -> T | None:
        """An LLM failure is recorded on the iteration and the run goes on without it."""
        try:
            return self.timed(stage, fn)
        except LLMError as exc:
            self.errors.append({"stage": stage, "kind": exc.kind, "message": str(exc)})
            self.setup.emit("llm_error", f"{stage} failed ({exc.kind}): {exc}", stage=stage, kind=exc.kind)
            return None


@dataclass(frozen=True)
class Scored:
    raw_metrics: dict[str, Any]
    components: tuple[float, ...]
    retrieval_confidence: float


@dataclass(frozen=True)
class Judgement:
    """What the judges said about the answer; None where a judge was off or failed."""

    reflection: Reflection | None
    grade: Grade | None
    gaps: tuple[str, ...]
    verdict: Verdict | None = None


def iterate(setup: RunSetup, ordinal: int, plan: Plan, *, fallback_used: bool, decomposed: bool) -> Iteration:
    ctx = IterationContext(setup, ordinal, plan, fallback_used=fallback_used, decomposed=decomposed)
    result, vectors = retrieve(ctx)
    scored = score(ctx, result)
    verdict, corrected, chunks = correct_and_act(ctx, result, vectors)
    if corrected is not result:  # the corrective action changed the evidence: score what the answer stands on
        result, scored = corrected, score(ctx, corrected)
    chunks = read_adaptively(ctx, result, chunks)
    # Seed 000's gaps as additional context (preset option): after the question's chunks.
    extra = add_gap_context(ctx, chunks).hits if result.hits else ()
    # Seed 002's strips to the generator (preset option); the judge reads the chunks they came from.
    reading = strips_only(chunks, verdict) if setup.config.generate_from_strips else chunks
    generation = generate(ctx, [*reading, *extra])
    answer = generation.answer if generation else ""
    judgement = judge(ctx, answer, [*chunks, *extra], retrieved=bool(result.hits))
    blended, signals = blend(ctx, result, scored, answer, judgement)
    decision = decide(ctx, blended, result, judgement)
    return _iteration(ctx, with_gap_context(result, extra), scored, verdict, generation, judgement, blended, signals, decision)


def retrieve(ctx: IterationContext) -> tuple[RetrievalResult, np.ndarray | None]:
    """Search every planned query (and the fallback source when planned), fused by RRF, with
    the top three chunks' embeddings for CRAG's agreement signal."""
    setup, plan = ctx.setup, ctx.plan
    result, vectors = ctx.timed("retrieval", lambda: _search(ctx))
    setup.emit("retrieval_complete", f"{len(result.hits)} hits ({result.mode})", hits=len(result.hits),
               queries=list(plan.queries), fallback=plan.use_fallback)
    return result, vectors


def score(ctx: IterationContext, result: RetrievalResult) -> Scored:
    profile = ctx.setup.profile
    raw = ctx.timed("scoring", lambda: conf.retrieval_metrics(result))
    # The team's consensus threshold (seed 003) counts the agreeing hits; stored beside the
    # count so a re-score reads the count it was taken with.
    threshold = ctx.setup.config.consensus_threshold
    raw["consensus_count"] = sum(1 for hit in result.hits if conf.hit_relevance(hit) >= threshold)
    raw["consensus_threshold"] = threshold
    components = conf.components_from_raw(raw)
    retrieval_conf = conf.mapped(conf.overall(components, profile), raw, profile)
    ctx.setup.emit("confidence_scored", f"retrieval confidence {retrieval_conf:.2f} ({profile.level(retrieval_conf)})",
                   confidence=retrieval_conf, components=dict(zip(COMPONENTS, components.tolist())))
    return Scored(raw, tuple(float(c) for c in components), retrieval_conf)


def read_adaptively(ctx: IterationContext, result: RetrievalResult, chunks: Sequence[Hit]) -> Sequence[Hit]:
    """Seed 001 (preset option `adaptive_k`): the answer reads only as many of the chunks as
    the question's kind needs; retrieval confidence and CRAG have seen them all."""
    if not ctx.setup.config.adaptive_k or not chunks:
        return chunks
    cut = cut_for_question(ctx.setup.query, chunks, result.query_entities)
    ctx.setup.emit("adaptive_cut", f"reading {len(cut.hits)} of {len(chunks)} chunks: stopped at {cut.stop_reason} "
                   f"({cut.kind} question, confidence {cut.confidence:.2f})", iteration=ctx.ordinal, **cut.to_dict())
    return cut.hits


def generate(ctx: IterationContext, chunks: Sequence[Hit]) -> Generation | None:
    """The answer from the chunks; None when there were none or the backend failed."""
    setup = ctx.setup
    generation = ctx.guarded("generation", lambda: setup.backend.generate(setup.query, chunks)) if chunks else None
    answer = generation.answer if generation else ""
    setup.emit("generation_complete",
               f"{len(answer)} characters, {len(generation.citations) if generation else 0} citations")
    return generation


def judge(ctx: IterationContext, answer: str, chunks: Sequence[Hit], *, retrieved: bool) -> Judgement:
    """The judge's verdict on the answer (services.judging, whatever the backend), the
    backend's reflection (a language model's own, which the verdict then weighs too, or the
    verdict read as one) and grade, and the gaps."""
    setup, config, backend, query = ctx.setup, ctx.setup.config, ctx.setup.backend, ctx.setup.query
    reflection = verdict = None
    if config.enable_self_reflection and answer and not backend.reflects_by_judge:
        reflection = ctx.guarded("reflection", lambda: backend.reflect(query, answer, chunks))
    if answer and (config.enable_self_reflection or config.enable_answer_grading):
        embed, entail = cached_embedder(setup.settings.embedding_model), _nli(ctx)
        support = reflection.reflection_score if reflection is not None and backend.is_llm else None
        verdict = ctx.timed("judging", lambda: judge_answer(query, answer, [c.text for c in chunks], embed=embed,
                                                            model=setup.judge_model, entail=entail,
                                                            model_support=support))
        setup.emit("answer_judged", verdict.reason, p_supported=verdict.p_supported, label=verdict.label,
                   unsupported=list(verdict.unsupported_words))
        if config.enable_self_reflection and backend.reflects_by_judge:
            reflection = reflection_from_verdict(verdict, query, answer, embed)
    if reflection is not None:
        setup.emit("reflection_complete", reflection.reflection_reason, reflection_score=reflection.reflection_score,
                   grounded=reflection.answer_grounded)
    grade = ctx.guarded("grading", lambda: backend.grade(query, answer)) if config.enable_answer_grading and answer else None
    if grade is not None:
        setup.emit("answer_graded", f"grade {grade.score}/5 ({grade.label})", score=grade.score, gaps=list(grade.gaps))
    gaps: list[str] = []
    if config.enable_gap_detection and retrieved:
        gaps = ctx.guarded("gaps", lambda: backend.identify_gaps(query, answer, chunks)) or []
        if gaps:
            setup.emit("gaps_identified", f"{len(gaps)} gap(s): {', '.join(gaps[:3])}", gaps=gaps)
    return Judgement(reflection, grade, tuple(gaps), verdict)


def _nli(ctx: IterationContext) -> Entail | None:
    """The configured NLI model's scorer; one that cannot load is said on the iteration, and the
    judge goes on without it."""
    name = ctx.setup.settings.judge_nli_model
    if not name:
        return None
    try:
        return nli_scorer(name)
    except InputError as exc:
        ctx.errors.append({"stage": "judging", "kind": "nli_unavailable", "message": str(exc)})
        return None


def blend(ctx: IterationContext, result: RetrievalResult, scored: Scored, answer: str,
          judgement: Judgement) -> tuple[float, dict[str, float]]:
    """The final confidence of this iteration and the signals it was blended from."""
    heuristic = decisions.heuristic_confidence(result.hits, answer, ctx.setup.query)
    reflection, grade = judgement.reflection, judgement.grade
    blended, signals = blended_confidence(
        retrieval=scored.retrieval_confidence, reflection=reflection.reflection_score if reflection else None,
        grade=grade.score if grade else None, heuristic=heuristic)
    if not answer:
        blended = min(blended, scored.retrieval_confidence)  # nothing was answered: no credit beyond retrieval
    signals["heuristic_value"] = heuristic
    return blended, signals


def decide(ctx: IterationContext, blended: float, result: RetrievalResult, judgement: Judgement) -> Decision:
    setup, config = ctx.setup, ctx.setup.config
    if config.enable_adaptive_refinement:
        reflection, grade = judgement.reflection, judgement.grade
        state = decisions.RouterState(
            confidence=blended, source_count=len(result.hits),
            query_complexity=decisions.query_complexity(setup.query, ()) if config.enable_decomposition else "simple",
            iteration=ctx.ordinal, max_iterations=config.max_iterations,
            reflection_approved=None if reflection is None else reflection.reflection_score >= config.reflection_min_score,
            needs_regeneration=_asks_regeneration(setup.backend, reflection),
            has_gaps=bool(judgement.gaps) or bool(grade and grade.gaps),
            fallback_available=setup.fallback is not None and not (ctx.fallback_used or ctx.crag_fallback),
            fallback_used=ctx.fallback_used or ctx.crag_fallback, decomposed=ctx.decomposed)
        thresholds = dataclasses.replace(config.router, complete=config.min_confidence_threshold)
        decision = ctx.timed("decision", lambda: decisions.decide(state, thresholds))
    else:
        decision = Decision(RouterAction.ACCEPT_BEST, "adaptive refinement is off in this preset")
    if not result.hits:
        decision = Decision(RouterAction.ACCEPT_BEST, INSUFFICIENT)
    setup.emit("adaptive_refinement_decision", f"{decision.action}: {decision.reason}", decision=decision.action,
               confidence=blended)
    return decision


def _asks_regeneration(backend: AnswerBackend, reflection: Reflection | None) -> bool:
    """A model's own reflection asking for regeneration (seed 004). A reflection read from
    the judge's verdict sets the flag from the fixed REFLECTION_MIN_SCORE, which the team's
    reflection minimum already stands for, so only a model's own flag is honoured."""
    return reflection is not None and reflection.needs_regeneration and not backend.reflects_by_judge


def auto_accepts(best: Iteration, *, level: str, config: FeatureConfig) -> bool:
    """The one rule that lets a run skip the review queue (the pipeline's runs and assessed
    imports alike): HIGH confidence, CRAG CORRECT, reflection approved, an answer, and the
    judge sure it is supported (P(supported) at its model's accept_at, nothing invented)."""
    reflection_ok = bool(best.reflection and best.reflection.reflection_score >= config.reflection_min_score)
    crag_ok = bool(best.crag and best.crag.verdict == RetrievalVerdict.CORRECT)
    judge_ok = best.verdict is None or best.verdict.auto_accept
    return level == "HIGH" and crag_ok and reflection_ok and judge_ok and bool(best.answer)


def _iteration(ctx: IterationContext, result: RetrievalResult, scored: Scored, verdict: CragVerdict | None,
               generation: Generation | None, judgement: Judgement, blended: float, signals: dict[str, float],
               decision: Decision) -> Iteration:
    return Iteration(
        ordinal=ctx.ordinal, query_used=" | ".join(ctx.plan.queries), sub_queries=ctx.plan.sub_queries,
        retrieval=result, components=scored.components, raw_metrics=scored.raw_metrics,
        retrieval_confidence=scored.retrieval_confidence, confidence=blended, level=ctx.setup.profile.level(blended),
        crag=verdict, answer=generation.answer if generation else "",
        citations=generation.citations if generation else (), reflection=judgement.reflection, grade=judgement.grade,
        gaps=judgement.gaps, decision=decision.action, decision_reason=decision.reason, signals=signals,
        latency_ms=ctx.latency, errors=tuple(ctx.errors), llm_calls=tuple(ctx.calls), verdict=judgement.verdict,
    )


# --- retrieval ------------------------------------------------------------------------------

def _search(ctx: IterationContext) -> tuple[RetrievalResult, np.ndarray | None]:
    setup, plan = ctx.setup, ctx.plan
    config, settings = setup.config, setup.settings
    params = default_params(settings, mode=config.retrieval_mode, k=config.k, collection=setup.collection)
    origin = f"collection:{setup.collection}"
    with read_transaction(settings) as session:
        results = [with_origin(search_in_session(q, params, session=session, settings=settings), origin)
                   for q in plan.queries]
        if plan.use_fallback and setup.fallback is not None:
            try:
                results.append(search_fallback(setup, Plan(plan.queries[:1]), setup.fallback))
            except WorkbenchError as exc:  # the run goes on with the corpus, and says why
                fallback_failed(ctx, setup.fallback, exc)
        merged = results[0] if len(results) == 1 else merge_results(results, k=config.k)
        vectors = _chunk_vectors(session, setup.collection, [h.chunk_id for h in merged.hits[:3]])
    return merged, vectors


# The collection is bound by id: chunks are partitioned by collection, and a bound value lets
# the planner read only this collection's partition (by id alone it probes every partition).
CHUNK_VECTORS_SQL = (
    "SELECT id, CAST(embedding AS real[]) FROM chunks WHERE collection_id = CAST(:cid AS integer) AND id = ANY(:ids)"
)


def _chunk_vectors(session: Session, collection: str, chunk_ids: list[int]) -> np.ndarray | None:
    if not chunk_ids:
        return None
    values = {"cid": find_collection(session, collection), "ids": chunk_ids}
    rows: dict[int, Any] = dict(session.execute(text(CHUNK_VECTORS_SQL), values).all())
    return np.array([np.asarray(rows[i], dtype=np.float32) for i in chunk_ids if i in rows])
