"""One trace's spans (their facts, span_facts.py) into one record, or the reason there is none.

The question and the answer come from the root span, else the outermost chain span with
both; failing that, a retriever's query or the LLM span's last user message, and the LLM
span's completion. The contexts are the last reranker's output documents, else every
retriever span's documents in the order the spans ran. A trace without a retriever span
becomes a record with no contexts, and says so in its metadata; one without a question or
an answer is not RAG and is dropped with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from services.intake.schema import MAX_CONTEXTS, ExternalRun, describe_validation_error
from services.intake.span_facts import CHAIN, LLM, RERANKER, RETRIEVER


@dataclass(frozen=True)
class TraceSpan:
    span_id: str
    parent_span_id: str | None
    facts: dict[str, Any]


@dataclass(frozen=True)
class Assembled:
    """A trace's record, or (record None) why the trace is dropped."""

    record: ExternalRun | None
    reason: str | None = None


def assemble_trace(trace_id: str, spans: Sequence[TraceSpan], *, service_name: str | None) -> Assembled:
    ordered = sorted(spans, key=lambda s: (s.facts.get("start_ns", 0), s.facts.get("end_ns", 0)))
    ids = {s.span_id for s in ordered}
    roots = [s for s in ordered if s.parent_span_id is None or s.parent_span_id not in ids]
    chains = [s for s in roots if _has_question_and_answer(s)] + [
        s for s in ordered if s not in roots and s.facts["kind"] == CHAIN and _has_question_and_answer(s)]
    llms = [s for s in ordered if s.facts["kind"] == LLM]
    retrievers = [s for s in ordered if s.facts["kind"] == RETRIEVER]
    rerankers = [s for s in ordered if s.facts["kind"] == RERANKER]
    last_llm = llms[-1].facts if llms else {}

    question = (chains[0].facts["input"] if chains else None) or next(
        (s.facts["query"] for s in retrievers if s.facts.get("query")), None) or last_llm.get("user_message")
    answer = (chains[0].facts["output"] if chains else None) or last_llm.get("completion")
    if question is None or answer is None:
        missing = " or ".join(n for n, v in (("question", question), ("answer", answer)) if v is None)
        kinds = sorted({s.facts["kind"] for s in ordered})
        return Assembled(None, f"not a RAG trace: no {missing} found in its {len(ordered)} spans (kinds: {', '.join(kinds)}); "
                               "the workbench reads OpenInference input.value/output.value, LLM messages and gen_ai.* "
                               "messages")

    source: str | None
    if rerankers:
        source = f"reranker span {rerankers[-1].facts['name']!r}"
        documents = rerankers[-1].facts.get("documents", [])
    else:
        source = ", ".join(f"retriever span {s.facts['name']!r}" for s in retrievers) or None
        documents = [d for s in retrievers for d in s.facts.get("documents", [])]
    if len(documents) > MAX_CONTEXTS:
        return Assembled(None, f"its retriever spans carry {len(documents):,} documents together; a run holds at most "
                               f"{MAX_CONTEXTS}")
    contexts = [{**doc, "rank": rank} for rank, doc in enumerate(documents, start=1)]
    note = (f"contexts from {source}" if contexts else
            f"no contexts: {source} returned no documents with text" if source else
            "no contexts: the trace has no retriever span")

    extra: dict[str, Any] = {"otlp": {"spans": len(ordered), "contexts": note}}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        counts = [s.facts[key] for s in llms if key in s.facts]
        if counts:
            extra[key] = sum(counts)
    session = next((s.facts["session"] for s in ordered if s.facts.get("session")), None)
    if session:
        extra["session_id"] = session
    start = ordered[0].facts.get("start_ns") if ordered else None
    metadata: dict[str, Any] = {
        "app": service_name[:200] if service_name else None,
        "model": next((s.facts["model"] for s in reversed(llms) if s.facts.get("model")), None),
        "user": next((s.facts["user"] for s in ordered if s.facts.get("user")), None),
        "timestamp": datetime.fromtimestamp(start / 1e9, tz=UTC).isoformat() if start else None,
        "extra": extra,
    }
    try:
        record = ExternalRun.model_validate({
            "question": question, "answer": answer, "contexts": contexts, "trace_id": trace_id,
            "metadata": {k: v for k, v in metadata.items() if v is not None}})
    except ValidationError as exc:
        return Assembled(None, f"its question, answer or contexts do not fit a record: {describe_validation_error(exc)}")
    return Assembled(record)


def _has_question_and_answer(span: TraceSpan) -> bool:
    return bool(span.facts.get("input")) and bool(span.facts.get("output"))
