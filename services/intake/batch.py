"""Assess many records with one or two passes of the embedding model instead of five or six a record.

Alone, a record asks the model for vectors once for its contexts, once for its question and
then once per signal of the judges (claims, evidence sentences, the answer), each a forward
pass over a few texts; on two shared cores a pass over two texts costs nearly what one over
sixty does (bench/intake.py measured 0.3 records/s against a bound of 5.6). A batch asks:

1. for every record's contexts and question (what the dense similarities need) and what its
   judges read alone whatever chunks CRAG keeps (services.judging.features.texts_read_alone:
   the question and the answer's claims), in one call into the judge's cache (services.judging.
   vectors.SentenceEmbedder); a context encoded there is read with its tokens, so the judges'
   reading of its sentences (each the mean of its tokens in that pass) costs no second look;
2. each record's hits scored and CRAG run (assessment.stage_hits), then, for a record that
   kept a chunk the first call did not read whole (one whose title travels with it for its
   similarity, or whose similarity was given), what its judges read of the chunks, learned by
   running the judge's own public functions with an embedder that only writes down what it is
   asked for (_Recording): such a chunk goes to the model, whole, once.

The judges, run for real, find their vectors in the cache. Passing every context in the first
call would make one call of every batch, but CRAG drops contexts often enough that reading
dropped ones costs more than the second call. The cache is shared, so a text both sides embed
(the question, a one-sentence context) is encoded once. A text the recording missed is encoded
when the judge asks, as it always was: the recording decides only what is encoded early, never
what a record gets. The judges' reading of an answer's words, made while recording, is kept
for the real run (services.judging.features.read_words). Each record's result is the one it
gets alone, to the float noise of encoding a text beside others (a vector component moves by
about 1e-7: padding changes the kernels' summation order).

A record that fails is returned as its exception and the others go on; a store that fails
raises (STORE_ERRORS): nothing of the batch can be stored then.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import nullcontext

import numpy as np
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from services.answering.llm.base import AnswerBackend
from services.answering.presets import FeatureConfig
from services.errors import DatabaseRefusedError, DatabaseUnavailableError
from services.intake.assessment import Assessment, Events, Staged, judge_staged, stage_hits
from services.intake.context_scores import (
    KnownDocument,
    PreparedContexts,
    known_documents,
    prepare_contexts,
)
from services.intake.schema import ExternalRun
from services.judging import judge_answer
from services.judging.adequacy import answer_relevance
from services.judging.context_sentences import ContextSentence
from services.judging.features import reader_inputs, texts_read_alone
from services.judging.model import JudgeModel
from services.judging.reader import shipped_reader
from services.judging.vectors import SentenceEmbedder, cached_embedder
from services.retrieval.embedding import model_dimension
from services.retrieval.search import clean_query
from services.scoring.profiles import ScoringProfile
from services.settings import Settings

_log = logging.getLogger("workbench.intake")
# A store that is down or aborted the statement says nothing about a record: the batch stays queued.
STORE_ERRORS = (OperationalError, DatabaseUnavailableError, DatabaseRefusedError)

Outcome = Assessment | Exception


def assess_batch(records: Sequence[ExternalRun], *, judges: Sequence[bool], session: Session, collection: str,
                 backend: AnswerBackend, profile: ScoringProfile, settings: Settings,
                 judge_model: JudgeModel | None = None) -> list[Outcome]:
    """Each record's assessment (with the judges where `judges` says so), or the exception that
    stopped it, in order. Reads corpus statistics in `session`; writes nothing."""
    if len(judges) != len(records):
        raise ValueError("one judges flag per record")
    embed = cached_embedder(settings.embedding_model)
    known = _known_of_batch(records, session=session, collection=collection)
    outcomes: list[Outcome | tuple[PreparedContexts, Events]] = [
        _prepare(r, j, session=session, collection=collection, settings=settings, known=known)
        for r, j in zip(records, judges)]
    dimension = model_dimension(settings.embedding_model)
    first = _Recording(dimension)
    for i, outcome in enumerate(outcomes):
        if isinstance(outcome, tuple):
            prepared = outcome[0]
            encoded = prepared.texts_to_encode
            first.texts.extend(encoded)
            if judges[i]:  # a context encoded anyway is read with its sentences, which the judges may read
                wanted = set(encoded)
                first.contexts.extend(c.text for c in prepared.given if c.text in wanted)
                first.texts.extend(texts_read_alone(prepared.query, records[i].answer))
    _prefetch(embed, first)

    staged: dict[int, tuple[Staged, PreparedContexts]] = {}
    for i, outcome in enumerate(outcomes):
        if isinstance(outcome, tuple):
            prepared, events = outcome
            try:
                scored = prepared.scored(embed)
                staged[i] = (stage_hits(prepared.query, scored.result, scored.vectors, judges=judges[i],
                                        collection=collection, backend=backend, profile=profile, settings=settings,
                                        events=events, judge_model=judge_model), prepared)
            except Exception as exc:  # this record's: the others go on
                outcomes[i] = exc
    # What the judges read of CRAG's chunks: their sentences (already read when the chunk was
    # encoded for its similarity; then the model is not called again). A record whose kept
    # chunks were all read in the first call has nothing left to learn (the texts its judges
    # read alone were in that call too), so its judges are not run twice: on records of one
    # short context that second run was about a tenth of the judges' time (bench/intake.py).
    second = _Recording(dimension)
    for i, (stage, _) in staged.items():
        chunks = [c.text for c in stage.chunks]
        if not all(embed.has_read(c) for c in chunks):
            record_judges(stage.query, records[i].answer, chunks, stage.config, second)
    _prefetch(embed, second)
    _read_ahead(settings.embedding_model, [(stage.query, records[i].answer, [c.text for c in stage.chunks])
                                           for i, (stage, _) in staged.items() if judges[i]])

    for i, (stage, prepared) in staged.items():
        try:
            outcomes[i] = judge_staged(stage, records[i].answer, scores=prepared.scores,
                                       not_computed=prepared.not_computed)
        except Exception as exc:  # this record's: the others go on
            outcomes[i] = exc
    return [o if not isinstance(o, tuple) else RuntimeError("not assessed") for o in outcomes]


def _known_of_batch(records: Sequence[ExternalRun], *, session: Session,
                    collection: str) -> dict[str, KnownDocument] | None:
    """The known documents of every record's contexts in one statement, under a savepoint; None
    if it fails (each record then reads its own, and fails alone if it must)."""
    ids = sorted({c.document_id for r in records for c in r.contexts if c.document_id})
    try:
        with session.begin_nested():
            return known_documents(ids, collection, session)
    except STORE_ERRORS:
        raise
    except Exception:
        _log.warning("reading the known documents of a batch failed; reading them record by record", exc_info=True)
        return None


def _prepare(record: ExternalRun, judges: bool, *, session: Session, collection: str, settings: Settings,
             known: dict[str, KnownDocument] | None = None) -> Outcome | tuple[PreparedContexts, Events]:
    """What the store says of a record's contexts, under a savepoint when it runs a statement
    (one naming no document `known` holds runs none): a statement that fails on this record's
    data rolls back to it and leaves the batch's transaction usable."""
    reads = known is None or any(c.document_id in known for c in record.contexts if c.document_id)
    try:
        with session.begin_nested() if reads else nullcontext():
            query = clean_query(record.question, max_chars=settings.max_query_chars)
            events = Events()
            events("assessment_start", f"Assessing an imported answer on its {len(record.contexts)} contexts",
                   contexts=len(record.contexts), judges=judges)
            prepared = prepare_contexts(query, record.contexts, collection=collection, settings=settings,
                                        session=session, need_vectors=judges, known=known)
        return prepared, events
    except STORE_ERRORS:
        raise
    except Exception as exc:  # this record's: the others go on
        return exc


