"""The endpoints: push runs, follow one, check health. Bodies validate, then call services."""

from __future__ import annotations

import logging
import threading
from dataclasses import asdict
from datetime import datetime
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError
from sqlalchemy import text

from api.assess_limits import AssessSlots, CancellableBackend, check_assess_budget, finish_or_give_up
from api.auth import presented_key
from api.errors import MAX_LISTED_PROBLEMS, TooManyProblemsError
from api.json_body import BoundedJsonRoute
from api.models import (
    AcceptedRun,
    AssessRequest,
    AssessResponse,
    ErrorResponse,
    HealthResponse,
    PushResponse,
    ReviewedRunResponse,
    ReviewedRunsResponse,
    RunStatusResponse,
)
from services.answering.llm.backends import backend_for
from services.errors import WorkbenchError
from services.intake.api_keys import app_to_read, require_push, verify_api_key
from services.intake.assess import assess_record
from services.intake.intake import IntakeStatus, accept_records, intake_status, intake_status_by_trace_id
from services.intake.quotas import Backlogs
from services.intake.schema import ExternalRun
from services.intake.status import cached_backlog
from services.intake.verdicts import MAX_LIMIT, Position, reviewed_page
from services.retrieval.text import require_storable
from services.settings import Settings
from services.store import transaction

router = APIRouter(route_class=BoundedJsonRoute)  # JSON bodies parsed off the event loop, depth-bounded
_log = logging.getLogger("workbench.api")
_AUTH_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorResponse, "description": "Missing, unknown or revoked API key."},
    403: {"model": ErrorResponse, "description": "The key's scope does not allow this (a read key pushing, another app's runs)."},
    429: {"model": ErrorResponse, "description": "The key is over a quota: requests a second, or records waiting (Retry-After)."}}
_APP_QUERY = Query(None, max_length=100, description="An admin key: whose runs (default every app's). Any other key reads "
                                                     "only its own app's runs.")
# POST /runs takes one record or a list of them; FastAPI cannot say "either" for a body it
# does not validate itself, so the schema is spelled out here (ExternalRun is in components).
_RUNS_BODY = {"requestBody": {"required": True, "content": {"application/json": {"schema": {
    "oneOf": [{"$ref": "#/components/schemas/ExternalRun"},
              {"type": "array", "items": {"$ref": "#/components/schemas/ExternalRun"}, "minItems": 1}]}}}}}


async def app_settings(request: Request) -> Settings:  # async: no thread hop for a lookup
    settings: Settings = request.app.state.settings
    return settings


@router.get("/health", tags=["service"], response_model=HealthResponse, summary="Is the service up and its database reachable?",
            responses={503: {"model": HealthResponse, "description": "The database cannot be reached."}})
def health(settings: Settings = Depends(app_settings)) -> Any:
    """No key needed. Reports whether the database answers, how many records wait for
    assessment and how long the oldest has waited. Anyone may call it in a loop: from 10,000
    records waiting the store is counted at most once a second (services.intake.status)."""
    try:
        backlog = cached_backlog(settings)
    except WorkbenchError as exc:
        # No key is needed here, so the answer does not say where the store is; the log does.
        _log.warning("health check: %s", exc)
        unavailable = HealthResponse(status="unavailable", database="unreachable", queued=None, oldest_queued_at=None,
                                     oldest_queued_age_s=None)
        return JSONResponse(unavailable.model_dump(mode="json"), status_code=503)
    return HealthResponse(status="ok", database="ok", queued=backlog.queued, oldest_queued_at=backlog.oldest_received_at,
                          oldest_queued_age_s=None if backlog.oldest_age_s is None else round(backlog.oldest_age_s, 3))


@router.post("/runs", tags=["runs"], status_code=202, response_model=PushResponse, openapi_extra=_RUNS_BODY,
             summary="Push one run, or a batch, for assessment and review",
             responses={**_AUTH_ERRORS, 413: {"model": ErrorResponse, "description": "The body is over the size limit."}})
def push_runs(body: Annotated[Any, Body()], request: Request, key: str | None = Depends(presented_key),
              settings: Settings = Depends(app_settings),
              judges: bool = Query(True, description="false: assess without CRAG, reflection and grading "
                                                     "(the retrieval breakdown only; faster, never auto-accepted).")
              ) -> PushResponse:
    """Send what your RAG system answered: one ExternalRun object, or a JSON array of them
    (up to API_MAX_BATCH). Each is stored under the key's app and queued for assessment; the
    answer (202) gives every record's intake id in the order sent. A record whose trace_id
    the app already sent is not stored again: its entry says `created: false` and points at
    the first one (another app's trace ids are its own business). The assessment runs in the
    background, usually within seconds: follow it with GET /runs/{intake_id}.

    A batch is all or nothing: if any record is invalid, the 422 names each bad field
    (`body.3.contexts.0.text`) and nothing is stored. A read key gets 403; a key with
    API_MAX_QUEUED_PER_KEY records still waiting gets 429 with Retry-After."""
    backlogs: Backlogs = request.app.state.backlogs
    with transaction(settings) as session:
        caller = verify_api_key(key, session=session)
        require_push(caller)
        runs = _parse_runs(body, max_batch=settings.api_max_batch)
        backlogs.check(caller.key_id, len(runs), cap=settings.api_max_queued_per_key, key_prefix=caller.prefix,
                       session=session)
        accepted = accept_records(runs, source="api", app=caller.app, api_key_id=caller.key_id, judges=judges,
                                  session=session)
    created = sum(a.created for a in accepted)
    backlogs.added(caller.key_id, created)
    return PushResponse(app=caller.app, accepted=created, duplicates=len(accepted) - created,
                        runs=[AcceptedRun(intake_id=a.intake_id, trace_id=a.trace_id, created=a.created, status=a.status)
                              for a in accepted])


