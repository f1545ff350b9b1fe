"""Spans into runs on the real store: exports kept per trace, a trace assembled once whatever
the order and repetition of its exports, refused traces keeping nothing, and what a trace
says in OpenInference and gen_ai.* attributes read into a record."""

from __future__ import annotations

from dataclasses import astuple

import pytest
from sqlalchemy import text

from services.intake.otlp import Span, decode_export
from services.intake.span_facts import SpanRefusedError, span_facts
from services.intake.trace_runs import TraceSpan, assemble_trace
from services.intake.trace_status import dropped_traces, trace_counts
from services.intake.traces import assemble_ready_traces, store_spans
from services.store import transaction
from tests._otlp import ANSWER, DOCS, QUESTION, protobuf_body, rag_trace, trace_id_of


def decoded(spans) -> list[Span]:  # type: ignore[no-untyped-def]
    return decode_export(protobuf_body(spans), content_type="application/x-protobuf", content_encoding=None,
                         max_bytes=10_000_000)


def store(spans, settings):  # type: ignore[no-untyped-def]
    with transaction(settings) as session:
        return store_spans(decoded(spans), session=session)


def assemble(settings, *, settle: float = 0, quiet: float = 60) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(assembled, dropped)"""
    with transaction(settings) as session:
        return astuple(assemble_ready_traces(settle_seconds=settle, quiet_seconds=quiet, session=session))


def rows(sql: str, settings) -> list[tuple]:  # type: ignore[no-untyped-def,type-arg]
    with transaction(settings) as session:
        return [tuple(r) for r in session.execute(text(sql))]


def test_a_trace_split_over_three_exports_out_of_order_and_sent_twice_yields_one_run(clean_db, settings):  # type: ignore[no-untyped-def]
    root, retriever, llm = sorted(rag_trace(), key=lambda s: s.parent is not None)  # the root first: out of order
    trace_id = trace_id_of([root])
    exports = [[root], [llm], [retriever]]
    assert store(exports[0], settings).accepted == 1
    assert assemble(settings, settle=30) == (0, 0)  # the root is in, but more may follow: not settled
    for export in exports[1:]:
        assert store(export, settings).accepted == 1
    assert assemble(settings, settle=30) == (0, 0)
    assert assemble(settings) == (1, 0)

    for export in exports:  # the exporter retries everything
        again = store(export, settings)
        assert (again.accepted, again.duplicates, again.late) == (0, 1, 0)
    assert (assemble(settings)) == (0, 0)
    intake = rows("SELECT trace_id, source, payload FROM run_intake", settings)
    assert [(t, s) for t, s, _ in intake] == [(trace_id, "otlp")]
    payload = intake[0][2]
    assert (payload["question"], payload["answer"]) == (QUESTION, ANSWER)
    assert [(c["text"], c["document_id"], c["rank"]) for c in payload["contexts"]] == [
        (DOCS[0], "doc-0", 1), (DOCS[1], "doc-1", 2)]
    assert payload["metadata"]["model"] == "gpt-x" and payload["metadata"]["app"] == "support-bot"
    assert payload["metadata"]["extra"]["prompt_tokens"] == 50

    # a span never seen before, after its trace became a run: counted late, not a second run
    late = rag_trace()
    late_span = [s for s in late if s.name == "llm"][0]
    late_span._context = late_span.context.__class__(root.context.trace_id, late_span.context.span_id, False)  # type: ignore[attr-defined]
    assert store([late_span], settings).late == 1
    again = store([late_span], settings)  # and sent again: a repeat, not a second late span
    assert (again.accepted, again.duplicates, again.late) == (0, 1, 0)
    assert rows("SELECT state, spans, late_spans, cardinality(span_ids) FROM otlp_traces", settings) == [
        ("assembled", 3, 1, 4)]
    with transaction(settings) as session:
        assert trace_counts(session=session).late_spans == 1
    assert rows("SELECT count(*) FROM otlp_spans", settings) == [(0,)]  # no span rows once the trace is closed


def test_a_rootless_trace_is_assembled_after_the_quiet_period(clean_db, settings):  # type: ignore[no-untyped-def]
    children = [s for s in rag_trace() if s.parent is not None]
    store(children, settings)
    assert (assemble(settings, quiet=60)) == (0, 0)
    assert (assemble(settings, quiet=0)) == (1, 0)
    [(payload,)] = rows("SELECT payload FROM run_intake", settings)
    # no chain span: the LLM's last user message and completion, the retriever's documents
    assert (payload["question"], payload["answer"], len(payload["contexts"])) == (QUESTION, ANSWER, 2)


def test_a_trace_with_too_many_documents_is_refused_whole_and_never_assembled(clean_db, settings):  # type: ignore[no-untyped-def]
    spans = rag_trace(documents=[f"passage {i}" for i in range(1_000)])
    llm = [s for s in spans if s.name == "llm"]
    assert store(llm, settings).accepted == 1  # an earlier export of the same trace
    refused = store(spans, settings)
    assert refused.accepted == 0 and refused.rejected_spans == 3
    assert "carries 1,000 documents; a run holds at most 200 contexts" in refused.refused[0].reason
    assert (assemble(settings, quiet=0)) == (0, 0)
    assert rows("SELECT count(*) FROM otlp_spans WHERE facts IS NOT NULL", settings) == [(0,)]
    assert rows("SELECT count(*) FROM run_intake", settings) == [(0,)]
    with transaction(settings) as session:
        counts = trace_counts(session=session)
        [shown] = dropped_traces(session=session)
    assert (counts.refused, counts.assembled) == (1, 0) and shown.state == "refused" and "1,000" in shown.reason
    assert shown.spans == 1 and rows("SELECT count(*) FROM otlp_spans", settings) == [(0,)]  # the span kept before: counted, gone


def test_a_trace_with_no_question_is_dropped_with_the_reason(clean_db, settings):  # type: ignore[no-untyped-def]
    spans = [s for s in rag_trace() if s.name == "retrieve"]
    store(spans, settings)
    assert (assemble(settings, quiet=0)) == (0, 1)
    with transaction(settings) as session:
        [dropped] = dropped_traces(session=session)
        assert trace_counts(session=session).dropped == 1
    assert dropped.reason.startswith("not a RAG trace: no question or answer found in its 1 spans")
    assert dropped.spans == 1 and rows("SELECT count(*) FROM otlp_spans", settings) == [(0,)]


def _span(attributes: dict, name: str = "s", parent: str | None = None, span_id: str = "a" * 16) -> Span:  # type: ignore[type-arg]
    return Span("1" * 32, span_id, parent, name, "svc", 1, 2, attributes)


def test_span_facts_read_openinference_and_gen_ai_attributes() -> None:
    chain = span_facts(_span({"openinference.span.kind": "CHAIN", "input.value": '{"query": "Q?", "chat_history": []}',
                              "input.mime_type": "application/json", "output.value": '{"result": "A."}'}))
    assert (chain["kind"], chain["input"], chain["output"]) == ("chain", "Q?", "A.")
    langchain_llm = span_facts(_span({"openinference.span.kind": "LLM", "llm.prompts": ["Context...\nQuestion: Q?"],
                                      "output.value": '{"generations": [[{"text": "A.", "type": "Generation"}]]}'}))
    assert (langchain_llm["user_message"], langchain_llm["completion"]) == ("Context...\nQuestion: Q?", "A.")
    legacy = span_facts(_span({"gen_ai.operation.name": "chat", "gen_ai.prompt.0.role": "system",
                               "gen_ai.prompt.0.content": "Be brief.", "gen_ai.prompt.1.role": "user",
                               "gen_ai.prompt.1.content": "Q?", "gen_ai.completion.0.content": "A.",
                               "gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 3}))
    assert (legacy["kind"], legacy["user_message"], legacy["completion"], legacy["model"], legacy["prompt_tokens"]) == (
        "llm", "Q?", "A.", "m", 3)
    reranker = span_facts(_span({"openinference.span.kind": "RERANKER",
                                 "reranker.output_documents.0.document.content": "kept",
                                 "reranker.output_documents.0.document.score": 7.5,
                                 "reranker.input_documents.0.document.content": "not read"}))
    assert reranker["documents"] == [{"text": "kept", "score": 7.5}]
    with pytest.raises(SpanRefusedError, match="at most 20,000"):
        span_facts(_span({"openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.content": "x" * 20_001}))


def test_a_reranker_s_documents_win_over_the_retriever_s() -> None:
    root = TraceSpan("r" * 16, None, span_facts(_span({"openinference.span.kind": "CHAIN", "input.value": "Q?",
                                                       "output.value": "A."}, "chain", None, "r" * 16)))
    retriever = TraceSpan("b" * 16, "r" * 16, span_facts(_span({
        "openinference.span.kind": "RETRIEVER", "retrieval.documents.0.document.content": "one",
        "retrieval.documents.1.document.content": "two"}, "retrieve")))
    reranker = TraceSpan("c" * 16, "r" * 16, span_facts(_span({
        "openinference.span.kind": "RERANKER", "reranker.output_documents.0.document.content": "two",
        "reranker.output_documents.0.document.score": 0.9}, "rerank")))
    record = assemble_trace("1" * 32, [root, retriever, reranker], service_name="svc").record
    assert record is not None
    assert [(c.text, c.score, c.rank) for c in record.contexts] == [("two", 0.9, 1)]
    assert record.metadata.extra["otlp"]["contexts"] == "contexts from reranker span 'rerank'"


def test_assemble_traces_takes_every_ready_trace_a_batch_at_a_time(clean_db, settings):  # type: ignore[no-untyped-def]
    from services.intake.traces import assemble_traces

    for _ in range(3):
        store(rag_trace(), settings)
    store([s for s in rag_trace() if s.name == "retrieve"], settings)  # rootless: waits for the quiet period
    now = settings.model_copy(update={"otlp_settle_seconds": 0, "otlp_quiet_seconds": 60})
    assert astuple(assemble_traces(settings=now, batch=2)) == (3, 0)
    assert astuple(assemble_traces(settings=now.model_copy(update={"otlp_quiet_seconds": 0}), batch=2)) == (0, 1)
    assert rows("SELECT count(*) FROM run_intake WHERE source = 'otlp'", settings) == [(3,)]


def test_concurrent_exports_sharing_traces_in_different_orders_all_land(clean_db, settings):  # type: ignore[no-untyped-def]
    import random
    from concurrent.futures import ThreadPoolExecutor

    traces = [decoded(rag_trace()) for _ in range(20)]
    by_span = [span for trace in traces for span in trace]

    def export(seed: int) -> int:
        shuffled = random.Random(seed).sample(by_span, len(by_span))  # every export: all traces, its own order
        with transaction(settings) as session:
            return store_spans(shuffled, session=session).accepted

    with ThreadPoolExecutor(max_workers=6) as pool:
        accepted = sum(pool.map(export, range(24)))
    assert accepted == len(by_span)  # each span kept once, none lost to a deadlock
    assert rows("SELECT count(DISTINCT trace_id), count(*) FROM otlp_spans", settings) == [(20, 60)]
    assert rows("SELECT count(*) FROM otlp_traces", settings) == [(20,)]


def test_workbench_intake_process_assembles_ready_traces_before_it_assesses(clean_db, settings, monkeypatch):  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from services.cli import app
    from services.settings import get_settings

    store(rag_trace(), settings)
    store([s for s in rag_trace() if s.name == "retrieve"], settings)  # not RAG
    monkeypatch.setenv("OTLP_SETTLE_SECONDS", "0")
    monkeypatch.setenv("OTLP_QUIET_SECONDS", "0")
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(app, ["intake", "process", "--limit", "1", "--json"])
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    assert "traces: 1 became queued runs, 1 dropped" in result.stderr
    assert rows("SELECT source, status FROM run_intake", settings) == [("otlp", "assessed")]


def test_span_rows_last_only_while_their_trace_is_open(clean_db, settings):  # type: ignore[no-untyped-def]
    whole = [rag_trace() for _ in range(5)]
    for spans in whole:
        store(spans, settings)
    rootless = [s for s in rag_trace() if s.name == "retrieve"]  # open until the quiet period
    store(rootless, settings)
    assert rows("SELECT count(*) FROM otlp_spans", settings) == [(16,)]
    assert assemble(settings, quiet=60) == (5, 0)
    # the assembled traces' rows went in the assembly's transaction; the open trace keeps its span
    assert rows("SELECT trace_id FROM otlp_spans", settings) == [(trace_id_of(rootless),)]
    assert sorted(rows("SELECT state, spans, cardinality(span_ids) FROM otlp_traces", settings)) == (
        [("assembled", 3, 3)] * 5 + [("open", 0, 0)])
    again = store(whole[0], settings)  # a whole trace sent again after it became a run: known, all repeats
    assert (again.accepted, again.duplicates, again.late) == (0, 3, 0)
    assert rows("SELECT count(*) FROM otlp_spans", settings) == [(1,)]
