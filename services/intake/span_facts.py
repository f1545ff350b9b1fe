"""What one span says about a RAG answer, read from OpenInference attributes and the
OpenTelemetry GenAI conventions (`gen_ai.*`): its kind, its input and output, retrieved or
reranked documents, and an LLM call's messages, model and tokens.

The facts are small JSON the store keeps until the trace is assembled (trace_runs.py).
A span that can never become part of a record (more documents than a record holds, a
document longer than a context may be) raises SpanRefusedError, which refuses its trace.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from openinference.semconv.trace import (
    DocumentAttributes,
    MessageAttributes,
    OpenInferenceSpanKindValues,
    RerankerAttributes,
    SpanAttributes,
)

from services.errors import InputError
from services.intake.otlp import Span
from services.intake.schema import MAX_ANSWER_CHARS, MAX_CONTEXT_CHARS, MAX_CONTEXTS, MAX_QUESTION_CHARS

RETRIEVER, RERANKER, LLM, CHAIN, OTHER = "retriever", "reranker", "llm", "chain", "other"
_OPENINFERENCE_KINDS = {
    OpenInferenceSpanKindValues.RETRIEVER.value: RETRIEVER, OpenInferenceSpanKindValues.RERANKER.value: RERANKER,
    OpenInferenceSpanKindValues.LLM.value: LLM, OpenInferenceSpanKindValues.CHAIN.value: CHAIN,
    OpenInferenceSpanKindValues.AGENT.value: CHAIN,
}
_GEN_AI_OPERATIONS = {"retrieval": RETRIEVER, "chat": LLM, "text_completion": LLM, "generate_content": LLM,
                      "invoke_agent": CHAIN, "invoke_workflow": CHAIN}
# Keys under which JSON inputs and outputs of chains carry the question and the answer
# (LangChain's RetrievalQA: query/result; create_retrieval_chain: input/answer; RAGAS: user_input/response).
_QUESTION_KEYS = ("question", "query", "input", "user_input", "q", "prompt", "text")
_ANSWER_KEYS = ("answer", "output", "result", "response", "text", "content")
_SCORE_KEYS = ("score", "relevance_score", "similarity", "_score")
_ID_KEYS = ("document_id", "doc_id", "id")
_SOURCE_KEYS = ("source", "url", "file_path", "file_name", "path", "title")
# A question or answer candidate is kept one character past its limit: enough to say it was too long.
_KEEP = {"question": MAX_QUESTION_CHARS + 1, "answer": MAX_ANSWER_CHARS + 1}


class SpanRefusedError(InputError):
    """This span's trace cannot become a record; the message says why."""


def span_facts(span: Span) -> dict[str, Any]:
    """The JSON facts of one span (kind, input, output, documents, LLM messages, model, tokens)."""
    attrs = span.attributes
    kind = _kind(attrs)
    facts: dict[str, Any] = {"name": span.name, "kind": kind, "start_ns": span.start_ns, "end_ns": span.end_ns}
    _put(facts, "input", _text_of(attrs.get(SpanAttributes.INPUT_VALUE), _QUESTION_KEYS), _KEEP["question"])
    _put(facts, "output", _text_of(attrs.get(SpanAttributes.OUTPUT_VALUE), _ANSWER_KEYS), _KEEP["answer"])
    _put(facts, "user", _string(attrs.get(SpanAttributes.USER_ID)), 200)
    _put(facts, "session", _string(attrs.get(SpanAttributes.SESSION_ID) or attrs.get("gen_ai.conversation.id")), 200)
    if kind == RETRIEVER:
        _put(facts, "query", _string(attrs.get("gen_ai.retrieval.query.text")), _KEEP["question"])
        facts["documents"] = _documents(span, SpanAttributes.RETRIEVAL_DOCUMENTS) or _gen_ai_documents(span)
    elif kind == RERANKER:
        facts["documents"] = _documents(span, RerankerAttributes.RERANKER_OUTPUT_DOCUMENTS)
    elif kind == LLM:
        _llm_facts(span, facts)
    return facts


