"""OTLP/HTTP trace exports into plain spans: protobuf or JSON bodies, gzip or not, decoded by
opentelemetry-proto (the OTLP/JSON quirks, hex ids, handled before its parser sees them).

Nothing here touches the store: a body either decodes whole into `Span`s or raises an
InputError (PayloadTooLargeError past the size limit) saying what is wrong with it.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from services.errors import InputError, PayloadTooLargeError

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_ZERO_TRACE = "0" * 32


@dataclass(frozen=True)
class SpanEvent:
    name: str
    attributes: Mapping[str, Any]


@dataclass(frozen=True)
class Span:
    """One span as the assembly reads it: ids as lowercase hex, attribute values as Python values."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    service_name: str | None
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    events: tuple[SpanEvent, ...] = field(default=())


def media_type(content_type: str | None) -> str:
    """The body's encoding from its Content-Type; InputError for anything but OTLP's two."""
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind in (PROTOBUF, "application/protobuf"):
        return PROTOBUF
    if kind == JSON:
        return JSON
    raise InputError(f"Content-Type {content_type or '(none)'!r} is not an OTLP encoding: send {PROTOBUF} or {JSON}")


def decode_export(body: bytes, *, content_type: str | None, content_encoding: str | None, max_bytes: int) -> list[Span]:
    """The spans of one ExportTraceServiceRequest body."""
    kind = media_type(content_type)
    raw = _decompress(body, content_encoding, max_bytes)
    request = ExportTraceServiceRequest()
    if kind == PROTOBUF:
        try:
            request.ParseFromString(raw)
        except DecodeError as exc:
            raise InputError(f"the body is not a valid OTLP protobuf ExportTraceServiceRequest ({exc}); "
                             "was it cut short, or sent with the wrong Content-Type?") from exc
    else:
        _parse_json(raw, request)
    return _spans(request)


def _decompress(body: bytes, encoding: str | None, max_bytes: int) -> bytes:
    coding = (encoding or "identity").strip().lower()
    if coding == "identity":
        return body
    if coding != "gzip":
        raise InputError(f"Content-Encoding {encoding!r} is not supported: send gzip or no encoding")
    inflater = zlib.decompressobj(wbits=31)
    try:
        raw = inflater.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise InputError(f"the body is not valid gzip ({exc})") from exc
    if len(raw) > max_bytes:
        raise PayloadTooLargeError(f"the body decompresses to over the {max_bytes:,}-byte limit (API_MAX_BODY_BYTES); "
                                   "export smaller batches (OTEL_BSP_MAX_EXPORT_BATCH_SIZE) or smaller spans")
    if not inflater.eof:
        raise InputError("the gzip body ends before its end marker: it was cut short")
    return raw


def _parse_json(raw: bytes, request: ExportTraceServiceRequest) -> None:
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"the body is not valid JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise InputError("the body must be a JSON object with resourceSpans (an OTLP ExportTraceServiceRequest)")
    _hex_ids_to_base64(document)
    try:
        # Receivers must ignore fields they do not know (the OTLP spec), so a newer exporter's
        # additions are not errors; wrong types are.
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise InputError(f"the JSON body is not an OTLP ExportTraceServiceRequest: {exc}") from exc


_ID_FIELDS = {"traceId": 16, "spanId": 8, "parentSpanId": 8, "trace_id": 16, "span_id": 8, "parent_span_id": 8}


def _hex_ids_to_base64(document: dict[str, Any]) -> None:
    """OTLP/JSON writes trace and span ids as hex; protobuf's JSON mapping reads bytes as base64."""
    for resource in _list(document, "resourceSpans", "resource_spans"):
        for scope in _list(resource, "scopeSpans", "scope_spans"):
            for span in _list(scope, "spans"):
                for item in [span, *_list(span, "links")]:
                    if not isinstance(item, dict):
                        continue
                    for name, size in _ID_FIELDS.items():
                        value = item.get(name)
                        if isinstance(value, str) and value:
                            item[name] = _hex_id(value, name, size)


def _list(parent: Any, *names: str) -> list[Any]:
    if not isinstance(parent, dict):
        return []
    for name in names:
        if isinstance(parent.get(name), list):
            return parent[name]  # type: ignore[no-any-return]
    return []


def _hex_id(value: str, name: str, size: int) -> str:
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        raw = b""
    if len(raw) != size:
        raise InputError(f"{name} {value[:80]!r} is not {size * 2} hex digits (OTLP/JSON writes ids as hex)")
    return base64.b64encode(raw).decode()


def _spans(request: ExportTraceServiceRequest) -> list[Span]:
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        service = resource.get("service.name")
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
                if len(span.trace_id) != 16 or trace_id == _ZERO_TRACE:
                    raise InputError(f"span {span.name!r} has no valid trace id (16 bytes, not all zero)")
                if len(span.span_id) != 8:
                    raise InputError(f"span {span.name!r} of trace {trace_id} has no valid span id (8 bytes)")
                if span.parent_span_id and len(span.parent_span_id) != 8:
                    raise InputError(f"span {span.name!r} of trace {trace_id} has a parent span id that is not 8 bytes")
                spans.append(Span(
                    trace_id=trace_id, span_id=span_id, parent_span_id=span.parent_span_id.hex() or None,
                    name=span.name, service_name=service if isinstance(service, str) else None,
                    start_ns=span.start_time_unix_nano, end_ns=span.end_time_unix_nano,
                    attributes=_attributes(span.attributes),
                    events=tuple(SpanEvent(e.name, _attributes(e.attributes)) for e in span.events)))
    return spans


def _attributes(pairs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        assert isinstance(pair, KeyValue)
        out[pair.key] = _value(pair.value)
    return out


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return binascii.hexlify(value.bytes_value).decode()
    return getattr(value, kind)
