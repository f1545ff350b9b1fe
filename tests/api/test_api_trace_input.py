"""POST /v1/traces on a real server, without its worker: both OTLP encodings and gzip accepted,
and bad input (a truncated protobuf, JSON of the wrong types, a 10 MB span, 1,000 retriever
documents, no key) answered with the OTLP error status and a message, nothing stored."""

from __future__ import annotations

import gzip
import json

import httpx
from google.protobuf import json_format
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from sqlalchemy import text

from services.store import transaction
from tests._otlp import json_body, json_document, protobuf_body, rag_trace, trace_id_of
from tests.api._server import real_server

PROTOBUF = {"Content-Type": "application/x-protobuf"}
JSON = {"Content-Type": "application/json"}


base_url, client = real_server(key_name="collector")  # the default 4 MB body limit


def stored(settings) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(spans kept for assembly, traces seen)"""
    with transaction(settings) as session:
        return (int(session.execute(text("SELECT count(*) FROM otlp_spans WHERE facts IS NOT NULL")).scalar_one()),
                int(session.execute(text("SELECT count(*) FROM otlp_traces")).scalar_one()))


def status_of(response: httpx.Response) -> status_pb2.Status:
    status = status_pb2.Status()
    if response.headers["content-type"].startswith("application/json"):
        json_format.Parse(response.text, status)
    else:
        status.ParseFromString(response.content)
    return status


def test_protobuf_gzip_and_json_exports_are_stored_and_answered_in_their_own_encoding(client, settings):  # type: ignore[no-untyped-def]
    first, second, third = rag_trace(), rag_trace(), rag_trace()
    plain = client.post("/v1/traces", content=protobuf_body(first), headers=PROTOBUF)
    assert plain.status_code == 200 and plain.headers["content-type"] == "application/x-protobuf"
    answer = ExportTraceServiceResponse()
    answer.ParseFromString(plain.content)
    assert not answer.HasField("partial_success")
    zipped = client.post("/v1/traces", content=gzip.compress(protobuf_body(second)),
                         headers={**PROTOBUF, "Content-Encoding": "gzip"})
    assert zipped.status_code == 200
    as_json = client.post("/v1/traces", content=json_body(third), headers=JSON)
    assert as_json.status_code == 200 and as_json.headers["content-type"] == "application/json"
    assert json.loads(as_json.text) == {}
    assert stored(settings) == (9, 3)
    with transaction(settings) as session:
        ids = {r[0] for r in session.execute(text("SELECT trace_id FROM otlp_traces"))}
    assert ids == {trace_id_of(t) for t in (first, second, third)}


def test_a_truncated_protobuf_is_400_with_a_status_message_and_stores_nothing(client, settings):  # type: ignore[no-untyped-def]
    body = protobuf_body(rag_trace())
    response = client.post("/v1/traces", content=body[: len(body) // 2], headers=PROTOBUF)
    assert response.status_code == 400
    status = status_of(response)
    assert status.code == code_pb2.INVALID_ARGUMENT and "not a valid OTLP protobuf" in status.message
    cut_gzip = client.post("/v1/traces", content=gzip.compress(body)[:-20], headers={**PROTOBUF, "Content-Encoding": "gzip"})
    assert cut_gzip.status_code == 400 and "cut short" in status_of(cut_gzip).message
    assert stored(settings) == (0, 0)


def test_json_of_the_wrong_types_is_400_naming_the_field(client, settings):  # type: ignore[no-untyped-def]
    document = json_document(rag_trace())
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"] = 17
    response = client.post("/v1/traces", content=json.dumps(document), headers=JSON)
    assert response.status_code == 400 and response.headers["content-type"] == "application/json"
    message = status_of(response).message
    assert "Failed to parse name field" in message and "got 'int'" in message
    bad_id = json_document(rag_trace())
    bad_id["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = "not-hex"
    assert "traceId 'not-hex' is not 32 hex digits" in status_of(client.post("/v1/traces", json=bad_id)).message
    assert client.post("/v1/traces", content=b"[1, 2]", headers=JSON).status_code == 400
    assert stored(settings) == (0, 0)


def test_a_10_mb_span_is_413_sent_plain_or_gzipped(client, settings):  # type: ignore[no-untyped-def]
    body = protobuf_body(rag_trace(answer="x" * 10_000_000))
    plain = client.post("/v1/traces", content=body, headers=PROTOBUF)
    assert plain.status_code == 413
    assert status_of(plain).code == code_pb2.RESOURCE_EXHAUSTED and "4,000,000-byte limit" in status_of(plain).message
    zipped = client.post("/v1/traces", content=gzip.compress(body), headers={**PROTOBUF, "Content-Encoding": "gzip"})
    assert zipped.status_code == 413 and "decompresses to over the 4,000,000-byte limit" in status_of(zipped).message
    assert stored(settings) == (0, 0)


def test_a_trace_of_1000_retriever_documents_is_refused_and_others_in_the_export_kept(client, settings):  # type: ignore[no-untyped-def]
    huge = rag_trace(documents=[f"passage {i} about the pulsecoder" for i in range(1_000)])
    alone = client.post("/v1/traces", content=protobuf_body(huge), headers=PROTOBUF)
    assert alone.status_code == 400
    assert "carries 1,000 documents; a run holds at most 200 contexts" in status_of(alone).message
    assert stored(settings) == (0, 1)  # the trace id is remembered as refused, none of its spans kept

    fine = rag_trace()
    mixed = client.post("/v1/traces", content=json_body([*fine, *huge]), headers=JSON)
    assert mixed.status_code == 200  # OTLP's partial success: the good trace is kept
    partial = json.loads(mixed.text)["partialSuccess"]
    assert partial["rejectedSpans"] == "3" and "1 trace(s) refused" in partial["errorMessage"]
    assert stored(settings) == (3, 2)


def test_a_missing_key_or_a_wrong_content_type_stores_nothing(client, base_url, settings):  # type: ignore[no-untyped-def]
    body = protobuf_body(rag_trace())
    anonymous = httpx.post(f"{base_url}/v1/traces", content=body, headers=PROTOBUF)
    assert anonymous.status_code == 401 and "send an API key" in status_of(anonymous).message
    assert anonymous.headers["www-authenticate"] == "Bearer"
    wrong = client.post("/v1/traces", content=body, headers={"Content-Type": "text/plain"})
    assert wrong.status_code == 415 and "application/x-protobuf" in status_of(wrong).message
    assert stored(settings) == (0, 0)


def test_the_receiver_is_documented_with_both_encodings(client):  # type: ignore[no-untyped-def]
    post = client.get("/openapi.json").json()["paths"]["/v1/traces"]["post"]
    assert set(post["requestBody"]["content"]) == {"application/x-protobuf", "application/json"}
    assert "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" in post["description"]
