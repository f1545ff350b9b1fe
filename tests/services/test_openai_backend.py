"""The OpenAI-compatible backend through the real openai SDK, with the network replaced by an httpx2
MockTransport serving chat.completion bodies shaped as llama.cpp's server and Ollama return them.

(The SDK runs on httpx2, as the anthropic one does, so the transport is httpx2's.)"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx2
import pytest
from sqlalchemy import select

from db.models import LLMCacheRow
from services.answering import pipeline
from services.answering.llm._claude_tools import claude_tool
from services.answering.llm._tools import PROMPT_VERSIONS, TOOLS
from services.answering.llm.backends import backend_for, backend_label, backend_name
from services.answering.llm.base import Citation, Generation, Grade, Reflection, create_backend
from services.answering.llm.cache import DatabaseCache
from services.answering.llm.openai_backend import OpenAICompatibleBackend, function_tool, unreachable_reason
from services.answering.runs import load_run
from services.domain import Hit
from services.errors import InputError, LLMError
from services.scoring.weights import DEFAULT_PROFILE
from services.settings import Settings

BASE_URL = "http://llm.factory.internal:8080/v1"
MODEL = "qwen2.5-3b-instruct-q4_k_m"
QUESTION = "How often should the brake check run?"
ANSWER = "Run the brake check every 8 hours of operation [1]."

HITS = (
    Hit(chunk_id=101, document_id=11, external_id="brake-check-procedure", title="Brake check procedure",
        text="The brake check runs every 8 hours of operation. A failed check raises SRVO-062.", rank=1,
        fused_score=0.032),
    Hit(chunk_id=202, document_id=22, external_id="safety-guidelines", title="Safety guidelines",
        text="Never enter the cell while the robot is in AUTO mode.", rank=2, fused_score=0.030),
    Hit(chunk_id=303, document_id=33, external_id="glossary", title="Glossary",
        text="SRVO: servo alarms raised by the motion controller.", rank=3, fused_score=0.020),
)

GOOD = {
    "submit_answer": {"answer": ANSWER, "citations": [
        {"document": 1, "quote": "The brake check runs every 8 hours of operation."}]},
    "submit_reflection": {"answer_grounded": True, "hallucination_detected": False, "reflection_score": 0.9,
                          "sources_cited": ["1"], "reflection_reason": "The interval is stated in Document 1.",
                          "needs_regeneration": False},
    "submit_grade": {"score": 4, "gaps": ["what SRVO-062 means"], "refinements": ["SRVO-062 brake alarm meaning"]},
    "submit_gaps": {"gaps": ["the steps of the brake check"]},
    "submit_query": {"query": "brake check interval collaborative robot"},
    "submit_sub_queries": {"sub_queries": ["What is the brake check?", "What interval is required?"]},
}


# --- recorded response bodies -------------------------------------------------------------------------------------


def llama_cpp(*tool_calls: dict[str, Any], content: str | None = None, finish_reason: str = "tool_calls",
              **message: Any) -> dict[str, Any]:
    """A llama.cpp server (llama-server --jinja) chat.completion body, timings and all."""
    return {
        "choices": [{"finish_reason": finish_reason, "index": 0, "message": {
            "role": "assistant", "content": content, **({"tool_calls": list(tool_calls)} if tool_calls else {}),
            **message}}],
        "created": 1732512345, "model": MODEL, "system_fingerprint": "b4154-9f5b2d1e", "object": "chat.completion",
        "usage": {"completion_tokens": 41, "prompt_tokens": 612, "total_tokens": 653},
        "id": "chatcmpl-7nDqkR2w0a4VvG6XYbq1Lr0uTz8e3JmP",
        "timings": {"prompt_n": 612, "prompt_ms": 1834.2, "prompt_per_token_ms": 2.99, "prompt_per_second": 333.6,
                    "predicted_n": 41, "predicted_ms": 2210.5, "predicted_per_token_ms": 53.9,
                    "predicted_per_second": 18.5},
    }


def ollama(name: str, arguments: dict[str, Any] | str, finish_reason: str = "tool_calls") -> dict[str, Any]:
    """An Ollama /v1/chat/completions body: empty content, the arguments as a JSON string."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": "chatcmpl-412", "object": "chat.completion", "created": 1732512399, "model": "qwen2.5:3b",
            "system_fingerprint": "fp_ollama", "choices": [{"index": 0, "message": {
                "role": "assistant", "content": "", "tool_calls": [
                    {"id": "call_k2x9f1qe", "index": 0, "type": "function",
                     "function": {"name": name, "arguments": text}}]}, "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 640, "completion_tokens": 58, "total_tokens": 698}}


def call(name: str, arguments: dict[str, Any] | str) -> dict[str, Any]:
    """One llama.cpp tool call; the arguments travel as a JSON string."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"type": "function", "function": {"name": name, "arguments": text}, "id": "Ry8P2Yb0F8jN5U4vA1TqW7xKcZ3mHdLs"}


def http_error(status: int, body: dict[str, Any]) -> httpx2.Response:
    # retry-after-ms keeps the SDK's backoff to a millisecond.
    return httpx2.Response(status, headers={"retry-after-ms": "1"}, json=body)


Reply = dict[str, Any] | httpx2.Response | Exception


class FakeServer:
    """Answers each chat request by the tool it forces (`routes`), else with the next scripted reply
    (the last one repeats); keeps the requests."""

    def __init__(self, *replies: Reply, routes: dict[str, Reply] | None = None) -> None:
        self.replies = list(replies)
        self.routes = routes or {}
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        if self.routes:
            reply = self.routes[json.loads(request.content)["tool_choice"]["function"]["name"]]
        else:
            reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        return reply if isinstance(reply, httpx2.Response) else httpx2.Response(200, json=reply)

    def body(self, index: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[index].content)


def backend_on(server: FakeServer, **options: Any) -> OpenAICompatibleBackend:
    settings = {"max_tokens": 700, "timeout_s": 12, "max_retries": 2, **options}
    return OpenAICompatibleBackend(base_url=BASE_URL, model=MODEL,
                                   http_client=httpx2.Client(transport=httpx2.MockTransport(server)), **settings)


# --- the request: the shared tools, forced ------------------------------------------------------------------------


def test_generate_sends_the_shared_tool_forced_and_maps_citations_to_chunks():
    server = FakeServer(llama_cpp(call("submit_answer", GOOD["submit_answer"])))
    backend = backend_on(server)

    generation = backend.generate(QUESTION, HITS)

    assert generation == Generation(answer=ANSWER, citations=(Citation(
        marker=1, chunk_id=101, document_id=11, external_id="brake-check-procedure",
        quote="The brake check runs every 8 hours of operation."),))
    (request,) = server.requests
    body = server.body()
    assert request.method == "POST" and str(request.url) == f"{BASE_URL}/chat/completions"
    assert request.headers["authorization"] == "Bearer no-key-needed"  # a placeholder: local servers ignore it
    assert body["model"] == MODEL and body["max_tokens"] == 700 and body["temperature"] == 0.0
    assert body["tool_choice"] == {"type": "function", "function": {"name": "submit_answer"}}
    assert body["tools"] == [{"type": "function", "function": {
        "name": "submit_answer", "description": TOOLS["generate"].description,
        "parameters": TOOLS["generate"].schema}}]
    system, user = body["messages"]
    assert system == {"role": "system", "content": TOOLS["generate"].system}
    assert user["role"] == "user" and QUESTION in user["content"] and HITS[0].text in user["content"]
    assert "Document 3: Glossary" in user["content"]
    (logged,) = backend.log.calls
    assert (logged.backend, logged.model, logged.operation, logged.outcome, logged.cached) == (
        "openai-compatible", MODEL, "generate", "ok", False)
    assert logged.prompt_version == PROMPT_VERSIONS["generate"] and logged.temperature == 0.0
    assert (logged.input_tokens, logged.output_tokens) == (612, 41) and logged.latency_ms > 0 and logged.cache_key


@pytest.mark.parametrize("operation", sorted(TOOLS))
def test_function_tools_are_the_claude_tools_in_openai_shape(operation):
    tool = TOOLS[operation]
    claude, openai_tool = claude_tool(tool), function_tool(tool)
    assert openai_tool["function"]["name"] == claude["name"] == tool.name
    assert openai_tool["function"].get("parameters") == claude["input_schema"] == tool.schema
    assert openai_tool["function"].get("description") == claude.get("description") == tool.description


@pytest.mark.parametrize(("operation", "run", "tool_name", "expected", "in_prompt"), [
    ("reflect", lambda b: b.reflect(QUESTION, ANSWER, HITS), "submit_reflection",
     Reflection(answer_grounded=True, hallucination_detected=False, reflection_score=0.9, sources_cited=("1",),
                reflection_reason="The interval is stated in Document 1.", needs_regeneration=False),
     [QUESTION, ANSWER, HITS[1].text]),
    ("grade", lambda b: b.grade(QUESTION, ANSWER), "submit_grade",
     Grade(score=4, gaps=("what SRVO-062 means",), refinements=("SRVO-062 brake alarm meaning",)),
     [QUESTION, ANSWER]),
    ("identify_gaps", lambda b: b.identify_gaps(QUESTION, ANSWER, HITS), "submit_gaps",
     ["the steps of the brake check"], [QUESTION, ANSWER, HITS[0].text]),
    ("refine_query", lambda b: b.refine_query(QUESTION, reason="no interval for collaborative robots",
                                              gaps=("the collaborative robot interval",), expansion_terms=("cobot",)),
     "submit_query", "brake check interval collaborative robot",
     [QUESTION, "no interval for collaborative robots", "- the collaborative robot interval", "cobot"]),
    ("decompose", lambda b: b.decompose(QUESTION), "submit_sub_queries",
     ["What is the brake check?", "What interval is required?"], [QUESTION]),
])
def test_each_judge_call_parses_an_ollama_tool_call(operation, run, tool_name, expected, in_prompt):
    server = FakeServer(ollama(tool_name, GOOD[tool_name]))
    backend = backend_on(server)

    assert run(backend) == expected

    body = server.body()
    assert body["tool_choice"] == {"type": "function", "function": {"name": tool_name}}
    assert [t["function"]["name"] for t in body["tools"]] == [tool_name]
    assert all(part in body["messages"][1]["content"] for part in in_prompt)
    (logged,) = backend.log.calls
    assert (logged.operation, logged.prompt_version, logged.outcome) == (operation, PROMPT_VERSIONS[operation], "ok")
    assert (logged.input_tokens, logged.output_tokens) == (640, 58)


def test_an_ollama_tool_call_that_ends_with_stop_still_counts():
    # Older Ollama releases end a tool call with finish_reason "stop".
    server = FakeServer(ollama("submit_grade", GOOD["submit_grade"], finish_reason="stop"))
    assert backend_on(server).grade(QUESTION, ANSWER).score == 4


def test_json_in_content_from_a_server_without_tool_support_is_taken_as_the_tool_input():
    # llama-server started without --jinja ignores the tools and writes the JSON as text.
    reply = llama_cpp(content=' {"score": 5, "gaps": [], "refinements": []}\n', finish_reason="stop")
    backend = backend_on(FakeServer(reply))

    assert backend.grade(QUESTION, ANSWER) == Grade(score=5)
    assert backend.log.calls[0].outcome == "ok"


def test_responses_without_usage_log_zero_tokens():
    reply = ollama("submit_query", GOOD["submit_query"])
    del reply["usage"]
    backend = backend_on(FakeServer(reply))

    backend.refine_query(QUESTION, reason="", gaps=(), expansion_terms=())

    assert (backend.log.calls[0].input_tokens, backend.log.calls[0].output_tokens) == (0, 0)


# --- malformed output is an error, never a default ----------------------------------------------------------------

GRADE_CALL = {"score": 4, "gaps": [], "refinements": []}
MALFORMED = [
    pytest.param(llama_cpp(content="The brake check runs every 8 hours.", finish_reason="stop"),
                 "no submit_reflection tool call in the response (finish_reason 'stop'); it said: 'The brake check",
                 id="prose-instead-of-a-call"),
    pytest.param(llama_cpp(content='```json\n{"answer_grounded": true}\n```', finish_reason="stop"),
                 "no submit_reflection tool call", id="fenced-json-in-content"),
    pytest.param(llama_cpp(content="{answer_grounded: true}", finish_reason="stop"),
                 "arguments are not valid JSON (Expecting property name enclosed in double quotes at character 1)",
                 id="invalid-json-in-content"),
    pytest.param(llama_cpp(call("submit_reflection", '{"answer_grounded": true, "reflection_score": 0.9')),
                 "the submit_reflection arguments are not valid JSON", id="invalid-json-arguments"),
    pytest.param(llama_cpp(call("submit_reflection", {**GOOD["submit_reflection"], "reflection_score": 1.7})),
                 "input.reflection_score is 1.7, outside 0..1", id="out-of-range"),
    pytest.param(llama_cpp(call("submit_reflection", {**GOOD["submit_reflection"], "answer_grounded": "yes"})),
                 "input.answer_grounded must be true or false", id="wrong-type"),
    pytest.param(llama_cpp(call("submit_reflection", {"answer_grounded": True})),
                 "input is missing hallucination_detected", id="missing-fields"),
    pytest.param(llama_cpp(call("submit_reflection", {**GOOD["submit_reflection"], "sources_cited": ["7"]})),
                 "not a Document number 1..", id="unknown-document"),
    pytest.param(llama_cpp(call("submit_reflection", "[0.9]")), "input must be an object", id="arguments-not-an-object"),
    pytest.param(llama_cpp(call("submit_grade", GRADE_CALL)),
                 "expected one submit_reflection tool call, got submit_grade", id="wrong-tool"),
    pytest.param(llama_cpp(call("submit_reflection", GOOD["submit_reflection"]), call("submit_grade", GRADE_CALL)),
                 "expected one submit_reflection tool call, got submit_reflection, submit_grade", id="two-calls"),
    pytest.param(llama_cpp(call("submit_reflection", '{"answer_grounded": tr'), finish_reason="length"),
                 "cut off by max_tokens; raise LLM_MAX_TOKENS", id="cut-off"),
    pytest.param({**llama_cpp(), "choices": []}, "the response has no choices", id="no-choices"),
]


@pytest.mark.parametrize(("reply", "says"), MALFORMED)
def test_malformed_output_raises_a_malformed_llm_error_and_is_logged(reply, says):
    backend = backend_on(FakeServer(reply))

    with pytest.raises(LLMError) as caught:
        backend.reflect(QUESTION, ANSWER, HITS)

    assert caught.value.kind == "malformed"
    assert str(caught.value).startswith(f"The model '{MODEL}''s reflect response was malformed: ")
    assert says in str(caught.value)
    (logged,) = backend.log.calls
    assert logged.outcome == "error" and says in (logged.error or "") and logged.operation == "reflect"
    assert (logged.input_tokens, logged.output_tokens) == (612, 41)  # the malformed answer was still paid for


@pytest.mark.parametrize(("message", "finish_reason", "says"), [
    ({"refusal": "I can't help with that request."}, "stop", "I can't help with that request."),
    ({}, "content_filter", "the server's content filter withheld the answer"),
])
def test_a_refusal_is_a_refusal_error(message, finish_reason, says):
    backend = backend_on(FakeServer(llama_cpp(finish_reason=finish_reason, **message)))

    with pytest.raises(LLMError) as caught:
        backend.generate(QUESTION, HITS)

    assert caught.value.kind == "refusal"
    assert str(caught.value) == f"The model '{MODEL}' declined the generate request: {says}"
    assert backend.log.calls[0].outcome == "error"


# --- failures the SDK reports, after its own retries --------------------------------------------------------------

OLLAMA_NO_MODEL = http_error(404, {"error": f'model "{MODEL}" not found, try pulling it first'})
LLAMA_CPP_NO_TOOLS = http_error(500, {"error": {
    "code": 500, "type": "server_error",
    "message": "tools param requires --jinja flag"}})
SERVER_DOWN = httpx2.ConnectError("[Errno 111] Connection refused")
HTTP_FAILURES = [
    pytest.param(OLLAMA_NO_MODEL, "api", 1, f'HTTP 404 for the grade request: model "{MODEL}" not found, '
                 "try pulling it first. Check that LLM_MODEL names a model the server serves.", id="ollama-404"),
    pytest.param(LLAMA_CPP_NO_TOOLS, "api", 3, "HTTP 500 for the grade request: tools param requires --jinja flag. "
                 "Does the server support tool calling?", id="llama-cpp-no-tools"),
    pytest.param(http_error(503, {"error": {"message": "Loading model", "type": "unavailable_error", "code": 503}}),
                 "api", 3, "HTTP 503 for the grade request: Loading model. Still failing after 2 retries.", id="503"),
    pytest.param(http_error(429, {"error": {"message": "too many requests"}}), "rate_limit", 3,
                 "was still busy (HTTP 429) after 2 retries", id="429"),
    pytest.param(SERVER_DOWN, "api", 3, f"Could not reach the model server at {BASE_URL} for the grade request "
                 "(ConnectError); is it running? Check LLM_BASE_URL.", id="connection-refused"),
]


@pytest.mark.parametrize(("reply", "kind", "requests", "says"), HTTP_FAILURES)
def test_http_failures_are_llm_errors_that_name_the_cause(reply, kind, requests, says):
    server = FakeServer(reply)
    backend = backend_on(server, max_retries=2)

    with pytest.raises(LLMError) as caught:
        backend.grade(QUESTION, ANSWER)

    assert caught.value.kind == kind and says in str(caught.value)
    assert len(server.requests) == requests  # 404 is not retried; the rest are, max_retries times
    assert isinstance(caught.value.__cause__, Exception)  # raised `from` the SDK error
    (logged,) = backend.log.calls
    assert logged.outcome == "error" and says in (logged.error or "")


def test_a_read_timeout_is_a_timeout_error():
    # max_retries=0: the SDK retries timeouts too, but with no retry-after header it would back off for real.
    server = FakeServer(httpx2.ReadTimeout("timed out"))
    backend = backend_on(server, max_retries=0)

    with pytest.raises(LLMError) as caught:
        backend.grade(QUESTION, ANSWER)

    assert caught.value.kind == "timeout" and "within 12 s" in str(caught.value) and "LLM_TIMEOUT_S" in str(caught.value)
    assert len(server.requests) == 1 and backend.log.calls[0].outcome == "error"


def test_an_api_key_is_sent_and_never_appears_in_errors_calls_or_logs(caplog):
    caplog.set_level(logging.DEBUG)
    key = "sk-vllm-0123456789-SECRET"
    server = FakeServer(http_error(401, {"error": {"message": f"invalid api key {key}", "type": "invalid_request_error"}}))
    backend = backend_on(server, api_key=key, max_retries=0)

    with pytest.raises(LLMError) as caught:
        backend.decompose(QUESTION)

    assert server.requests[0].headers["authorization"] == f"Bearer {key}"
    assert "Check LLM_API_KEY" in str(caught.value) and "[redacted]" in str(caught.value)
    texts = [str(caught.value), repr(caught.value), str(caught.value.__cause__), repr(backend)]
    texts += [json.dumps(c.to_dict()) for c in backend.log.calls] + [r.getMessage() for r in caplog.records]
    assert caplog.records and not [t for t in texts if key in t]


# --- the response cache -------------------------------------------------------------------------------------------


def test_a_second_identical_call_is_served_from_the_database_cache(clean_db, settings, engine):
    server = FakeServer(llama_cpp(call("submit_answer", GOOD["submit_answer"])))
    backend = backend_on(server, cache=DatabaseCache(settings))

    first = backend.generate(QUESTION, HITS)
    second = backend.generate(QUESTION, HITS)

    assert second == first and len(server.requests) == 1
    fresh, cached = backend.log.calls
    assert (fresh.cached, cached.cached) == (False, True) and cached.cache_key == fresh.cache_key
    assert (cached.input_tokens, cached.output_tokens, cached.latency_ms) == (0, 0, 0.0)
    with engine.connect() as conn:
        (row,) = conn.execute(select(LLMCacheRow.__table__)).mappings().all()
    assert row["response"] == GOOD["submit_answer"]
    assert (row["backend"], row["model"], row["operation"], row["prompt_version"]) == (
        "openai-compatible", MODEL, "generate", PROMPT_VERSIONS["generate"])
    assert (row["input_tokens"], row["output_tokens"]) == (612, 41)


def test_malformed_responses_are_not_cached(clean_db, settings):
    server = FakeServer(llama_cpp(content="I think it is grounded.", finish_reason="stop"),
                        llama_cpp(call("submit_reflection", GOOD["submit_reflection"])))
    backend = backend_on(server, cache=DatabaseCache(settings))

    with pytest.raises(LLMError):
        backend.reflect(QUESTION, ANSWER, HITS)
    assert backend.reflect(QUESTION, ANSWER, HITS).reflection_score == 0.9
    assert backend.reflect(QUESTION, ANSWER, HITS).reflection_score == 0.9

    assert len(server.requests) == 2 and [c.cached for c in backend.log.calls] == [False, False, True]


# --- through the pipeline: a failing judge is stored, never raised ------------------------------------------------

DOCS = {
    "brake.md": "# Brake check\nThe brake check runs every 8 hours of operation. A failed check raises SRVO-062.",
    "safety.md": "# Safety\nNever enter the cell while the robot is in AUTO mode.",
}


@pytest.fixture()
def brake_docs(clean_db, tmp_path):
    from services.corpus.ingest import ingest_paths

    for name, body in DOCS.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    ingest_paths([tmp_path])


def routes(**failing: Reply) -> dict[str, Reply]:
    """A good answer for every tool, with the given ones failing."""
    return {**{name: llama_cpp(call(name, data)) for name, data in GOOD.items()}, **failing}


# One of each kind of failure (every malformed shape is checked above, without the pipeline).
FAILED_JUDGE = [pytest.param(*p.values[:1], "malformed", *p.values[1:], id=p.id) for p in MALFORMED
                if p.id in ("prose-instead-of-a-call", "invalid-json-arguments", "out-of-range")]
FAILED_JUDGE += [
    pytest.param(llama_cpp(refusal="I can't help with that request."), "refusal", "declined the reflect request",
                 id="refusal"),
    pytest.param(http_error(500, {"error": {"message": "out of memory"}}), "api", "HTTP 500 for the reflect request",
                 id="http-500"),
    pytest.param(httpx2.ReadTimeout("timed out"), "timeout", "did not answer the reflect request", id="timeout"),
]


@pytest.mark.parametrize(("reflect_reply", "kind", "says"), FAILED_JUDGE)
def test_a_failing_reflection_judge_is_stored_on_the_run(brake_docs, reflect_reply, kind, says):
    server = FakeServer(routes=routes(submit_reflection=reflect_reply))
    backend = backend_on(server, max_retries=0)

    run = pipeline.run("How often should the brake check run?", "balanced", DEFAULT_PROFILE, backend=backend)

    stored = load_run(run.run_id)
    assert stored.backend == "openai-compatible" and stored.model == MODEL
    first = stored.iterations[0]
    assert first.answer == ANSWER and first.grade == Grade(4, ("what SRVO-062 means",), ("SRVO-062 brake alarm meaning",))
    assert first.reflection is None and stored.reflection_score is None  # never a silent default score
    (error,) = [e for e in first.errors if e["stage"] == "reflection"]
    assert error["kind"] == kind and says in error["message"]
    assert all("reflection" not in it.signals for it in stored.iterations)
    (failed,) = [c for c in first.llm_calls if c.operation == "reflect"]
    assert failed.outcome == "error" and failed.backend == "openai-compatible"
    assert stored.status == "pending"  # an unjudged answer is never auto-accepted


def test_a_failing_generation_leaves_a_stored_run_without_an_answer(brake_docs):
    backend = backend_on(FakeServer(routes=routes(submit_answer=llama_cpp(content="Sure!", finish_reason="stop"))))

    run = pipeline.run("How often should the brake check run?", "balanced", DEFAULT_PROFILE, backend=backend)

    stored = load_run(run.run_id)
    assert stored.final_answer == "" and stored.status == "pending"
    errors = [e for it in stored.iterations for e in it.errors]
    assert errors[0]["stage"] == "generation" and errors[0]["kind"] == "malformed"
    assert "no submit_answer tool call" in errors[0]["message"]


# --- choosing the backend from settings ---------------------------------------------------------------------------


def local_settings(**values: Any) -> Settings:
    return Settings(**{"llm_base_url": BASE_URL, "llm_model": MODEL, **values})


def test_llm_base_url_wins_over_an_anthropic_key_unless_llm_backend_says_otherwise():
    assert backend_name(Settings()) == "offline"
    assert backend_name(Settings(anthropic_api_key="sk-ant-x")) == "anthropic"
    assert backend_name(local_settings(anthropic_api_key="sk-ant-x")) == "openai-compatible"
    assert backend_name(local_settings(anthropic_api_key="sk-ant-x", llm_backend="anthropic")) == "anthropic"
    assert backend_name(local_settings(llm_backend="offline")) == "offline"
    assert backend_label(local_settings()) == f"OpenAI-compatible ({MODEL})"
    assert backend_label(Settings(anthropic_api_key="sk-ant-x")) == "Claude (claude-sonnet-4-5)"


def test_backend_for_builds_the_openai_compatible_backend_from_settings():
    backend = backend_for(local_settings(llm_api_key="sk-local", llm_timeout_s=300))
    assert isinstance(backend, OpenAICompatibleBackend)
    assert backend.is_llm and backend.name == "openai-compatible" and backend.model == MODEL
    assert backend.label == f"OpenAI-compatible ({MODEL})"
    assert isinstance(create_backend("openai-compatible", base_url=BASE_URL, model=MODEL), OpenAICompatibleBackend)


@pytest.mark.parametrize(("values", "says"), [
    ({"llm_backend": "openai-compatible", "llm_base_url": None}, "set LLM_BASE_URL"),
    ({"llm_model": None}, "set LLM_MODEL"),
])
def test_missing_server_settings_are_input_errors(values, says):
    with pytest.raises(InputError, match=says):
        backend_for(local_settings(**values))


# --- is a server there? -------------------------------------------------------------------------------------------


def test_unreachable_reason_names_what_is_missing():
    models = {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 1732512345, "owned_by": "llamacpp"}]}
    up = FakeServer(models)
    assert unreachable_reason(BASE_URL, http_client=httpx2.Client(transport=httpx2.MockTransport(up))) is None
    assert str(up.requests[0].url) == f"{BASE_URL}/models"

    assert unreachable_reason(None) == "LLM_BASE_URL is not set"
    down = httpx2.Client(transport=httpx2.MockTransport(FakeServer(SERVER_DOWN)))
    reason = unreachable_reason(BASE_URL, http_client=down)
    assert reason is not None and f"Could not reach the model server at {BASE_URL}" in reason
