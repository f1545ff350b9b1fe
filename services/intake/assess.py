"""Assess answers the workbench did not produce, on the contexts they came with, and drain
the intake queue into stored runs.

No re-retrieval and no regeneration: a record's contexts become hits (context_scores.py),
or chunks of the corpus are scored as the search scores them (chunk_scores.py); the
pipeline's stages then judge and blend (assessment.py).

`process_queue` claims queued records a batch at a time (a row lock each, services.intake.
intake.next_queued), assesses them together (services.intake.batch: one embedding pass for
the batch), and stores them in the claiming transaction: each run with its trace id and its
intake row marked assessed commit together. A record whose assessment fails is marked failed
with the reason in that same transaction (a savepoint undoes whatever of it was written) and
the others go on; a store that goes away stops the drain with the batch still queued.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from services.answering.llm.backends import backend_for
from services.answering.llm.base import AnswerBackend
from services.answering.runs import Run, save_run
from services.errors import InputError, WorkbenchError
from services.intake.assessment import ASSESS_PRESET, ASSESSED_REASON, Assessment, Events, assess_hits
from services.intake.batch import STORE_ERRORS, assess_batch
from services.intake.chunk_scores import score_chunks
from services.intake.context_scores import score_contexts
from services.intake.intake import QueuedRecord, count_queued, mark_assessed, mark_failed, next_queued
from services.intake.schema import ExternalRun
from services.intake.store_runs import store_runs
from services.judging.model import JudgeModel
from services.judging.refit import active_model
from services.retrieval.search import clean_query, default_params
from services.scoring.profiles import ScoringProfile, active_profile
from services.settings import Settings, get_settings
from services.store import transaction

_log = logging.getLogger("workbench.intake")
MAX_REASON_CHARS = 2_000
# Records a batch at most, claimed CLAIM_STEP at a time until their texts (contexts, questions
# and answers) hold PASS_CHARS characters: the model's calls cost less a text the more texts they
# hold, for they are cut into forward passes of 64 like-length texts, and a batch's model work is
# its tokens, which its characters stand for. Encoding short records' texts (one context,
# question, answer; bare model, one thread, 2026-11-27T15:31Z, load 9-10) cost 42.1, 29.9, 21.2
# and 17.0 CPU ms a record in calls of 32, 64, 128 and 256 records; in batches of 512 instead of
# 256 they drained 8% faster again (bench/intake.py --runs 512, 2026-11-28T06:53Z: wall ratio
# 0.725-0.754 against 0.677-0.707). So records of one short context (~360 characters) are claimed
# 512 at a time, records of five contexts of ~100 words (~3,200) 128, as when batches were cut at
# 768 texts: their model time is their tokens whatever the batch, and a batch holds its rows'
# locks until it commits (16 s for 128 of them here; a worker stopping waits for the batch it is
# on, api/worker.py).
ASSESS_BATCH = 512
CLAIM_STEP = 32
PASS_CHARS = 400_000

ProgressCallback = Callable[[int, int], None]  # (records done, records to do as known so far)


def assess_record(record: ExternalRun, *, session: Session, judges: bool = True, collection: str = "default",
                  backend: AnswerBackend | None = None, profile: ScoringProfile | None = None,
                  settings: Settings | None = None) -> Assessment:
    """Assess a record's answer on its own contexts (reads corpus statistics in `session`)."""
    settings = settings or get_settings()
    query = clean_query(record.question, max_chars=settings.max_query_chars)
    events = Events()
    events("assessment_start", f"Assessing an imported answer on its {len(record.contexts)} contexts",
           contexts=len(record.contexts), judges=judges)
    scored = score_contexts(query, record.contexts, collection=collection, settings=settings, session=session,
                            need_vectors=judges)
    return assess_hits(query, record.answer, scored.result, scored.vectors, judges=judges, collection=collection,
                       backend=backend, profile=profile or active_profile(session=session), settings=settings,
                       events=events, scores=scored.scores, not_computed=scored.not_computed,
                       judge_model=active_model(session=session))