@router.get("/runs/by-trace-id/{trace_id:path}", tags=["runs"], response_model=RunStatusResponse,
            summary="Follow a pushed run by your own trace id",
            responses={**_AUTH_ERRORS, 404: {"model": ErrorResponse, "description": "Your app has no record with this trace id."},
                       409: {"model": ErrorResponse, "description": "An admin key, and several apps sent this trace id: "
                                                                    "name one with ?app=."}})
def run_by_trace_id(trace_id: str, key: str | None = Depends(presented_key), app: str | None = _APP_QUERY,
                    settings: Settings = Depends(app_settings)) -> RunStatusResponse:
    """The same answer as GET /runs/{intake_id}, found by the trace id your app's record carried."""
    require_storable(trace_id, "the trace id")  # a NUL would reach the store and fail there as a 500
    with transaction(settings) as session:
        caller = verify_api_key(key, session=session)
        return _status(intake_status_by_trace_id(trace_id, app=app_to_read(caller, app), session=session))


@router.get("/runs/{intake_id}", tags=["runs"], response_model=RunStatusResponse,
            summary="Follow a pushed run: queued, assessed (with confidence and verdict) or failed",
            responses={**_AUTH_ERRORS, 404: {"model": ErrorResponse, "description": "Your app has no record with this intake id."}})
def run_status(intake_id: Annotated[int, Path(ge=1, le=2**63 - 1, description="The id POST /runs returned.")],
               key: str | None = Depends(presented_key), app: str | None = _APP_QUERY,
               settings: Settings = Depends(app_settings)) -> RunStatusResponse:
    """Where the record is: `queued` until it is assessed; then its run's final confidence
    and level, its review status (`pending` while it waits in the review queue), and the
    reviewer's verdict once there is one; `failed` with the reason otherwise. Another app's
    intake id is a 404, exactly as an id nobody has."""
    with transaction(settings) as session:
        caller = verify_api_key(key, session=session)
        return _status(intake_status(intake_id, app=app_to_read(caller, app), session=session))


@router.get("/runs", tags=["runs"], response_model=ReviewedRunsResponse,
            summary="Pull verdicts: your runs reviewed since a time or a cursor, with corrections",
            responses=_AUTH_ERRORS)
def reviewed_runs(reviewed_since_: Annotated[datetime | None, Query(alias="reviewed_since", description=(
                      "ISO 8601; UTC when no offset is given. Runs whose latest review is at or after it."))] = None,
                  cursor: Annotated[str | None, Query(max_length=200, description=(
                      "The `next` (or a kept `resume`) of an earlier page: the reviews after it."))] = None,
                  limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 100, app: str | None = _APP_QUERY,
                  key: str | None = Depends(presented_key), settings: Settings = Depends(app_settings)
                  ) -> ReviewedRunsResponse:
    """Your app's runs that came in (pushed, imported or traced) whose latest review is at or
    after `reviewed_since`, or after `cursor`, oldest review first: each with its trace id,
    the verdict, the corrected answer and flag reason, the reviewer and the review time.
    Follow `next` while it is given; keep `resume` to poll for later reviews. Pages are a
    keyset (review time, run id): the last page of many costs what the first does. A review
    is listed once it is API_VERDICT_SETTLE_SECONDS (1 s) old, so none saved while a page is
    read is skipped."""
    if (reviewed_since_ is None) == (cursor is None):
        raise RequestValidationError([{"type": "missing", "loc": ("query", "reviewed_since"),
                                       "msg": "send reviewed_since (a time) or cursor (an earlier page's next), one of them"}])
    after = Position.decode(cursor) if cursor is not None else Position.since(reviewed_since_)  # type: ignore[arg-type]
    with transaction(settings) as session:
        caller = verify_api_key(key, session=session)
        page = reviewed_page(after, app=app_to_read(caller, app), limit=limit,
                             settle_seconds=settings.api_verdict_settle_seconds, session=session)
    resume = page.resume.encode()
    return ReviewedRunsResponse(runs=[ReviewedRunResponse(**asdict(r)) for r in page.runs],
                                next=resume if page.more else None, resume=resume)


