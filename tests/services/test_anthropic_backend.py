"""The Claude backend through the real anthropic SDK, with the network replaced by an httpx2 MockTransport."""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any

import httpx2
import pytest
from sqlalchemy import select, text

from db.models import LLMCacheRow
from services.answering.llm.anthropic_backend import PROMPT_VERSIONS, AnthropicBackend
from services.answering.llm.base import Citation, Generation, Grade, Reflection, create_backend
from services.answering.llm.cache import DatabaseCache, cache_key
from services.domain import Hit
from services.errors import InputError, LLMError

API_KEY = "sk-ant-test-0123456789-SECRET"
MODEL = "claude-sonnet-4-5"
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


def message(*content: dict[str, Any], stop_reason: str = "tool_use", **extra: Any) -> dict[str, Any]:
    """A Messages API response body, shaped like anthropic.types.Message."""
    return {"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": MODEL,
            "content": list(content), "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 812, "output_tokens": 64}, **extra}


def tool_use(name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": name, "input": tool_input}


def api_error(status: int, error_type: str, text_: str) -> httpx2.Response:
    # retry-after-ms keeps the SDK's backoff to a millisecond.
    return httpx2.Response(status, headers={"retry-after-ms": "1"},
                           json={"type": "error", "error": {"type": error_type, "message": text_}})


class FakeAnthropic:
    """Answers each request with the next scripted reply (the last one repeats) and keeps the requests."""

    def __init__(self, *replies: dict[str, Any] | httpx2.Response | Exception) -> None:
        self.replies = list(replies)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        reply = self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]
        if isinstance(reply, Exception):
            raise reply
        return reply if isinstance(reply, httpx2.Response) else httpx2.Response(200, json=reply)

    def body(self, index: int = -1) -> dict[str, Any]:
        return json.loads(self.requests[index].content)


def backend_for(api: FakeAnthropic, **options: Any) -> AnthropicBackend:
    settings = {"max_tokens": 700, "timeout_s": 12, "max_retries": 2, **options}
    return AnthropicBackend(api_key=API_KEY, model=MODEL,
                            http_client=httpx2.Client(transport=httpx2.MockTransport(api)), **settings)


GOOD_GENERATE = {"answer": ANSWER, "citations": [
    {"document": 1, "quote": "The brake check runs every 8 hours of operation."}]}
GOOD_REFLECT = {"answer_grounded": True, "hallucination_detected": False, "reflection_score": 0.9,
                "sources_cited": ["1"], "reflection_reason": "The interval is stated in Document 1.",
                "needs_regeneration": False}


# --- each operation: valid tool output becomes the interface's objects ------------------------------------------


def test_generate_sends_a_forced_tool_request_and_maps_citations_to_chunks():
    api = FakeAnthropic(message(tool_use("submit_answer", GOOD_GENERATE)))
    backend = backend_for(api)

    generation = backend.generate(QUESTION, HITS)

    assert generation == Generation(answer=ANSWER, citations=(Citation(
        marker=1, chunk_id=101, document_id=11, external_id="brake-check-procedure",
        quote="The brake check runs every 8 hours of operation."),))
    (request,) = api.requests
    body = api.body()
    assert request.method == "POST" and request.url.path == "/v1/messages"
    # anthropic 2.x sends the key as a bearer token (1.x and earlier used an x-api-key header).
    assert request.headers["authorization"] == f"Bearer {API_KEY}" and "x-api-key" not in request.headers
    assert body["model"] == MODEL and body["max_tokens"] == 700 and body["temperature"] == 0.0
    assert body["tool_choice"] == {"type": "tool", "name": "submit_answer"}
    (tool,) = body["tools"]
    assert tool["name"] == "submit_answer"
    assert set(tool["input_schema"]["required"]) == {"answer", "citations"}
    prompt = body["messages"][0]["content"]
    assert body["messages"][0]["role"] == "user"
    assert QUESTION in prompt and HITS[0].text in prompt and "Document 3: Glossary" in prompt
    assert "[n]" in body["system"]
    (call,) = backend.log.calls
    assert (call.backend, call.model, call.operation, call.outcome, call.cached) == (
        "anthropic", MODEL, "generate", "ok", False)
    assert call.prompt_version == PROMPT_VERSIONS["generate"] and call.temperature == 0.0
    assert (call.input_tokens, call.output_tokens) == (812, 64) and call.latency_ms > 0 and call.cache_key


@pytest.mark.parametrize(("operation", "call", "tool_name", "tool_input", "expected", "in_prompt"), [
    ("reflect", lambda b: b.reflect(QUESTION, ANSWER, HITS), "submit_reflection", GOOD_REFLECT,
     Reflection(answer_grounded=True, hallucination_detected=False, reflection_score=0.9, sources_cited=("1",),
                reflection_reason="The interval is stated in Document 1.", needs_regeneration=False),
     [QUESTION, ANSWER, HITS[1].text]),
    ("grade", lambda b: b.grade(QUESTION, ANSWER), "submit_grade",
     {"score": 4, "gaps": ["what SRVO-062 means"], "refinements": ["SRVO-062 brake alarm meaning"]},
     Grade(score=4, gaps=("what SRVO-062 means",), refinements=("SRVO-062 brake alarm meaning",)),
     [QUESTION, ANSWER]),
    ("identify_gaps", lambda b: b.identify_gaps(QUESTION, ANSWER, HITS), "submit_gaps",
     {"gaps": ["the steps of the brake check"]}, ["the steps of the brake check"], [QUESTION, ANSWER, HITS[0].text]),
    ("refine_query", lambda b: b.refine_query(QUESTION, reason="no interval for collaborative robots",
                                              gaps=("the collaborative robot interval",), expansion_terms=("cobot", "ISO-10218")),
     "submit_query", {"query": "brake check interval collaborative robot"}, "brake check interval collaborative robot",
     [QUESTION, "no interval for collaborative robots", "- the collaborative robot interval", "cobot, ISO-10218"]),
    ("decompose", lambda b: b.decompose(QUESTION), "submit_sub_queries",
     {"sub_queries": ["What is the brake check?", "What interval is required?"]},
     ["What is the brake check?", "What interval is required?"], [QUESTION]),
])
def test_each_operation_parses_its_tool_output(operation, call, tool_name, tool_input, expected, in_prompt):
    api = FakeAnthropic(message(tool_use(tool_name, tool_input)))
    backend = backend_for(api)

    assert call(backend) == expected

    body = api.body()
    assert body["tool_choice"] == {"type": "tool", "name": tool_name}
    assert [t["name"] for t in body["tools"]] == [tool_name]
    assert all(part in body["messages"][0]["content"] for part in in_prompt)
    (logged,) = backend.log.calls
    assert (logged.operation, logged.prompt_version, logged.outcome) == (operation, PROMPT_VERSIONS[operation], "ok")


def test_refine_query_prompt_names_only_the_inputs_it_was_given():
    api = FakeAnthropic(message(tool_use("submit_query", {"query": "brake check interval"})))
    backend = backend_for(api)

    backend.refine_query(QUESTION, reason="", gaps=(), expansion_terms=())
    assert api.body()["messages"][0]["content"] == f"Original query: {QUESTION}"
    backend.refine_query(QUESTION, reason="  answer does not mention 'interval'  ", gaps=("interval", "SRVO-062"),
                         expansion_terms=())
    assert api.body()["messages"][0]["content"] == (
        f"Original query: {QUESTION}\n\nWhy the last answer fell short: answer does not mention 'interval'\n\n"
        "Information the answer is missing:\n- interval\n- SRVO-062")


def test_grade_label_comes_from_the_score():
    api = FakeAnthropic(message(tool_use("submit_grade", {"score": 5, "gaps": [], "refinements": []})))
    assert backend_for(api).grade(QUESTION, ANSWER).label == "EXCELLENT"


# --- malformed output is an error, never a default ---------------------------------------------------------------


@pytest.mark.parametrize(("operation", "reply", "says"), [
    ("generate", message({"type": "text", "text": "The brake check runs every 8 hours."}, stop_reason="end_turn"),
     "no submit_answer tool call"),
    ("generate", message(tool_use("submit_answer", {"answer": ANSWER})), "missing citations"),
    ("generate", message(tool_use("submit_answer", {**GOOD_GENERATE, "citations": [{"document": 9, "quote": "x"}]})),
     "document is 9, but only 3 documents"),
    ("generate", message(tool_use("submit_grade", {"score": 3, "gaps": [], "refinements": []})),
     "expected one submit_answer tool call, got submit_grade"),
    ("generate", message(tool_use("submit_answer", {"answer": ANSWER, "citations": []}), stop_reason="max_tokens"),
     "cut off by max_tokens"),
    ("reflect", message(tool_use("submit_reflection", {**GOOD_REFLECT, "reflection_score": 1.7})),
     "reflection_score is 1.7, outside 0..1"),
    ("reflect", message(tool_use("submit_reflection", {**GOOD_REFLECT, "answer_grounded": "yes"})),
     "answer_grounded must be true or false"),
    ("reflect", message(tool_use("submit_reflection", {**GOOD_REFLECT, "sources_cited": ["7"]})),
     "not a Document number 1..3"),
    ("grade", message(tool_use("submit_grade", {"score": "4", "gaps": [], "refinements": []})),
     "score must be an integer"),
    ("grade", message(tool_use("submit_grade", {"score": 0, "gaps": [], "refinements": []})), "outside 1..5"),
    ("grade", message(tool_use("submit_grade", {"score": True, "gaps": [], "refinements": []})),
     "score must be an integer"),
    ("decompose", message(tool_use("submit_sub_queries", {"sub_queries": []})), "has 0 items"),
    ("refine_query", message(tool_use("submit_query", {"query": "  "})), "query is blank"),
    ("refine_query", message(tool_use("submit_query", {"query": "q", "why": "extra"})), "unexpected field(s) why"),
])
def test_malformed_output_raises_and_is_logged_as_an_error(operation, reply, says):
    backend = backend_for(FakeAnthropic(reply))
    run = {
        "generate": lambda: backend.generate(QUESTION, HITS),
        "reflect": lambda: backend.reflect(QUESTION, ANSWER, HITS),
        "grade": lambda: backend.grade(QUESTION, ANSWER),
        "decompose": lambda: backend.decompose(QUESTION),
        "refine_query": lambda: backend.refine_query(QUESTION, reason="feedback", gaps=(), expansion_terms=()),
    }[operation]

    with pytest.raises(LLMError) as caught:
        run()

    assert caught.value.kind == "malformed"
    assert says in str(caught.value)
    (call,) = backend.log.calls
    assert call.outcome == "error" and says in (call.error or "") and call.operation == operation
    assert (call.input_tokens, call.output_tokens) == (812, 64)  # the malformed answer was still paid for


# --- failures the SDK reports, after its own retries -------------------------------------------------------------


def test_rate_limit_then_success_is_one_result_after_the_sdk_retry():
    api = FakeAnthropic(api_error(429, "rate_limit_error", "Number of requests has exceeded your rate limit"),
                        message(tool_use("submit_query", {"query": "brake check interval"})))
    backend = backend_for(api)

    assert backend.refine_query(QUESTION, reason="feedback", gaps=(), expansion_terms=()) == "brake check interval"

    assert len(api.requests) == 2
    (call,) = backend.log.calls
    assert call.outcome == "ok"


def test_persistent_rate_limit_is_a_rate_limit_error():
    api = FakeAnthropic(api_error(429, "rate_limit_error", "Number of requests has exceeded your rate limit"))
    backend = backend_for(api)

    with pytest.raises(LLMError) as caught:
        backend.decompose(QUESTION)

    assert caught.value.kind == "rate_limit" and len(api.requests) == 3
    assert backend.log.calls[0].outcome == "error"


def test_persistent_server_error_is_an_api_error_after_max_retries():
    api = FakeAnthropic(api_error(500, "api_error", "Internal server error"))
    backend = backend_for(api, max_retries=3)

    with pytest.raises(LLMError) as caught:
        backend.generate(QUESTION, HITS)

    assert caught.value.kind == "api" and "HTTP 500" in str(caught.value)
    assert len(api.requests) == 4  # max_retries + 1
    assert isinstance(caught.value.__cause__, Exception)  # raised `from` the SDK error
    (call,) = backend.log.calls
    assert call.outcome == "error" and "HTTP 500" in (call.error or "")


def test_read_timeout_is_a_timeout_error():
    # max_retries=0: the SDK retries timeouts too, but with no retry-after header it would back off for real.
    api = FakeAnthropic(httpx2.ReadTimeout("timed out"))
    backend = backend_for(api, max_retries=0)

    with pytest.raises(LLMError) as caught:
        backend.grade(QUESTION, ANSWER)

    assert caught.value.kind == "timeout" and "12 s" in str(caught.value)
    assert len(api.requests) == 1
    assert backend.log.calls[0].outcome == "error"


def test_refusal_stop_reason_is_a_refusal_error():
    api = FakeAnthropic(message(stop_reason="refusal", stop_details={
        "type": "refusal", "category": None, "explanation": "This request falls outside the usage policy."}))
    backend = backend_for(api)

    with pytest.raises(LLMError) as caught:
        backend.generate(QUESTION, HITS)

    assert caught.value.kind == "refusal" and "outside the usage policy" in str(caught.value)
    assert backend.log.calls[0].outcome == "error"


# --- the API key stays secret ------------------------------------------------------------------------------------


def test_api_key_never_appears_in_errors_calls_or_logs(caplog):
    caplog.set_level(logging.DEBUG)
    api = FakeAnthropic(message(tool_use("submit_query", {"query": "brake check interval"})),
                        api_error(401, "authentication_error", "invalid x-api-key"),
                        api_error(500, "api_error", "Internal server error"))
    backend = backend_for(api, max_retries=0)

    backend.refine_query(QUESTION, reason="feedback", gaps=(), expansion_terms=())
    errors = []
    for _ in range(2):
        with pytest.raises(LLMError) as caught:
            backend.decompose(QUESTION)
        errors.append(caught.value)

    assert API_KEY in api.requests[0].headers["authorization"]  # it was sent, so there was something to leak
    assert "Check ANTHROPIC_API_KEY" in str(errors[0])
    texts = [str(e) for e in errors] + [repr(e) for e in errors] + [repr(backend)]
    texts += [json.dumps(call.to_dict()) for call in backend.log.calls]
    texts += [record.getMessage() for record in caplog.records]
    assert caplog.records  # the SDK's debug logging was captured
    assert not [t for t in texts if API_KEY in t]


def test_api_key_echoed_by_the_server_is_scrubbed_from_the_error():
    api = FakeAnthropic(api_error(401, "authentication_error", f"invalid x-api-key: {API_KEY}"))
    backend = backend_for(api, max_retries=0)

    with pytest.raises(LLMError) as caught:
        backend.decompose(QUESTION)

    assert API_KEY not in str(caught.value) and "[redacted]" in str(caught.value)
    assert API_KEY not in (backend.log.calls[0].error or "")


# --- construction and registry -----------------------------------------------------------------------------------


def test_registered_by_name_and_labelled_with_its_model():
    backend = create_backend("anthropic", api_key=API_KEY, model="claude-haiku-4-5")
    assert isinstance(backend, AnthropicBackend)
    assert backend.is_llm and backend.name == "anthropic" and backend.model == "claude-haiku-4-5"
    assert backend.label == "Claude (claude-haiku-4-5)"


def test_missing_key_is_an_input_error():
    with pytest.raises(InputError, match="ANTHROPIC_API_KEY"):
        AnthropicBackend(api_key="", model=MODEL)


# --- the response cache ------------------------------------------------------------------------------------------


def test_cache_key_is_canonical_and_covers_the_payload():
    payload = {"messages": [{"role": "user", "content": "q"}], "temperature": 0.0, "max_tokens": 100}
    same = {"max_tokens": 100, "temperature": 0.0, "messages": [{"content": "q", "role": "user"}]}
    assert cache_key(MODEL, "generate-v1", "generate", payload) == cache_key(MODEL, "generate-v1", "generate", same)
    assert cache_key(MODEL, "generate-v1", "generate", payload) != cache_key(MODEL, "generate-v2", "generate", payload)
    assert cache_key(MODEL, "generate-v1", "generate", payload) != cache_key(
        MODEL, "generate-v1", "generate", {**payload, "max_tokens": 200})


def test_second_identical_generate_is_served_from_the_database_cache(clean_db, settings, engine):
    api = FakeAnthropic(message(tool_use("submit_answer", GOOD_GENERATE)))
    backend = backend_for(api, cache=DatabaseCache(settings))

    first = backend.generate(QUESTION, HITS)
    second = backend.generate(QUESTION, HITS)

    assert second == first and len(api.requests) == 1
    fresh, cached = backend.log.calls
    assert (fresh.cached, cached.cached) == (False, True) and cached.outcome == "ok"
    assert cached.cache_key == fresh.cache_key
    assert (cached.latency_ms, cached.input_tokens, cached.output_tokens) == (0.0, 0, 0)
    with engine.connect() as conn:
        (row,) = conn.execute(select(LLMCacheRow.__table__)).mappings().all()
    assert row["cache_key"] == fresh.cache_key and row["response"] == GOOD_GENERATE
    assert (row["backend"], row["model"], row["operation"], row["prompt_version"]) == (
        "anthropic", MODEL, "generate", PROMPT_VERSIONS["generate"])
    assert (row["input_tokens"], row["output_tokens"]) == (812, 64)


def test_a_different_chunk_text_is_a_different_cache_entry(clean_db, settings):
    api = FakeAnthropic(message(tool_use("submit_answer", GOOD_GENERATE)))
    backend = backend_for(api, cache=DatabaseCache(settings))
    edited = (dataclasses.replace(HITS[0], text=HITS[0].text + " Log each result."), *HITS[1:])

    backend.generate(QUESTION, HITS)
    backend.generate(QUESTION, edited)

    assert len(api.requests) == 2
    first, second = backend.log.calls
    assert not second.cached and first.cache_key != second.cache_key


def test_malformed_responses_are_not_cached(clean_db, settings, engine):
    api = FakeAnthropic(message(tool_use("submit_reflection", {**GOOD_REFLECT, "reflection_score": 1.7})),
                        message(tool_use("submit_reflection", GOOD_REFLECT)))
    backend = backend_for(api, cache=DatabaseCache(settings))

    with pytest.raises(LLMError):
        backend.reflect(QUESTION, ANSWER, HITS)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM llm_cache")).scalar_one() == 0

    assert backend.reflect(QUESTION, ANSWER, HITS).reflection_score == 0.9
    assert len(api.requests) == 2


def test_a_cached_response_that_no_longer_validates_is_asked_again(clean_db, settings, engine):
    api = FakeAnthropic(message(tool_use("submit_reflection", GOOD_REFLECT)))
    backend = backend_for(api, cache=DatabaseCache(settings))
    backend.reflect(QUESTION, ANSWER, HITS)
    with engine.begin() as conn:
        conn.execute(text("UPDATE llm_cache SET response = jsonb_set(response, '{reflection_score}', '3')"))

    assert backend.reflect(QUESTION, ANSWER, HITS).reflection_score == 0.9

    assert len(api.requests) == 2 and not backend.log.calls[-1].cached