def assess_chunks(query: str, chunk_ids: Sequence[int], *, collection: str = "default", answer: str = "",
                  judges: bool = True, mode: str = "hybrid", depth: int | None = None,
                  backend: AnswerBackend | None = None, profile: ScoringProfile | None = None,
                  settings: Settings | None = None, session: Session | None = None) -> Assessment:
    """Seed 003's "assess confidence for given chunks": chunks already in the corpus, scored
    against `query` as the search scores them, and their breakdown; with an `answer`, also
    the judges' verdicts on it. Nothing is stored."""
    settings = settings or get_settings()
    if session is None:
        with transaction(settings) as own:
            return assess_chunks(query, chunk_ids, collection=collection, answer=answer, judges=judges, mode=mode,
                                 depth=depth, backend=backend, profile=profile, settings=settings, session=own)
    events = Events()
    events("assessment_start", f"Assessing {len(chunk_ids)} chunks of {collection!r}", chunk_ids=list(chunk_ids))
    params = default_params(settings, mode=mode, collection=collection, depth=depth)
    scored = score_chunks(query, chunk_ids, params, session=session, settings=settings)
    return assess_hits(scored.result.query, answer, scored.result, scored.vectors, judges=judges,
                       collection=collection, backend=backend, profile=profile or active_profile(session=session),
                       settings=settings, events=events, scores={}, not_computed={},
                       judge_model=active_model(session=session))


def imported_run(assessment: Assessment, record: ExternalRun, *, source: str, collection: str,
                 intake_id: int | None = None) -> Run:
    """The assessed record as a run the Review page, exports, calibration and tuning treat like
    any other (not stored here: process_queue stores it)."""
    it, weights = assessment.iteration, assessment.profile.weights
    if not it.hits:
        note = "the record came with no contexts: the answer could not be checked against any source"
    elif not record.answer:
        note = "the source system gave no answer (it abstained)"
    elif it.verdict is not None:
        note = f"{ASSESSED_REASON}; judge: {it.verdict.label}, {it.verdict.reason}"
    else:
        note = ASSESSED_REASON
    return Run(
        query=assessment.query, preset=ASSESS_PRESET, collection=collection, source=source,
        backend=assessment.backend, model=assessment.model, status=assessment.status, final_answer=record.answer,
        citations=(), final_confidence=it.confidence, final_level=assessment.final_level,
        retrieval_confidence=it.retrieval_confidence, components=it.components,
        reflection_score=it.reflection.reflection_score if it.reflection else None,
        grade=it.grade.score if it.grade else None, crag_verdict=it.crag.verdict if it.crag else None,
        signals=it.signals, route=(it.decision,), best_iteration=it.ordinal, weights_profile=weights.label,
        weights_profile_id=assessment.profile.profile_id,
        config={"preset": ASSESS_PRESET, **assessment.config.to_dict(), "profile": weights.to_dict(),
                "force_pending": False, "requested_by": "",
                "assessment": {"source": source, "intake_id": intake_id, "trace_id": record.trace_id,
                               "judges": assessment.judges, "contexts": len(record.contexts),
                               "scores": assessment.scores, "not_computed": assessment.not_computed}},
        outcome_note=note, latency_ms=assessment.events[-1].elapsed_ms, iterations=(it,), events=assessment.events,
        trace_id=record.trace_id, external={**record.metadata.model_dump(mode="json", exclude_none=True),
                                            **({"reference": record.reference} if record.reference is not None else {})},
    )


# --- the queue -------------------------------------------------------------------------------

@dataclass(frozen=True)
class ProcessSummary:
    assessed: int
    failed: int
    remaining: int  # still queued when the drain ended (others may be pushing meanwhile)

    def to_dict(self) -> dict[str, int]:
        return {"assessed": self.assessed, "failed": self.failed, "remaining": self.remaining}


def process_queue(*, limit: int | None = None, judges: bool = True, on_progress: ProgressCallback | None = None,
                  settings: Settings | None = None, backend: AnswerBackend | None = None,
                  collection: str = "default", batch: int = ASSESS_BATCH,
                  max_batches: int | None = None) -> ProcessSummary:
    """Assess queued records, oldest first, until the queue is empty or `limit` are done.

    Each record is judged as it was pushed or imported with (the intake row's `judges`);
    `judges=False` turns the judges off for every record of this drain. Known documents and
    BM25 statistics come from `collection`. Records are claimed and assessed up to `batch` at a
    time (fewer when they carry many contexts: _claim; services.intake.batch embeds them
    together); each batch commits at once. `max_batches` stops the drain after that many.
    """
    if batch < 1:
        raise InputError("assess at least one record a batch")
    settings = settings or get_settings()
    backend = backend or backend_for(settings)
    with transaction(settings) as session:
        profile, judge_model = active_profile(session=session), active_model(session=session)
        total = count_queued(session=session)
    total = min(total, limit) if limit is not None else total
    assessed = failed = 0
    queued_when_empty = None
    batches = 0
    while (limit is None or assessed + failed < limit) and (max_batches is None or batches < max_batches):
        batches += 1
        wanted = batch if limit is None else min(batch, limit - assessed - failed)
        with transaction(settings) as session:
            claimed = _claim(wanted, session=session)
            outcomes = _assess_claimed(claimed, judges=judges, collection=collection, backend=backend,
                                       profile=profile, judge_model=judge_model, settings=settings, session=session)
            queued = None if claimed else count_queued(session=session)
        if queued is not None:
            # Nothing claimable: the queue is empty, its rows are claimed by another worker,
            # or the rows just claimed no longer validated (next_queued marks them failed). Only
            # that last case shrinks the queue, and only then is it worth claiming again.
            if queued == 0 or queued == queued_when_empty:
                break
            queued_when_empty = queued
            continue
        for ok in outcomes:  # the batch is committed: each record is done
            assessed, failed = assessed + ok, failed + (not ok)
            if on_progress is not None:
                on_progress(assessed + failed, max(total, assessed + failed))
    with transaction(settings) as session:
        remaining = count_queued(session=session)
    return ProcessSummary(assessed, failed, remaining)


