"""Claude as an answer backend: one forced tool call per operation, validated, cached and logged."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
from anthropic.types import Message, ToolChoiceToolParam

from services.answering.llm._claude_tools import claude_tool, tool_input
from services.answering.llm._forced_tool import ForcedToolBackend
from services.answering.llm._tools import PROMPT_VERSIONS, Tool
from services.answering.llm.base import register_backend
from services.answering.llm.cache import ResponseCache
from services.errors import InputError

__all__ = ["PROMPT_VERSIONS", "AnthropicBackend"]


def _describe_api_error(exc: Exception, operation: str, timeout_s: float,
                        retries: int) -> tuple[str, str]:
    """(kind, message) for an SDK error that survived the SDK's own retries."""
    if isinstance(exc, anthropic.APITimeoutError):
        return "timeout", (f"Claude did not answer the {operation} request within {timeout_s:g} s "
                           f"(with up to {retries} retries); try again, or raise LLM_TIMEOUT_S.")
    if isinstance(exc, anthropic.RateLimitError):
        return "rate_limit", (f"Claude's rate limit was still exceeded after {retries} retries of the {operation} "
                              "request; wait a minute and try again.")
    if isinstance(exc, anthropic.APIStatusError):
        detail = exc.api_message or exc.type or "no details"
        hint = (" Check ANTHROPIC_API_KEY." if exc.status_code in (401, 403)
                else " This model does not take a temperature; choose another LLM_MODEL."
                if exc.status_code == 400 and "temperature" in detail
                else f" Still failing after {retries} retries; try again later." if exc.status_code >= 500 else "")
        return "api", f"Claude API returned HTTP {exc.status_code} for the {operation} request: {detail}.{hint}"
    if isinstance(exc, anthropic.APIConnectionError):
        cause = type(exc.__cause__).__name__ if exc.__cause__ else "no response"
        return "api", f"Could not reach the Claude API for the {operation} request ({cause}); check the network."
    return "api", f"The Claude API call for {operation} failed: {exc}"


class AnthropicBackend(ForcedToolBackend):
    """Claude through the Messages API; the SDK retries 429/5xx/timeouts with backoff, we do not."""

    name = "anthropic"
    api_errors = (anthropic.AnthropicError,)

    def __init__(self, *, api_key: str, model: str, max_tokens: int = 1024, timeout_s: float = 60,
                 max_retries: int = 3, temperature: float = 0.0, http_client: httpx2.Client | None = None,
                 cache: ResponseCache | None = None) -> None:
        if not api_key:
            raise InputError("The Claude backend needs an API key: set ANTHROPIC_API_KEY.")
        super().__init__(model=model, max_tokens=max_tokens, temperature=temperature, cache=cache,
                         speaker="Claude", secret=api_key)
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._client = anthropic.Anthropic(api_key=api_key, timeout=timeout_s, max_retries=max_retries,
                                           http_client=http_client)

    def __repr__(self) -> str:
        return f"AnthropicBackend(model={self._model!r}, temperature={self._temperature})"

    # A ClassVar in the base; the Claude label names the configured model, so it is per instance.
    @property
    def label(self) -> str:  # type: ignore[override]
        return f"Claude ({self._model})"

    def _request(self, tool: Tool, user: str) -> dict[str, Any]:
        # This shape predates the other backends and keys every cached Claude answer: keep it.
        return {"system": tool.system, "messages": [{"role": "user", "content": user}], "tool": claude_tool(tool)}

    def _send(self, tool: Tool, request: dict[str, Any]) -> Message:
        tool_choice: ToolChoiceToolParam = {"type": "tool", "name": tool.name}
        # anthropic 2.x has no typed `temperature` argument, so it rides in the body; a model that
        # rejects it answers HTTP 400, which _describe_api_error names.
        return self._client.messages.create(
            model=self._model, max_tokens=self._max_tokens, system=request["system"], messages=request["messages"],
            tools=[request["tool"]], tool_choice=tool_choice, extra_body={"temperature": self._temperature},
        )

    def _usage(self, response: Message) -> tuple[int, int]:
        return response.usage.input_tokens, response.usage.output_tokens

    def _tool_input(self, response: Message, tool: Tool) -> dict[str, Any]:
        return tool_input(response, tool)

    def _describe_error(self, exc: Exception, operation: str) -> tuple[str, str]:
        return _describe_api_error(exc, operation, self._timeout_s, self._max_retries)


register_backend("anthropic", AnthropicBackend)