def _kind(attrs: Mapping[str, Any]) -> str:
    named = _string(attrs.get(SpanAttributes.OPENINFERENCE_SPAN_KIND))
    if named:
        return _OPENINFERENCE_KINDS.get(named.upper(), OTHER)
    return _GEN_AI_OPERATIONS.get(_string(attrs.get("gen_ai.operation.name")) or "", OTHER)


def _put(facts: dict[str, Any], key: str, value: Any, keep: int) -> None:
    if isinstance(value, str) and value.strip():
        facts[key] = value[:keep]


def _string(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _text_of(value: Any, keys: tuple[str, ...]) -> str | None:
    """A plain string as it is; a JSON object's first known key (searched one level down too)."""
    if not isinstance(value, str):
        return None
    stripped = value.strip()
    if not stripped.startswith(("{", "[")):
        return value
    try:
        parsed = json.loads(stripped)
    except json.JSONDecodeError:
        return value
    return _pick(parsed, keys, depth=2)


def _pick(value: Any, keys: tuple[str, ...], *, depth: int) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "generations" in value:  # an LLM's result as LangChain writes it
            return _pick(value["generations"], keys, depth=depth + 2)
        for key in keys:
            if key in value and (found := _pick(value[key], keys, depth=0)) is not None:
                return found
        if depth > 0:
            for item in value.values():
                if isinstance(item, dict) and (found := _pick(item, keys, depth=depth - 1)) is not None:
                    return found
    if isinstance(value, list) and value and depth > 0:
        return _pick(value[-1] if not isinstance(value[0], list) else value[0], keys, depth=depth - 1)
    return None


def _indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Flattened lists (`prefix.0.document.content`, ...) as a list of {suffix: value}, by index."""
    items: dict[int, dict[str, Any]] = {}
    start = prefix + "."
    for key, value in attrs.items():
        if key.startswith(start):
            index, _, rest = key[len(start):].partition(".")
            if index.isdigit() and rest:
                items.setdefault(int(index), {})[rest] = value
    return [items[i] for i in sorted(items)]


def _documents(span: Span, prefix: str) -> list[dict[str, Any]]:
    found = _indexed(span.attributes, prefix)
    _check_count(span, len(found))
    docs = []
    for item in found:
        metadata = _json_object(item.get(DocumentAttributes.DOCUMENT_METADATA))
        docs.append(_document(span, item.get(DocumentAttributes.DOCUMENT_CONTENT), item.get(DocumentAttributes.DOCUMENT_ID),
                              item.get(DocumentAttributes.DOCUMENT_SCORE), metadata))
    return [d for d in docs if d]


def _gen_ai_documents(span: Span) -> list[dict[str, Any]]:
    value = span.attributes.get("gen_ai.retrieval.documents")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return []
    if not isinstance(value, list):
        return []
    _check_count(span, len(value))
    docs = []
    for item in value:
        if isinstance(item, str):
            item = {"content": item}
        if isinstance(item, dict):
            metadata: dict[str, Any] = item["metadata"] if isinstance(item.get("metadata"), dict) else {}
            docs.append(_document(span, item.get("content") or item.get("text"), item.get("id"), item.get("score"),
                                  {**metadata, **{k: item[k] for k in _SOURCE_KEYS if k in item}}))
    return [d for d in docs if d]


def _check_count(span: Span, count: int) -> None:
    if count > MAX_CONTEXTS:
        raise SpanRefusedError(f"span {span.name!r} of trace {span.trace_id} carries {count:,} documents; a run holds "
                               f"at most {MAX_CONTEXTS} contexts (pass the generator's top documents, not the whole pool)")


def _document(span: Span, content: Any, doc_id: Any, score: Any, metadata: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(content, str) or not content.strip():
        return {}  # a document without text gives the answer nothing to be checked against
    if len(content) > MAX_CONTEXT_CHARS:
        raise SpanRefusedError(f"a document of span {span.name!r} of trace {span.trace_id} is {len(content):,} characters; "
                               f"a context may be at most {MAX_CONTEXT_CHARS:,}")
    doc: dict[str, Any] = {"text": content}
    doc_id = doc_id if doc_id is not None else next((metadata[k] for k in _ID_KEYS if metadata.get(k) is not None), None)
    if isinstance(doc_id, str | int) and not isinstance(doc_id, bool):
        doc["document_id"] = str(doc_id)[:200]
    score = score if score is not None else next((metadata[k] for k in _SCORE_KEYS if k in metadata), None)
    if isinstance(score, int | float) and not isinstance(score, bool) and score == score and abs(score) != float("inf"):
        doc["score"] = float(score)
    source = next((metadata[k] for k in _SOURCE_KEYS if isinstance(metadata.get(k), str)), None)
    if source:
        doc["source"] = source[:2000]
    return doc


def _json_object(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return {}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def _llm_facts(span: Span, facts: dict[str, Any]) -> None:
    attrs = span.attributes
    model = next((attrs[k] for k in (SpanAttributes.LLM_MODEL_NAME, "gen_ai.response.model", "gen_ai.request.model")
                  if isinstance(attrs.get(k), str)), None)
    _put(facts, "model", model, 200)
    tokens = {"prompt_tokens": (SpanAttributes.LLM_TOKEN_COUNT_PROMPT, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"),
              "completion_tokens": (SpanAttributes.LLM_TOKEN_COUNT_COMPLETION, "gen_ai.usage.output_tokens",
                                    "gen_ai.usage.completion_tokens"),
              "total_tokens": (SpanAttributes.LLM_TOKEN_COUNT_TOTAL,)}
    for name, keys in tokens.items():
        count = next((attrs[k] for k in keys if isinstance(attrs.get(k), int)), None)
        if count is not None:
            facts[name] = count
    _put(facts, "user_message", _last_user_message(span), _KEEP["question"])
    _put(facts, "completion", _completion(span), _KEEP["answer"])


def _role_content(messages: list[dict[str, Any]], *, role: str | None) -> str | None:
    role_key, content_key = MessageAttributes.MESSAGE_ROLE, MessageAttributes.MESSAGE_CONTENT
    picked = [m for m in messages if role is None or m.get(role_key, m.get("role")) == role]
    for message in reversed(picked):
        content = message.get(content_key, message.get("content"))
        if isinstance(content, str) and content.strip():
            return content
    return None


def _gen_ai_messages(value: Any, *, role: str | None) -> str | None:
    """`gen_ai.input.messages` / `gen_ai.output.messages`: [{role, parts: [{type: text, content}]}]."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if not isinstance(value, list):
        return None
    for message in reversed(value):
        if not isinstance(message, dict) or (role is not None and message.get("role") != role):
            continue
        parts = message.get("parts")
        text: Any
        if isinstance(parts, list):
            texts = [p.get("content") for p in parts if isinstance(p, dict) and p.get("type", "text") == "text"]
            text = "\n".join(t for t in texts if isinstance(t, str))
        else:
            text = message.get("content")
        if isinstance(text, str) and text.strip():
            return text
    return None


def _last_user_message(span: Span) -> str | None:
    attrs = span.attributes
    return (_role_content(_indexed(attrs, SpanAttributes.LLM_INPUT_MESSAGES), role="user")
            or _gen_ai_messages(attrs.get("gen_ai.input.messages"), role="user")
            or _role_content(_indexed(attrs, "gen_ai.prompt"), role="user")
            or next((e.attributes.get("content") for e in reversed(span.events)
                     if e.name == "gen_ai.user.message" and isinstance(e.attributes.get("content"), str)), None)
            or _last_prompt(attrs.get(SpanAttributes.LLM_PROMPTS)))


def _last_prompt(value: Any) -> str | None:
    return value[-1] if isinstance(value, list) and value and isinstance(value[-1], str) else None


def _completion(span: Span) -> str | None:
    attrs = span.attributes
    return (_role_content(_indexed(attrs, SpanAttributes.LLM_OUTPUT_MESSAGES), role=None)
            or _gen_ai_messages(attrs.get("gen_ai.output.messages"), role=None)
            or _role_content(_indexed(attrs, "gen_ai.completion"), role=None)
            or _text_of(attrs.get(SpanAttributes.OUTPUT_VALUE), _ANSWER_KEYS))
