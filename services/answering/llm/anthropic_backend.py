"""Claude as an answer backend: one forced tool call per operation, validated, cached and logged."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import anthropic
import httpx2
from anthropic.types import ToolChoiceToolParam, UserMessageParam

from services.answering.llm._claude_tools import PROMPT_VERSIONS, TOOLS, Malformed, Refused, Tool, check, tool_input
from services.answering.llm.base import (
    AnswerBackend,
    Citation,
    Generation,
    Grade,
    LLMCall,
    Reflection,
    chunk_block,
    register_backend,
)
from services.answering.llm.cache import ResponseCache, cache_key
from services.domain import Hit
from services.errors import InputError, LLMError

__all__ = ["PROMPT_VERSIONS", "AnthropicBackend"]

log = logging.getLogger(__name__)
T = TypeVar("T")


def _to_generation(data: dict[str, Any], chunks: Sequence[Hit]) -> Generation:
    citations = []
    for i, item in enumerate(data["citations"]):
        number = int(item["document"])
        if number > len(chunks):
            raise Malformed(f"input.citations[{i}].document is {number}, but only {len(chunks)} documents were given")
        hit = chunks[number - 1]
        citations.append(Citation(marker=number, chunk_id=hit.chunk_id, document_id=hit.document_id,
                                  external_id=hit.external_id, quote=item["quote"]))
    return Generation(answer=data["answer"], citations=tuple(citations))


def _to_reflection(data: dict[str, Any], chunks: Sequence[Hit]) -> Reflection:
    for source in data["sources_cited"]:
        if not (source.isascii() and source.isdigit() and 1 <= int(source) <= len(chunks)):
            raise Malformed(f"input.sources_cited has {source!r}, not a Document number 1..{len(chunks)}")
    return Reflection(
        answer_grounded=data["answer_grounded"], hallucination_detected=data["hallucination_detected"],
        reflection_score=float(data["reflection_score"]), sources_cited=tuple(data["sources_cited"]),
        reflection_reason=data["reflection_reason"], needs_regeneration=data["needs_regeneration"],
    )


def _describe_api_error(exc: anthropic.AnthropicError, operation: str, timeout_s: float,
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


class AnthropicBackend(AnswerBackend):
    """Claude through the Messages API; the SDK retries 429/5xx/timeouts with backoff, we do not."""

    name = "anthropic"
    is_llm = True

    def __init__(self, *, api_key: str, model: str, max_tokens: int = 1024, timeout_s: float = 60,
                 max_retries: int = 3, temperature: float = 0.0, http_client: httpx2.Client | None = None,
                 cache: ResponseCache | None = None) -> None:
        super().__init__()
        if not api_key:
            raise InputError("The Claude backend needs an API key: set ANTHROPIC_API_KEY.")
        if not 0.0 <= temperature <= 1.0:
            raise InputError(f"temperature must be between 0 and 1, got {temperature}")
        self._api_key = api_key  # kept only to scrub it from error text
        self._model = model
        self._max_tokens = max_tokens
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._temperature = temperature
        self._cache = cache
        self._client = anthropic.Anthropic(api_key=api_key, timeout=timeout_s, max_retries=max_retries,
                                           http_client=http_client)

    def __repr__(self) -> str:
        return f"AnthropicBackend(model={self._model!r}, temperature={self._temperature})"

    # A ClassVar in the base; the Claude label names the configured model, so it is per instance.
    @property
    def label(self) -> str:  # type: ignore[override]
        return f"Claude ({self._model})"

    @property
    def model(self) -> str:
        return self._model

    def generate(self, query: str, chunks: Sequence[Hit]) -> Generation:
        user = f"Question: {query}\n\nDocuments:\n\n{chunk_block(chunks)}"
        return self._ask("generate", user, chunks, lambda data: _to_generation(data, chunks))

    def reflect(self, query: str, answer: str, chunks: Sequence[Hit]) -> Reflection:
        user = f"Question: {query}\n\nAnswer:\n{answer}\n\nDocuments:\n\n{chunk_block(chunks)}"
        return self._ask("reflect", user, chunks, lambda data: _to_reflection(data, chunks))

    def grade(self, query: str, answer: str) -> Grade:
        user = f"Question: {query}\n\nAnswer:\n{answer}"
        return self._ask("grade", user, (), lambda data: Grade(
            score=int(data["score"]), gaps=tuple(data["gaps"]), refinements=tuple(data["refinements"])))

    def identify_gaps(self, query: str, answer: str, chunks: Sequence[Hit]) -> list[str]:
        user = (f"Question: {query}\n\nAnswer:\n{answer}\n\n"
                f"Documents the answer was written from:\n\n{chunk_block(chunks)}")
        return self._ask("identify_gaps", user, chunks, lambda data: list(data["gaps"]))

    def refine_query(self, query: str, *, reason: str, gaps: Sequence[str], expansion_terms: Sequence[str]) -> str:
        parts = [f"Original query: {query}"]
        if reason.strip():
            parts.append(f"Why the last answer fell short: {reason.strip()}")
        if gaps:
            parts.append("Information the answer is missing:\n" + "\n".join(f"- {gap}" for gap in gaps))
        if expansion_terms:
            parts.append("Terms from the best-matching passages (use them only if they help): " + ", ".join(expansion_terms))
        return self._ask("refine_query", "\n\n".join(parts), (), lambda data: str(data["query"]).strip())

    def decompose(self, query: str) -> list[str]:
        return self._ask("decompose", f"Question: {query}", (), lambda data: list(data["sub_queries"]))

    def _ask(self, operation: str, user: str, chunks: Sequence[Hit], parse: Callable[[dict[str, Any]], T]) -> T:
        """One forced tool call: from the cache when possible, else from Claude; logged either way."""
        tool = TOOLS[operation]
        messages: list[UserMessageParam] = [{"role": "user", "content": user}]
        tool_choice: ToolChoiceToolParam = {"type": "tool", "name": tool.name}
        # The rendered request holds the query, answer, chunk titles and texts; ids map citations back.
        key = cache_key(self._model, tool.version, operation, {
            "system": tool.system, "messages": messages, "tool": tool.param(),
            "chunk_ids": [c.chunk_id for c in chunks], "temperature": self._temperature,
            "max_tokens": self._max_tokens,
        })
        record = partial(LLMCall, self.name, self._model, operation, tool.version, self._temperature, cache_key=key)

        cached = self._cache.get(key) if self._cache is not None else None
        if cached is not None:
            try:
                result = parse(self._revalidate(cached.response, tool))
            except Malformed as exc:  # stored under an older validator; ask again
                log.warning("ignoring cached %s response %s: %s", operation, key[:12], exc)
            else:
                self.log.record(record(cached=True))  # nothing was sent, so nothing was spent
                return result

        started = time.perf_counter()
        tokens = (0, 0)
        try:
            # anthropic 2.x has no typed `temperature` argument, so it rides in the body; a model that
            # rejects it answers HTTP 400, which _describe_api_error names.
            response = self._client.messages.create(
                model=self._model, max_tokens=self._max_tokens, system=tool.system, messages=messages,
                tools=[tool.param()], tool_choice=tool_choice, extra_body={"temperature": self._temperature},
            )
            tokens = (response.usage.input_tokens, response.usage.output_tokens)
            data = tool_input(response, tool)
            result = parse(data)
        except anthropic.AnthropicError as exc:
            kind, message = _describe_api_error(exc, operation, self._timeout_s, self._max_retries)
            raise self._failed(record, started, tokens, kind, message) from self._scrubbed(exc)
        except Refused as exc:
            raise self._failed(record, started, tokens, "refusal",
                               f"Claude declined the {operation} request: {exc}") from exc
        except Malformed as exc:
            raise self._failed(record, started, tokens, "malformed",
                               f"Claude's {operation} response was malformed: {exc}") from exc

        self.log.record(record(input_tokens=tokens[0], output_tokens=tokens[1],
                               latency_ms=(time.perf_counter() - started) * 1000))
        if self._cache is not None:
            self._cache.put(key, backend=self.name, model=self._model, operation=operation,
                            prompt_version=tool.version, response=data, input_tokens=tokens[0],
                            output_tokens=tokens[1])
        return result

    @staticmethod
    def _revalidate(data: dict[str, Any], tool: Tool) -> dict[str, Any]:
        check(data, tool.schema, "input")
        return data

    def _scrubbed(self, exc: anthropic.AnthropicError) -> anthropic.AnthropicError:
        """The SDK error with the API key taken out of its text: a logged traceback prints the
        cause too, and an error body may echo the key back."""
        exc.args = tuple(a.replace(self._api_key, "[redacted]") if isinstance(a, str) else a for a in exc.args)
        if isinstance(getattr(exc, "message", None), str):
            exc.message = exc.message.replace(self._api_key, "[redacted]")  # type: ignore[attr-defined]
        return exc

    def _failed(self, record: Callable[..., LLMCall], started: float, tokens: tuple[int, int], kind: str,
                message: str) -> LLMError:
        """Log the failed call and build its error, with the API key scrubbed from the text."""
        message = message.replace(self._api_key, "[redacted]")
        self.log.record(record(input_tokens=tokens[0], output_tokens=tokens[1],
                               latency_ms=(time.perf_counter() - started) * 1000, outcome="error",
                               error=message[:500]))
        return LLMError(message, kind=kind)


register_backend("anthropic", AnthropicBackend)