class _Recording:
    """An embedder that only writes down what it is asked for: texts to read alone, and the
    contexts whose sentences are read in them (services.judging.vectors.SentenceEmbedder)."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.texts: list[str] = []
        self.contexts: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        return np.zeros((len(texts), self.dimension), dtype=np.float32)

    def in_context(self, contexts: Sequence[str], sentences: Sequence[ContextSentence]) -> np.ndarray:
        self.contexts.extend(contexts[s.context] for s in sentences)
        return np.zeros((len(sentences), self.dimension), dtype=np.float32)


def record_judges(query: str, answer: str, chunks: Sequence[str], config: FeatureConfig, recording: _Recording) -> None:
    """Write down in `recording` what the judges will embed for `answer` on `chunks` (their
    texts), as stages.judge calls them: the verdict (services.judging.judge_answer), then the
    answer's relevance to the question, which both the reflection read off the verdict and the
    offline grade use."""
    if not answer or not (config.enable_self_reflection or config.enable_answer_grading):
        return
    try:
        judge_answer(query, answer, list(chunks), embed=recording)
        answer_relevance(query, answer, recording)
    except Exception:  # the judges, run for real, meet it again and fail the record with its reason
        _log.debug("recording the judge's texts failed", exc_info=True)


def _read_ahead(model_name: str, answers: Sequence[tuple[str, str, Sequence[str]]]) -> None:
    """The reader of the question reads every (question, answer, chunks) of the batch it will read
    in one call, batched: one at a time, its pass was a judge's 25 ms of a short record's 52 ms
    (bench/intake.py, 2026-12-04). If it fails, each record's judge reads its own."""
    reader = shipped_reader(model_name)
    if reader is None:
        return
    try:
        reader.read([read for question, answer, chunks in answers if answer
                     and (read := reader_inputs(question, answer, [c for c in chunks if c and c.strip()])) is not None])
    except Exception:
        _log.warning("the reader of the question failed on a batch of %d answers; reading record by record",
                     len(answers), exc_info=True)


def _prefetch(embed: SentenceEmbedder, recording: _Recording) -> None:
    """One call of the model for everything recorded, into the judge's cache. If it fails, each
    record encodes its own texts when it needs them, and fails alone if it must."""
    if not recording.texts and not recording.contexts:
        return
    try:
        embed.prefetch(recording.texts, recording.contexts)
    except Exception:
        _log.warning("encoding a batch of %d texts and %d contexts at once failed; encoding record by record",
                     len(recording.texts), len(recording.contexts), exc_info=True)
