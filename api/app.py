"""The FastAPI application: settings, body-size limit, error mapping, routes, OpenAPI at /docs."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException
from swagger_ui_bundle import swagger_ui_path

from api.access_log import redact_access_log
from api.assess_limits import AssessSlots
from api.errors import http_error, validation_failed, workbench_error
from api.gate import AuthenticateFirst, Refusal
from api.limits import BodyReads, BodySizeLimit
from api.quotas import RateLimitPerKey
from api.routes import router
from api.traces import refuse_export
from api.traces import router as traces_router
from api.unread_bodies import CloseAfterUnreadBody
from api.worker import AssessmentWorker
from services.errors import WorkbenchError
from services.intake.quotas import Backlogs, KeyRates
from services.intake.schema import ExternalRun
from services.intake.trace_keys import TraceKeys
from services.review.retention_schedule import DailyPrune
from services.settings import Settings, get_settings
from services.store import get_engine

_log = logging.getLogger("workbench.api")
DOCS_ASSETS = "/docs-assets"  # Swagger UI's files, served from the swagger-ui-bundle-v2 wheel

DESCRIPTION = """
Push the answers your own RAG system gives, and follow each one through the workbench:
assessed with the seven-metric confidence breakdown on the contexts you sent, routed to
the review queue by the same rules as the workbench's own runs, and reviewed.

Every endpoint but `/health` needs an API key (`workbench api-key create NAME --app APP`),
sent as `Authorization: Bearer <key>` or `X-API-Key: <key>`. A key belongs to an app: what it
pushes is stored under that app (trace ids are unique per app), and it reads only that app's
runs; a `read` key cannot push, an `admin` key reads every app's. Past a key's quotas
(requests a second, records waiting for assessment) the answer is 429 with Retry-After.
"""


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    # Start (or join) the store and migrate it now rather than on the first request; if it
    # is down the API still starts, and /health says so until it is back.
    try:
        await run_in_threadpool(get_engine, app.state.settings)
    except WorkbenchError as exc:
        _log.warning("the database is not reachable yet: %s", exc)
    worker: AssessmentWorker | None = app.state.worker
    retention: DailyPrune | None = app.state.retention
    for job in (worker, retention):
        if job is not None:
            job.start()
    try:
        yield
    finally:
        for job in (worker, retention):
            if job is not None:
                await run_in_threadpool(job.stop)


def create_app(settings: Settings, *, assess: bool = True) -> FastAPI:
    """The API for these settings (the store it writes to, its limits); with `assess`, a
    background worker assesses pushed runs (api/worker.py)."""
    app = FastAPI(
        title="RAG Confidence Workbench API", version="1", description=DESCRIPTION, lifespan=_lifespan,
        docs_url=None, redoc_url=None,  # FastAPI's own load Swagger UI and ReDoc from a CDN: _serve_docs instead
        openapi_tags=[{"name": "runs", "description": "Runs from your RAG system: push them, follow them."},
                      {"name": "service", "description": "Liveness and readiness."}],
    )
    app.state.settings = settings
    redact_access_log()
    app.state.worker = AssessmentWorker(settings) if assess else None
    # RETENTION_DAILY: prune runs past RETENTION_OLDER_THAN once a day (a bad age fails here).
    app.state.retention = DailyPrune(settings) if settings.retention_daily else None
    app.state.keys = TraceKeys()  # keys verified at most every 30 s before the body; endpoints verify again
    app.state.body_reads = BodyReads()
    app.state.assess_slots = AssessSlots(settings.api_assess_max_concurrent)
    app.state.backlogs = Backlogs()  # records waiting per key (API_MAX_QUEUED_PER_KEY)
    refusals: dict[str, Refusal] = {"/v1/traces": refuse_export}
    app.include_router(router)
    app.include_router(traces_router)
    app.add_middleware(BodySizeLimit, max_bytes=settings.api_max_body_bytes, body_reads=app.state.body_reads)
    # After the gate, before the body: a key over its request rate is turned away unread.
    app.add_middleware(RateLimitPerKey, rates=KeyRates(rate=settings.api_rate_per_key, burst=settings.api_rate_burst),
                       refusals=refusals)
    # Added last, so it runs first: no body is read for a request without a valid key.
    app.add_middleware(AuthenticateFirst, settings=settings, keys=app.state.keys, refusals=refusals)
    # Outermost: a body refused unread (401, 429) ends its connection instead of being taken in.
    app.add_middleware(CloseAfterUnreadBody)
    app.add_exception_handler(WorkbenchError, workbench_error)
    app.add_exception_handler(RequestValidationError, validation_failed)
    app.add_exception_handler(HTTPException, http_error)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    _serve_docs(app)
    return app


def _serve_docs(app: FastAPI) -> None:
    """/docs with Swagger UI's script and styles served by the API itself (FastAPI's documented
    self-hosting), so the page works inside a network that cannot reach a CDN."""
    app.mount(DOCS_ASSETS, StaticFiles(directory=swagger_ui_path), name="docs-assets")
    redirect = "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def docs(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}", title=f"{app.title} - docs", oauth2_redirect_url=f"{root}{redirect}",
            swagger_js_url=f"{root}{DOCS_ASSETS}/swagger-ui-bundle.js", swagger_css_url=f"{root}{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{root}{DOCS_ASSETS}/favicon-32x32.png")

    @app.get(redirect, include_in_schema=False)
    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()


def create_app_from_env() -> FastAPI:
    """The uvicorn factory (`workbench api`): settings from the environment and `.env`."""
    return create_app(get_settings())


def create_app_without_worker() -> FastAPI:
    """`workbench api --no-assess`: accept pushes only; `workbench intake process` assesses them."""
    return create_app(get_settings(), assess=False)


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus the record schema POST /runs refers to."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes,
                             tags=app.openapi_tags)
        record = ExternalRun.model_json_schema(ref_template="#/components/schemas/{model}")
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.update(record.pop("$defs", {}))
        components["ExternalRun"] = record
        app.openapi_schema = schema
    return app.openapi_schema
