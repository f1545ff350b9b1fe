"""POST /v1/traces: the OTLP/HTTP trace receiver. Authenticate, decode, store the spans, answer
in the request's own encoding (an ExportTraceServiceResponse, or a google.rpc.Status with a
readable message for an error), as the OTLP specification has it."""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from google.protobuf import json_format
from google.protobuf.message import Message
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTracePartialSuccess, ExportTraceServiceResponse
from starlette.exceptions import HTTPException
from starlette.types import Scope

from api.auth import presented_key
from api.errors import error_headers, public_message, status_for
from services.errors import InputError, NotAuthenticatedError, PayloadTooLargeError, WorkbenchError
from services.intake.api_keys import require_push
from services.intake.otlp import JSON, decode_export, media_type
from services.intake.quotas import Backlogs
from services.intake.trace_keys import TraceKeys
from services.intake.traces import StoredExport, store_spans
from services.settings import Settings
from services.store import transaction

router = APIRouter()
_GRPC_CODES = {400: code_pb2.INVALID_ARGUMENT, 401: code_pb2.UNAUTHENTICATED, 403: code_pb2.PERMISSION_DENIED,
               413: code_pb2.RESOURCE_EXHAUSTED, 415: code_pb2.INVALID_ARGUMENT, 429: code_pb2.RESOURCE_EXHAUSTED,
               503: code_pb2.UNAVAILABLE}
_SHOWN_REFUSALS = 3
# The body is read raw (either encoding, maybe gzipped), so its schema is spelled out for /docs.
_TRACES_BODY = {"requestBody": {"required": True, "content": {
    "application/x-protobuf": {"schema": {"type": "string", "format": "binary",
                                          "description": "An OTLP ExportTraceServiceRequest (protobuf)."}},
    "application/json": {"schema": {"type": "object", "description": "An OTLP ExportTraceServiceRequest in OTLP/JSON "
                                                                     "(trace and span ids as hex)."}}}}}


@router.post("/v1/traces", tags=["runs"], summary="Receive OpenTelemetry traces (OTLP/HTTP, protobuf or JSON)",
             openapi_extra=_TRACES_BODY,
             responses={200: {"description": "An ExportTraceServiceResponse; `partial_success` names refused traces."},
                        400: {"description": "A google.rpc.Status: the body could not be decoded, or every trace was refused."},
                        401: {"description": "Missing, unknown or revoked API key."},
                        413: {"description": "The body, as sent or decompressed, is over API_MAX_BODY_BYTES."}})
async def receive_traces(request: Request, key: str | None = Depends(presented_key),
                         judges: bool = Query(True, description="false: assess the traces' runs without the judges.")
                         ) -> Response:
    """Point an OTLP exporter here (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://host:8000/v1/traces`,
    `OTEL_EXPORTER_OTLP_HEADERS=Authorization=Bearer <key>`). Spans are stored before the answer;
    each trace becomes one run once its root span has arrived (README: *Traces*)."""
    settings: Settings = request.app.state.settings
    as_json = (request.headers.get("content-type") or "").split(";")[0].strip().lower() == JSON
    try:
        media_type(request.headers.get("content-type"))
    except InputError as exc:
        return _status(415, str(exc), as_json=as_json)
    try:
        body = await request.body()
    except HTTPException as exc:  # the body-size limit (api/limits.py)
        if exc.status_code != 413:
            raise
        return _status(413, f"the request body is over the {settings.api_max_body_bytes:,}-byte limit (API_MAX_BODY_BYTES); "
                            "export smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE)", as_json=as_json)
    try:
        stored = await anyio.to_thread.run_sync(_receive, body, request.headers.get("content-type"),
                                                request.headers.get("content-encoding"), key, judges, settings,
                                                request.app.state.keys, request.app.state.backlogs,
                                                limiter=_store_slots(request))
    except PayloadTooLargeError as exc:
        return _status(413, str(exc), as_json=as_json)
    except WorkbenchError as exc:
        code = 400 if isinstance(exc, InputError) else status_for(exc)
        return _status(code, public_message(exc, code), as_json=as_json, headers=error_headers(exc))
    if stored.refused and not (stored.accepted or stored.duplicates or stored.late):
        return _status(400, _refusals(stored), as_json=as_json)
    answer = ExportTraceServiceResponse()
    if stored.refused:
        answer.partial_success.CopyFrom(ExportTracePartialSuccess(rejected_spans=stored.rejected_spans,
                                                                  error_message=_refusals(stored)))
    return _message(200, answer, as_json=as_json)


# Exports stored at once; the others wait their turn on the event loop. The store's pool keeps
# five connections (db/engine.py) and the API's worker holds up to two; past five at once the
# pool opens a connection per export and closes it after, and Postgres forked a backend for
# each: 20 exporters cost it 2.7 ms of CPU an export instead of 0.6 (and the API 0.5 ms more).
_STORING_AT_ONCE = 3


def _store_slots(request: Request) -> anyio.CapacityLimiter:
    slots: anyio.CapacityLimiter | None = getattr(request.app.state, "otlp_store_slots", None)
    if slots is None:  # made on the event loop, at the first export
        slots = request.app.state.otlp_store_slots = anyio.CapacityLimiter(_STORING_AT_ONCE)
    return slots


def _receive(body: bytes, content_type: str | None, content_encoding: str | None, key: str | None, judges: bool,
             settings: Settings, keys: TraceKeys, backlogs: Backlogs) -> StoredExport:
    with transaction(settings) as session:
        # api/gate.py refused a stranger before the body was read. A key verified lately is
        # not looked up again; store_spans checks it is still active where it writes.
        caller = keys.verify(key, session=session)
        require_push(caller.key)
        spans = decode_export(body, content_type=content_type, content_encoding=content_encoding,
                              max_bytes=settings.api_max_body_bytes)
        # Each trace becomes one record once assembled: the export counts against the key's backlog.
        backlogs.check(caller.key.key_id, len({s.trace_id for s in spans}), cap=settings.api_max_queued_per_key,
                       key_prefix=caller.key.prefix, session=session)
        try:
            return store_spans(spans, app=caller.key.app, api_key_id=caller.key.key_id, key_hash=caller.key_hash,
                               judges=judges, session=session)
        except NotAuthenticatedError:  # revoked since it was verified
            keys.forget(caller.key_hash)
            raise


def refuse_export(code: int, message: str, scope: Scope) -> Response:
    """api/gate.py's refusal of an export, in the encoding the exporter sent."""
    content_type = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1")
    return _status(code, message, as_json=content_type.split(";")[0].strip().lower() == JSON)


def _refusals(stored: StoredExport) -> str:
    shown = "; ".join(r.reason for r in stored.refused[:_SHOWN_REFUSALS])
    more = len(stored.refused) - _SHOWN_REFUSALS
    return f"{len(stored.refused)} trace(s) refused, nothing of them stored: {shown}" + (f"; and {more} more" if more > 0 else "")


def _status(code: int, message: str, *, as_json: bool, headers: dict[str, str] | None = None) -> Response:
    return _message(code, status_pb2.Status(code=_GRPC_CODES.get(code, code_pb2.UNKNOWN), message=message),
                    as_json=as_json, headers=headers)


def _message(code: int, message: Message, *, as_json: bool, headers: dict[str, Any] | None = None) -> Response:
    if as_json:
        return Response(json_format.MessageToJson(message, indent=None), status_code=code, media_type=JSON,
                        headers=headers)
    return Response(message.SerializeToString(), status_code=code, media_type="application/x-protobuf", headers=headers)