def _claim(most: int, *, session: Session) -> list[QueuedRecord]:
    """Up to `most` records, claimed CLAIM_STEP at a time until their texts hold PASS_CHARS characters."""
    claimed = next_queued(min(most, CLAIM_STEP), session=session)
    while claimed and len(claimed) < most and sum(map(_characters, claimed)) < PASS_CHARS:
        more = next_queued(min(most - len(claimed), CLAIM_STEP), session=session, skip=[r.intake_id for r in claimed])
        if not more:  # the queue is empty (or what was claimed no longer validated): assess what is claimed
            break
        claimed.extend(more)
    return claimed


def _characters(record: QueuedRecord) -> int:
    run = record.run
    return len(run.question) + len(run.answer) + sum(len(c.text) for c in run.contexts)


def _assess_claimed(claimed: Sequence[QueuedRecord], *, judges: bool, collection: str, backend: AnswerBackend,
                    profile: ScoringProfile, judge_model: JudgeModel | None, settings: Settings,
                    session: Session) -> list[bool]:
    """Assess the claimed records together and store each in the claiming transaction, under a
    savepoint of its own; per record, False when it failed (marked failed with the reason)."""
    outcomes = assess_batch([r.run for r in claimed], judges=[judges and r.judges for r in claimed],
                            session=session, collection=collection, backend=backend, profile=profile,
                            settings=settings, judge_model=judge_model)
    stored = store_batch(claimed, outcomes, collection=collection, session=session)
    return [True if done else _store(record, outcome, collection=collection, session=session)
            for record, outcome, done in zip(claimed, outcomes, stored, strict=True)]


def store_batch(claimed: Sequence[QueuedRecord], outcomes: Sequence[Assessment | Exception], *, collection: str,
                session: Session) -> list[bool]:
    """Store every assessed record's run at once (services.intake.store_runs: one statement a
    table), under one savepoint; per record, True when it is stored. If the store refuses a
    row, nothing of the batch stays and each record is stored alone (_store), so the one it
    refuses is marked failed with the reason and the others are stored."""
    assessed = [(record, outcome) for record, outcome in zip(claimed, outcomes, strict=True)
                if isinstance(outcome, Assessment)]
    if not assessed:
        return [False] * len(claimed)
    try:
        with session.begin_nested():
            store_runs([(record.intake_id, imported_run(outcome, record.run, source=record.source,
                                                        collection=collection, intake_id=record.intake_id), record.app)
                        for record, outcome in assessed], session=session)
    except STORE_ERRORS:
        raise
    except Exception:  # a row of one record's: store them one by one to find it
        _log.warning("storing a batch of %d runs at once failed; storing them one by one", len(assessed),
                     exc_info=True)
        return [False] * len(claimed)
    return [isinstance(outcome, Assessment) for outcome in outcomes]


def _store(record: QueuedRecord, outcome: Assessment | Exception, *, collection: str, session: Session) -> bool:
    """Store one record's run and mark it assessed, or mark it failed with why; False when it failed."""
    try:
        if isinstance(outcome, Exception):
            raise outcome
        with session.begin_nested():
            run = imported_run(outcome, record.run, source=record.source, collection=collection,
                               intake_id=record.intake_id)
            run_id = save_run(run, session=session)
            mark_assessed(record.intake_id, run_id=run_id, session=session)
        return True
    except STORE_ERRORS:
        raise
    except Exception as exc:  # any other failure is this record's: say why and go on
        if not isinstance(exc, WorkbenchError):
            _log.exception("assessing intake record %s failed", record.intake_id)
        reason = str(exc) if isinstance(exc, WorkbenchError) else f"{type(exc).__name__}: {exc}"
        mark_failed(record.intake_id, f"assessment failed: {reason}"[:MAX_REASON_CHARS], session=session)
        return False
