"""Any OpenAI-compatible chat-completions server (Ollama, llama.cpp's server, vLLM) as an answer
backend, for teams whose text must not leave the building: the same forced tool calls as Claude
(services.answering.llm._tools), sent as OpenAI function tools, validated, cached and logged."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
from openai.types.chat import ChatCompletion, ChatCompletionFunctionToolParam

from services.answering.llm._forced_tool import ForcedToolBackend
from services.answering.llm._tools import Malformed, Refused, Tool, check
from services.answering.llm.base import register_backend
from services.answering.llm.cache import ResponseCache
from services.errors import InputError

__all__ = ["OpenAICompatibleBackend", "function_tool", "unreachable_reason"]

# Local servers ignore the key, but the SDK will not start without one.
PLACEHOLDER_API_KEY = "no-key-needed"


def function_tool(tool: Tool) -> ChatCompletionFunctionToolParam:
    return {"type": "function", "function": {"name": tool.name, "description": tool.description,
                                             "parameters": tool.schema}}


def _arguments(text: str, tool: Tool) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Malformed(f"the {tool.name} arguments are not valid JSON ({exc.msg} at character {exc.pos}): "
                        f"{text[:120]!r}") from None


def tool_input(response: ChatCompletion, tool: Tool) -> dict[str, Any]:
    """The validated input of the one forced tool call in `response`."""
    if not response.choices:
        raise Malformed("the response has no choices")
    choice = response.choices[0]
    message = choice.message
    if message.refusal:
        raise Refused(message.refusal)
    if choice.finish_reason == "content_filter":
        raise Refused("the server's content filter withheld the answer")
    if choice.finish_reason == "length":
        raise Malformed(f"the {tool.name} call was cut off by max_tokens; raise LLM_MAX_TOKENS")
    calls = message.tool_calls or []
    if calls:
        call = calls[0]
        if len(calls) != 1 or call.type != "function" or call.function.name != tool.name:
            names = [c.function.name if c.type == "function" else f"{c.custom.name} (custom)" for c in calls]
            raise Malformed(f"expected one {tool.name} tool call, got {', '.join(names)}")
        data = _arguments(call.function.arguments, tool)
    else:
        # A server (or model) without tool support may ignore the tools and write the JSON as the
        # message text; a JSON object there is taken as the tool input and validated like one.
        # Anything else, prose or a fenced code block, is malformed.
        content = (message.content or "").strip()
        if not content.startswith("{"):
            raise Malformed(f"no {tool.name} tool call in the response (finish_reason {choice.finish_reason!r}); "
                            f"it said: {content[:120]!r}")
        data = _arguments(content, tool)
    check(data, tool.schema, "input")
    return dict(data)


def _detail(exc: openai.APIStatusError) -> str:
    """The server's own words: OpenAI, llama.cpp and vLLM send {"message": ...}, Ollama a string."""
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    if isinstance(body, str) and body.strip():
        return body.strip()[:300]
    return "no details"


def _describe_api_error(exc: Exception, operation: str, base_url: str, timeout_s: float,
                        retries: int) -> tuple[str, str]:
    """(kind, message) for an SDK error that survived the SDK's own retries."""
    where = f"the model server at {base_url}"
    if isinstance(exc, openai.APITimeoutError):
        return "timeout", (f"{where} did not answer the {operation} request within {timeout_s:g} s (with up to "
                           f"{retries} retries); a model on CPU may need longer: raise LLM_TIMEOUT_S.")
    if isinstance(exc, openai.RateLimitError):
        return "rate_limit", f"{where} was still busy (HTTP 429) after {retries} retries of the {operation} request."
    if isinstance(exc, openai.APIStatusError):
        detail = _detail(exc)
        hint = (" Check LLM_API_KEY." if exc.status_code in (401, 403)
                else " Check that LLM_MODEL names a model the server serves." if exc.status_code == 404
                else " Does the server support tool calling? (llama.cpp's server needs --jinja.)"
                if exc.status_code in (400, 422, 500) and "tool" in detail.lower()
                else f" Still failing after {retries} retries." if exc.status_code >= 500 else "")
        return "api", f"{where} returned HTTP {exc.status_code} for the {operation} request: {detail}.{hint}"
    if isinstance(exc, openai.APIConnectionError):
        cause = type(exc.__cause__).__name__ if exc.__cause__ else "no response"
        return "api", f"Could not reach {where} for the {operation} request ({cause}); is it running? Check LLM_BASE_URL."
    return "api", f"The call to {where} for {operation} failed: {exc}"


