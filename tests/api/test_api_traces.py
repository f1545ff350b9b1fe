"""POST /v1/traces through a real uvicorn server with its worker, fed by real clients: a LangChain
retrieval chain instrumented by openinference-instrumentation-langchain and a GenAI-convention
app on the OpenTelemetry SDK, both exporting with the stock OTLP/HTTP exporter."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake import FakeListLLM
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import PromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import text

from api.app import create_app
from services.answering.runs import load_run
from services.domain import RunStatus
from services.intake.api_keys import create_api_key
from services.review.queue import QueueFilters, review_queue
from services.store import transaction
from tests.api._server import serving

pytestmark = pytest.mark.slow
ASSESSMENT_TIMEOUT_S = 180  # the first run waits for the embedding model to load
PASSAGES = [
    ("srvo-062", "SRVO-062 BZAL alarm: the pulsecoder backup battery is low. Replace it with the controller on."),
    ("mastering", "After replacing the pulsecoder battery, remaster the axis to restore its position."),
    ("grease", "Grease the J2 reducer every 20,000 hours of operation."),
]
QUESTION = "How do I clear alarm SRVO-062?"
ANSWER = "Replace the pulsecoder backup battery with the controller on, then remaster the axis."


@pytest.fixture(scope="module")
def base_url(engine, settings) -> Iterator[str]:  # type: ignore[no-untyped-def]
    # The default settle time: exports of one trace sent out of order under load still land within it.
    api_settings = settings.model_copy(update={"otlp_settle_seconds": 2.0, "otlp_quiet_seconds": 30})
    with serving(create_app(api_settings)) as url:
        yield url


@pytest.fixture()
def key(clean_db, settings) -> str:  # type: ignore[no-untyped-def]
    with transaction(settings) as session:
        return create_api_key(name="otel-collector", session=session).key


class RecordingExporter(SpanExporter):
    """The stock OTLP/HTTP exporter, remembering what each export returned."""

    def __init__(self, exporter: OTLPSpanExporter) -> None:
        self.exporter, self.results = exporter, []  # type: list[SpanExportResult]

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.exporter.export(spans)
        self.results.append(result)
        return result

    def shutdown(self) -> None:
        self.exporter.shutdown()


def provider_for(base_url: str, key: str, service: str, **exporter_options: Any
                 ) -> tuple[TracerProvider, RecordingExporter, InMemorySpanExporter]:
    otlp = RecordingExporter(OTLPSpanExporter(endpoint=f"{base_url}/v1/traces",
                                              headers={"Authorization": f"Bearer {key}"}, **exporter_options))
    seen = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(otlp))
    provider.add_span_processor(SimpleSpanProcessor(seen))
    return provider, otlp, seen


def wait_for_run(base_url: str, key: str, trace_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + ASSESSMENT_TIMEOUT_S
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as client:
        while True:
            found = client.get(f"/runs/by-trace-id/{trace_id}")
            if found.status_code == 200 and found.json()["status"] != "queued":
                return found.json()  # type: ignore[no-any-return]
            assert found.status_code in (200, 404), found.text
            assert time.monotonic() < deadline, f"trace {trace_id} never became an assessed run"
            time.sleep(0.2)


class ScoredRetriever(BaseRetriever):
    """LangChain's in-memory vector store, its scores kept in each document's metadata."""

    store: InMemoryVectorStore
    k: int = 2

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [Document(page_content=d.page_content, metadata={**d.metadata, "score": score})
                for d, score in self.store.similarity_search_with_score(query, k=self.k)]


def test_a_langchain_retrieval_chain_lands_in_the_review_queue_with_its_passages_and_scores(base_url, key):  # type: ignore[no-untyped-def]
    provider, otlp, seen = provider_for(base_url, key, "support-bot", compression=Compression.Gzip)
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        store = InMemoryVectorStore(DeterministicFakeEmbedding(size=64))
        store.add_documents([Document(page_content=t, metadata={"document_id": i, "source": f"manuals/{i}.md"})
                             for i, t in PASSAGES])
        retriever = ScoredRetriever(store=store, k=2)
        prompt = PromptTemplate.from_template("Context:\n{context}\n\nQuestion: {question}\nAnswer:")
        chain = ({"context": retriever | (lambda docs: "\n".join(d.page_content for d in docs)),
                  "question": RunnablePassthrough()} | prompt | FakeListLLM(responses=[ANSWER]) | StrOutputParser())
        assert chain.invoke(QUESTION) == ANSWER
        retrieved = retriever.invoke(QUESTION)  # what the chain's retriever returned, with the scores
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    assert otlp.results and all(r is SpanExportResult.SUCCESS for r in otlp.results)
    roots = [s for s in seen.get_finished_spans() if s.parent is None and s.name == "RunnableSequence"]
    trace_id = format(roots[0].context.trace_id, "032x")

    status = wait_for_run(base_url, key, trace_id)
    assert status["status"] == "assessed" and status["source"] == "otlp", status["error"]
    run = load_run(status["run_id"])
    assert (run.source, run.query, run.final_answer, run.trace_id) == ("otlp", QUESTION, ANSWER, trace_id)
    hits = run.iterations[0].retrieval.hits
    assert [(h.text, h.external_id, h.fused_score) for h in hits] == [
        (d.page_content, d.metadata["document_id"], pytest.approx(d.metadata["score"])) for d in retrieved]
    assert run.external["app"] == "support-bot" and "retriever span 'ScoredRetriever'" in run.external["extra"]["otlp"]["contexts"]
    queued = review_queue(QueueFilters(statuses=(RunStatus.PENDING, RunStatus.AUTO_ACCEPTED)))
    assert run.run_id in [item.run_id for item in queued]


def test_genai_convention_spans_from_the_sdk_become_a_run_and_a_trace_without_retriever_says_no_contexts(base_url, key):  # type: ignore[no-untyped-def]
    provider, otlp, seen = provider_for(base_url, key, "genai-app")
    tracer = provider.get_tracer("genai-app")
    documents = json.dumps([{"id": "srvo-062", "score": 0.91, "content": PASSAGES[0][1]},
                            {"id": "mastering", "score": 0.42, "content": PASSAGES[1][1]}])

    def messages(*pairs: tuple[str, str]) -> str:
        return json.dumps([{"role": role, "parts": [{"type": "text", "content": content}]} for role, content in pairs])

    with tracer.start_as_current_span("invoke_agent support") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        with tracer.start_as_current_span("retrieval manuals") as retrieval:
            retrieval.set_attributes({"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.query.text": QUESTION,
                                      "gen_ai.retrieval.documents": documents})
        with tracer.start_as_current_span("chat gpt-x") as chat:
            chat.set_attributes({
                "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-x", "gen_ai.response.model": "gpt-x-0613",
                "gen_ai.usage.input_tokens": 120, "gen_ai.usage.output_tokens": 18,
                "gen_ai.input.messages": messages(("system", "Answer from the manuals."), ("user", QUESTION)),
                "gen_ai.output.messages": messages(("assistant", ANSWER))})
    with tracer.start_as_current_span("chat gpt-x") as bare:  # an LLM call and nothing retrieved
        bare.set_attributes({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-x",
                             "gen_ai.input.messages": messages(("user", "Hello?")),
                             "gen_ai.output.messages": messages(("assistant", "Hi."))})
    with tracer.start_as_current_span("GET /health"):  # not RAG: counted and dropped with the reason
        pass
    provider.shutdown()
    assert otlp.results and all(r is SpanExportResult.SUCCESS for r in otlp.results)
    trace_ids = {s.name: format(s.context.trace_id, "032x") for s in seen.get_finished_spans() if s.parent is None}
    rag, bare_id = trace_ids["invoke_agent support"], format(bare.get_span_context().trace_id, "032x")

    run = load_run(wait_for_run(base_url, key, rag)["run_id"])
    assert (run.query, run.final_answer, run.source) == (QUESTION, ANSWER, "otlp")
    assert [(h.external_id, h.fused_score) for h in run.iterations[0].retrieval.hits] == [("srvo-062", 0.91), ("mastering", 0.42)]
    assert run.external["model"] == "gpt-x-0613" and run.external["app"] == "genai-app"
    assert (run.external["extra"]["prompt_tokens"], run.external["extra"]["completion_tokens"]) == (120, 18)

    lone = load_run(wait_for_run(base_url, key, bare_id)["run_id"])
    assert (lone.query, lone.final_answer, lone.iterations[0].retrieval.hits) == ("Hello?", "Hi.", ())
    assert lone.external["extra"]["otlp"]["contexts"] == "no contexts: the trace has no retriever span"
    assert "no contexts" in lone.outcome_note
    with transaction() as session:
        dropped = session.execute(text("SELECT state, reason FROM otlp_traces WHERE trace_id = :t"),
                                  {"t": trace_ids["GET /health"]}).one()
    assert dropped.state == "dropped" and dropped.reason.startswith("not a RAG trace: no question or answer found in its 1 spans")


def test_a_trace_split_over_three_exports_sent_twice_by_the_stock_exporter_is_one_run(base_url, key):  # type: ignore[no-untyped-def]
    from tests._otlp import rag_trace, trace_id_of

    spans = rag_trace()
    trace_id = trace_id_of(spans)
    exporter = OTLPSpanExporter(endpoint=f"{base_url}/v1/traces", headers={"Authorization": f"Bearer {key}"})
    for _ in range(2):
        for span in sorted(spans, key=lambda s: s.parent is not None):  # the root first: out of order
            assert exporter.export([span]) is SpanExportResult.SUCCESS
    status = wait_for_run(base_url, key, trace_id)
    assert status["status"] == "assessed", status["error"]
    time.sleep(1.0)  # give a second assembly the chance to happen, if it wrongly would
    with transaction() as session:
        counts = session.execute(text(
            "SELECT (SELECT count(*) FROM run_intake WHERE trace_id = :t), (SELECT count(*) FROM runs WHERE trace_id = :t), "
            "(SELECT spans FROM otlp_traces WHERE trace_id = :t), (SELECT count(*) FROM otlp_spans WHERE trace_id = :t)"),
            {"t": trace_id}).one()
    assert tuple(counts) == (1, 1, 3, 0)  # three spans counted on the trace; their rows gone once it was assembled
    assert len(load_run(status["run_id"]).iterations[0].retrieval.hits) == 2  # the retriever span, sent last, is in