@router.post("/assess", tags=["runs"], response_model=AssessResponse,
             summary="Score a question, its contexts and an answer now, storing nothing",
             responses={**_AUTH_ERRORS, 413: {"model": ErrorResponse, "description": "The body is over the size limit."},
                        503: {"model": ErrorResponse, "description": "Too many assessments at once (Retry-After)."},
                        504: {"model": ErrorResponse, "description": "The assessment took longer than API_ASSESS_TIMEOUT_S."}})
async def assess(body: AssessRequest, request: Request, key: str | None = Depends(presented_key),
                 settings: Settings = Depends(app_settings),
                 judges: bool = Query(True, description="false: the retrieval breakdown only (no CRAG, reflection, grading)."),
                 collection: str = Query("default", max_length=200,
                                         description="Whose documents and BM25 statistics score contexts that carry "
                                                     "no retriever scores.")) -> Response:
    """The assessment a pushed run gets, answered at once and not stored: the seven-metric
    breakdown on the contexts you send (your retriever's scores where you send them, the
    workbench's where not, and which components could not be computed), CRAG, reflection
    and grading of the answer, the blended confidence, and the status the run would get.
    It is bounded below a push (API_ASSESS_MAX_CONTEXTS, API_ASSESS_MAX_CONTEXT_CHARS: 422
    past them), runs a few at a time (API_ASSESS_MAX_CONCURRENT: 503 with Retry-After), for
    at most API_ASSESS_TIMEOUT_S (504), and stops when the client disconnects."""
    require_storable(collection, "the collection")
    check_assess_budget(body.contexts, settings)
    slots: AssessSlots = request.app.state.assess_slots
    slots.take()  # 503 here, before any work, when every slot is busy
    cancelled = threading.Event()
    try:
        answer = await finish_or_give_up(partial(_assess_now, body, key, judges, collection, settings, cancelled, slots),
                                         request, timeout_s=settings.api_assess_timeout_s, cancelled=cancelled)
    except BaseException:
        cancelled.set()
        raise
    return JSONResponse(answer.model_dump(mode="json")) if answer is not None else Response(status_code=499)


def _assess_now(body: AssessRequest, key: str | None, judges: bool, collection: str, settings: Settings,
                cancelled: threading.Event, slots: AssessSlots) -> AssessResponse:
    """POST /assess's work, in a worker thread; the slot is given back when it ends, however the
    request ended."""
    try:
        with transaction(settings) as session:
            verify_api_key(key, session=session)
            # The store stops at the deadline too; the backend refuses calls once the work is given up.
            session.execute(text("SELECT set_config('statement_timeout', :ms, true)"),
                            {"ms": str(int(settings.api_assess_timeout_s * 1000))})
            record = ExternalRun(question=body.question, answer=body.answer, contexts=body.contexts, trace_id=None,
                                 reference=None)
            assessment = assess_record(record, session=session, judges=judges, collection=collection, settings=settings,
                                       backend=CancellableBackend(backend_for(settings), cancelled))  # type: ignore[arg-type]
    finally:
        slots.give_back()
    ignored = {name: "kept only with a stored run (POST /runs); /assess stores nothing" for name in body.ignored_fields()}
    return AssessResponse(**assessment.to_dict(), ignored=ignored)


def _parse_runs(body: Any, *, max_batch: int) -> list[ExternalRun]:
    """The body as records, or a RequestValidationError whose locations name each bad field."""
    single = not isinstance(body, list)
    items = [body] if single else body
    if not items:
        raise RequestValidationError([{"type": "too_short", "loc": ("body",), "msg": "send at least one run"}])
    if len(items) > max_batch:
        raise RequestValidationError([{"type": "too_long", "loc": ("body",),
                                       "msg": f"at most {max_batch} runs per request (got {len(items)}); split the batch"}])
    runs: list[ExternalRun] = []
    listed: list[dict[str, Any]] = []
    total = 0
    for index, item in enumerate(items):
        where = ("body",) if single else ("body", index)
        try:
            runs.append(ExternalRun.model_validate(item))
        except ValidationError as exc:
            total += exc.error_count()
            if len(listed) < MAX_LISTED_PROBLEMS:  # the rest are counted, not kept
                errors = exc.errors(include_url=False, include_input=False, include_context=False)
                listed += [{**e, "loc": (*where, *e["loc"])} for e in errors[:MAX_LISTED_PROBLEMS - len(listed)]]
    if total:
        raise TooManyProblemsError(listed, total=total)
    return runs


def _status(found: IntakeStatus) -> RunStatusResponse:
    return RunStatusResponse(
        intake_id=found.intake_id, app=found.app, trace_id=found.trace_id, source=found.source, status=found.status,
        received_at=found.received_at, error=found.error, run_id=found.run_id, assessed_at=found.assessed_at,
        confidence=found.confidence, level=found.level, review_status=found.review_status, verdict=found.verdict)
