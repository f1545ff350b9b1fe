"""The assessment of one answer on given hits, by the pipeline's own stages.

The hits come from elsewhere (services.intake.context_scores for a record's contexts,
services.intake.chunk_scores for chunks of the corpus); from there on it is the pipeline:
the stages score them, run CRAG, reflect on and grade the given answer, find gaps and blend
the signals (services.answering.stages), and the pipeline's own rule decides whether the
run skips the review queue (stages.auto_accepts). The one iteration's decision is
ACCEPT_BEST: nothing is refined or regenerated. With judges off it is the minimal preset's
assessment: the retrieval breakdown and the heuristic, no CRAG, reflection or grading.

`assess_hits` is `stage_hits` (the breakdown and CRAG, which decides the chunks the judges
read) then `judge_staged`: a batch stages every record first, so that it can embed what all
their judges will read in one pass (services.intake.batch).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from services.answering import stages
from services.answering.llm.backends import backend_for
from services.answering.llm.base import AnswerBackend
from services.answering.presets import FeatureConfig, get_preset
from services.answering.runs import Event, Iteration
from services.domain import Hit, RetrievalResult, RouterAction, RunStatus
from services.judging.model import JudgeModel
from services.scoring.confidence import ConfidenceBreakdown, breakdown_from_raw
from services.scoring.crag import CragVerdict
from services.scoring.profiles import ScoringProfile
from services.settings import Settings

ASSESS_PRESET = "external"  # the preset name assessed runs are stored under
ASSESSED_REASON = "imported answer: assessed, not regenerated"


def assessment_config(*, judges: bool, mode: str) -> FeatureConfig:
    """The balanced preset's judges without its loop (nothing is refined or regenerated), or,
    with judges off, the minimal preset."""
    if judges:
        return get_preset("balanced", enable_adaptive_refinement=False, max_refinement_attempts=0,
                          retrieval_mode=mode)
    return get_preset("minimal", retrieval_mode=mode)


@dataclass
class Events:
    """Timestamped events for the stored run (the pipeline's stages emit through this)."""

    started: float = field(default_factory=time.perf_counter)
    events: list[Event] = field(default_factory=list)

    def __call__(self, event_type: str, message: str, **data: Any) -> None:
        self.events.append(Event(len(self.events) + 1, event_type, message, datetime.now(UTC),
                                 (time.perf_counter() - self.started) * 1000, data))


@dataclass(frozen=True)
class Assessment:
    """What the workbench makes of one answer: the confidence breakdown, the judges' verdicts,
    the blended confidence and the status the run gets; nothing of it stored yet."""

    query: str
    answer: str
    iteration: Iteration  # the one iteration: hits, components, CRAG, reflection, grade, signals
    breakdown: ConfidenceBreakdown  # the retrieval's, under `profile`
    final_level: str
    status: RunStatus  # auto_accepted or pending, by the pipeline's rule
    judges: bool
    config: FeatureConfig
    profile: ScoringProfile
    backend: str
    model: str
    scores: dict[str, str]  # where each score came from
    not_computed: dict[str, str]  # component or input -> why it could not be computed
    events: tuple[Event, ...]

    def to_dict(self) -> dict[str, Any]:
        it = self.iteration
        return {
            "status": self.status.value, "final_confidence": it.confidence, "final_level": self.final_level,
            "retrieval_confidence": it.retrieval_confidence, "confidence": self.breakdown.to_dict(),
            "signals": it.signals, "not_computed": self.not_computed, "scores": self.scores, "judges": self.judges,
            "crag": it.crag.to_dict() if it.crag else None,
            "reflection": asdict(it.reflection) if it.reflection else None,
            "verdict": it.verdict.to_dict() if it.verdict else None,
            "grade": {"score": it.grade.score, "label": it.grade.label, "gaps": list(it.grade.gaps)} if it.grade else None,
            "gaps": list(it.gaps), "errors": list(it.errors), "hits": [h.to_dict() for h in it.hits],
            "backend": self.backend, "model": self.model,
        }


def assess_hits(query: str, answer: str, result: RetrievalResult, vectors: np.ndarray | None, *, judges: bool,
                collection: str, backend: AnswerBackend | None, profile: ScoringProfile, settings: Settings,
                events: Events, scores: dict[str, str], not_computed: dict[str, str],
                judge_model: JudgeModel | None = None) -> Assessment:
    """Judge `answer` on `result`'s hits (`vectors`: their embeddings, for CRAG) and blend;
    `judge_model`: the active refitted judge (services.judging.refit), None for the shipped one."""
    staged = stage_hits(query, result, vectors, judges=judges, collection=collection, backend=backend,
                        profile=profile, settings=settings, events=events, judge_model=judge_model)
    return judge_staged(staged, answer, scores=scores, not_computed=not_computed)


@dataclass(frozen=True)
class Staged:
    """An assessment up to its judges: the hits scored and CRAG's verdict, with the chunks the
    judges will read. A batch stages every record first, to learn what the judges will embed."""

    query: str
    result: RetrievalResult
    ctx: stages.IterationContext
    scored: stages.Scored
    crag: CragVerdict | None
    chunks: Sequence[Hit]
    config: FeatureConfig
    profile: ScoringProfile
    backend: AnswerBackend
    events: Events
    judges: bool


def stage_hits(query: str, result: RetrievalResult, vectors: np.ndarray | None, *, judges: bool, collection: str,
               backend: AnswerBackend | None, profile: ScoringProfile, settings: Settings, events: Events,
               judge_model: JudgeModel | None = None) -> Staged:
    """The retrieval's breakdown and CRAG's verdict on `result` (the stages' own)."""
    config = assessment_config(judges=judges, mode=result.mode)
    backend = backend or backend_for(settings)
    setup = stages.RunSetup(query, config, profile.weights, backend, None, collection, settings, events, judge_model)
    ctx = stages.IterationContext(setup, 1, stages.Plan((query,)))
    scored = stages.score(ctx, result)
    verdict, chunks = stages.correct(ctx, result, vectors)
    return Staged(query, result, ctx, scored, verdict, chunks, config, profile, backend, events, judges)


def judge_staged(staged: Staged, answer: str, *, scores: dict[str, str], not_computed: dict[str, str]) -> Assessment:
    """The judges on `answer`, the blend, and the pipeline's rule for skipping review."""
    query, result, ctx, scored, config, profile, events = (staged.query, staged.result, staged.ctx, staged.scored,
                                                           staged.config, staged.profile, staged.events)
    judgement = stages.judge(ctx, answer, staged.chunks, retrieved=bool(result.hits))
    blended, signals = stages.blend(ctx, result, scored, answer, judgement)
    level = profile.weights.level(blended)
    events("adaptive_refinement_decision", f"{RouterAction.ACCEPT_BEST}: {ASSESSED_REASON}",
           decision=RouterAction.ACCEPT_BEST, confidence=blended)
    iteration = Iteration(
        ordinal=1, query_used=query, sub_queries=(), retrieval=result, components=scored.components,
        raw_metrics=scored.raw_metrics, retrieval_confidence=scored.retrieval_confidence, confidence=blended,
        level=level, crag=staged.crag, answer=answer, citations=(), reflection=judgement.reflection,
        grade=judgement.grade, gaps=judgement.gaps, decision=RouterAction.ACCEPT_BEST, decision_reason=ASSESSED_REASON,
        signals=signals, latency_ms=ctx.latency, errors=tuple(ctx.errors), llm_calls=tuple(ctx.calls),
        verdict=judgement.verdict,
    )
    auto = stages.auto_accepts(iteration, level=level, config=config)
    status = RunStatus.AUTO_ACCEPTED if auto else RunStatus.PENDING
    events("assessment_complete", f"Assessed: {status} at confidence {blended:.2f} ({level})",
           final_confidence=blended, status=status, would_auto_accept=auto)
    return Assessment(
        query=query, answer=answer, iteration=iteration,
        breakdown=breakdown_from_raw(scored.raw_metrics, profile.weights, reranker=result.reranker),
        final_level=level, status=status, judges=staged.judges, config=config, profile=profile, backend=staged.backend.name,
        model=staged.backend.model, scores=scores, not_computed=not_computed, events=tuple(events.events),
    )