class OpenAICompatibleBackend(ForcedToolBackend):
    """A chat-completions endpoint; the SDK retries 429/5xx/timeouts with backoff, we do not."""

    name = "openai-compatible"
    api_errors = (openai.OpenAIError,)

    def __init__(self, *, base_url: str, model: str, api_key: str | None = None, max_tokens: int = 1024,
                 timeout_s: float = 60, max_retries: int = 3, temperature: float = 0.0,
                 http_client: httpx2.Client | None = None, cache: ResponseCache | None = None) -> None:
        if not base_url.strip():
            raise InputError("The OpenAI-compatible backend needs the server's address: set LLM_BASE_URL "
                             "(e.g. http://localhost:11434/v1 for Ollama).")
        if not model.strip():
            raise InputError("The OpenAI-compatible backend needs a model name: set LLM_MODEL to a model the "
                             "server serves.")
        super().__init__(model=model, max_tokens=max_tokens, temperature=temperature, cache=cache,
                         speaker=f"The model {model!r}", secret=api_key)
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._client = openai.OpenAI(api_key=api_key or PLACEHOLDER_API_KEY, base_url=base_url, timeout=timeout_s,
                                     max_retries=max_retries, http_client=http_client)

    def __repr__(self) -> str:
        return f"OpenAICompatibleBackend(model={self._model!r}, base_url={self._base_url!r})"

    # A ClassVar in the base; this label names the configured model, so it is per instance.
    @property
    def label(self) -> str:  # type: ignore[override]
        return f"OpenAI-compatible ({self._model})"

    def _request(self, tool: Tool, user: str) -> dict[str, Any]:
        return {
            "messages": [{"role": "system", "content": tool.system}, {"role": "user", "content": user}],
            "tools": [function_tool(tool)],
            "tool_choice": {"type": "function", "function": {"name": tool.name}},
        }

    def _send(self, tool: Tool, request: dict[str, Any]) -> ChatCompletion:
        # max_tokens, not OpenAI's newer max_completion_tokens: it is the one local servers read.
        return self._client.chat.completions.create(
            model=self._model, max_tokens=self._max_tokens, temperature=self._temperature,
            messages=request["messages"], tools=request["tools"], tool_choice=request["tool_choice"],
        )

    def _usage(self, response: ChatCompletion) -> tuple[int, int]:
        usage = response.usage  # some servers leave it out
        return (usage.prompt_tokens, usage.completion_tokens) if usage else (0, 0)

    def _tool_input(self, response: ChatCompletion, tool: Tool) -> dict[str, Any]:
        return tool_input(response, tool)

    def _describe_error(self, exc: Exception, operation: str) -> tuple[str, str]:
        return _describe_api_error(exc, operation, self._base_url, self._timeout_s, self._max_retries)


def unreachable_reason(base_url: str | None, *, api_key: str | None = None, timeout_s: float = 5.0,
                       http_client: httpx2.Client | None = None) -> str | None:
    """Why no OpenAI-compatible server answers at `base_url` (None when one does): a quick
    GET /models, which Ollama, llama.cpp's server and vLLM all serve, with no retries."""
    if not base_url:
        return "LLM_BASE_URL is not set"
    try:
        with openai.OpenAI(api_key=api_key or PLACEHOLDER_API_KEY, base_url=base_url, timeout=timeout_s,
                           max_retries=0, http_client=http_client) as client:
            client.models.list()
    except openai.OpenAIError as exc:
        _, message = _describe_api_error(exc, "models", base_url, timeout_s, 0)
        return message.replace(api_key, "[redacted]") if api_key else message
    return None


register_backend("openai-compatible", OpenAICompatibleBackend)
