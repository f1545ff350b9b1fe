"""Real OTLP export bodies for tests: spans made with the OpenTelemetry SDK, encoded by the
exporters' own encoder (protobuf), or written as OTLP/JSON (hex ids) from the same message."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

QUESTION = "How do I clear alarm SRVO-062?"
ANSWER = "Replace the pulsecoder battery, then remaster the axis."
DOCS = ["SRVO-062 BZAL alarm: the pulsecoder battery is low.", "Remaster the axis after replacing the battery."]


def rag_trace(*, documents: Sequence[str] = DOCS, service: str = "support-bot", answer: str = ANSWER) -> list[ReadableSpan]:
    """root CHAIN (question, answer) > RETRIEVER (documents with scores) + LLM, as OpenInference writes them."""
    seen = InMemorySpanExporter()
    # The SDK keeps 128 attributes a span by default; a retriever of 1,000 documents needs more.
    provider = TracerProvider(resource=Resource.create({"service.name": service}),
                              span_limits=SpanLimits(max_span_attributes=4 * len(documents) + 16))
    provider.add_span_processor(SimpleSpanProcessor(seen))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("chain") as root:
        root.set_attributes({"openinference.span.kind": "CHAIN", "input.value": QUESTION, "output.value": answer})
        with tracer.start_as_current_span("retrieve") as retriever:
            retriever.set_attribute("openinference.span.kind", "RETRIEVER")
            for i, doc in enumerate(documents):
                retriever.set_attributes({f"retrieval.documents.{i}.document.content": doc,
                                          f"retrieval.documents.{i}.document.id": f"doc-{i}",
                                          f"retrieval.documents.{i}.document.score": 1.0 - i / (len(documents) + 1)})
        with tracer.start_as_current_span("llm") as llm:
            llm.set_attributes({"openinference.span.kind": "LLM", "llm.model_name": "gpt-x",
                                "llm.token_count.prompt": 50, "llm.token_count.completion": 9,
                                "llm.input_messages.0.message.role": "user", "llm.input_messages.0.message.content": QUESTION,
                                "llm.output_messages.0.message.role": "assistant",
                                "llm.output_messages.0.message.content": answer})
    provider.shutdown()
    return list(seen.get_finished_spans())


def trace_id_of(spans: Sequence[ReadableSpan]) -> str:
    return format(spans[0].context.trace_id, "032x")


def protobuf_body(spans: Sequence[ReadableSpan]) -> bytes:
    return bytes(encode_spans(spans).SerializeToString())


def json_document(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """OTLP/JSON: protobuf's JSON mapping with trace and span ids in hex, as the spec writes them."""
    document = json_format.MessageToDict(encode_spans(spans))
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return document


def json_body(spans: Sequence[ReadableSpan]) -> bytes:
    return json.dumps(json_document(spans)).encode()
