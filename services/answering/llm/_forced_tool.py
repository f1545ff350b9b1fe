"""What every LLM backend shares: each operation is one forced tool call (services.answering.llm._tools),
its input parsed into the interface's objects, served from the response cache when possible and
logged either way. A backend adds only how its API is asked and how its reply is read."""

from __future__ import annotations

import abc
import logging
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, ClassVar, TypeVar

from services.answering.llm._tools import TOOLS, Malformed, Refused, Tool, check
from services.answering.llm.base import (
    AnswerBackend,
    Citation,
    Generation,
    Grade,
    LLMCall,
    Reflection,
    chunk_block,
    gap_note,
)
from services.answering.llm.cache import ResponseCache, cache_key
from services.domain import Hit
from services.errors import InputError, LLMError

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


class ForcedToolBackend(AnswerBackend):
    """The six operations over one abstract round trip: _request, _send, _usage, _tool_input."""

    is_llm = True
    api_errors: ClassVar[tuple[type[Exception], ...]]  # what the SDK raises; _describe_error names it

    def __init__(self, *, model: str, max_tokens: int, temperature: float, cache: ResponseCache | None,
                 speaker: str, secret: str | None) -> None:
        super().__init__()
        if not 0.0 <= temperature <= 1.0:
            raise InputError(f"temperature must be between 0 and 1, got {temperature}")
        self._model = model
        self._max_tokens = max_tokens
        self._temperature = temperature
        self._cache = cache
        self._speaker = speaker  # who answered, as error messages name it ("Claude")
        self._secret = secret  # kept only to scrub it from error text

    @property
    def model(self) -> str:
        return self._model

    def generate(self, query: str, chunks: Sequence[Hit]) -> Generation:
        user = f"Question: {query}\n\nDocuments:\n\n{chunk_block(chunks)}{gap_note(chunks)}"
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

    # --- what each API does its own way ---------------------------------------------------------

    @abc.abstractmethod
    def _request(self, tool: Tool, user: str) -> dict[str, Any]:
        """The request's prompt and tool parts, as sent; with the model, temperature and max_tokens
        they are the cache key, so they must hold everything else that shapes the answer."""

    @abc.abstractmethod
    def _send(self, tool: Tool, request: dict[str, Any]) -> Any:
        """The API's response to `request`; raises one of `api_errors` when there is none."""

    @abc.abstractmethod
    def _usage(self, response: Any) -> tuple[int, int]:
        """(input, output) tokens, read before validation: a malformed answer is still paid for."""

    @abc.abstractmethod
    def _tool_input(self, response: Any, tool: Tool) -> dict[str, Any]:
        """The validated tool input; raises Malformed, or Refused when the model declined."""

    @abc.abstractmethod
    def _describe_error(self, exc: Exception, operation: str) -> tuple[str, str]:
        """(LLMError kind, message) for one of `api_errors` that survived the SDK's retries."""

    # --- the round trip, cached and logged ------------------------------------------------------

    def _ask(self, operation: str, user: str, chunks: Sequence[Hit], parse: Callable[[dict[str, Any]], T]) -> T:
        """One forced tool call: from the cache when possible, else from the model; logged either way."""
        tool = TOOLS[operation]
        request = self._request(tool, user)
        # The rendered request holds the query, answer, chunk titles and texts; ids map citations back.
        key = cache_key(self._model, tool.version, operation, {
            **request, "chunk_ids": [c.chunk_id for c in chunks], "temperature": self._temperature,
            "max_tokens": self._max_tokens,
        })
        record = partial(LLMCall, self.name, self._model, operation, tool.version, self._temperature, cache_key=key)

        cached = self._cache.get(key) if self._cache is not None else None
        if cached is not None:
            try:
                check(cached.response, tool.schema, "input")
                result = parse(cached.response)
            except Malformed as exc:  # stored under an older validator; ask again
                log.warning("ignoring cached %s response %s: %s", operation, key[:12], exc)
            else:
                self.log.record(record(cached=True))  # nothing was sent, so nothing was spent
                return result

        started = time.perf_counter()
        tokens = (0, 0)
        try:
            response = self._send(tool, request)
            tokens = self._usage(response)
            data = self._tool_input(response, tool)
            result = parse(data)
        except self.api_errors as exc:
            kind, message = self._describe_error(exc, operation)
            raise self._failed(record, started, tokens, kind, message) from self._scrubbed(exc)
        except Refused as exc:
            raise self._failed(record, started, tokens, "refusal",
                               f"{self._speaker} declined the {operation} request: {exc}") from exc
        except Malformed as exc:
            raise self._failed(record, started, tokens, "malformed",
                               f"{self._speaker}'s {operation} response was malformed: {exc}") from exc

        self.log.record(record(input_tokens=tokens[0], output_tokens=tokens[1],
                               latency_ms=(time.perf_counter() - started) * 1000))
        if self._cache is not None:
            self._cache.put(key, backend=self.name, model=self._model, operation=operation,
                            prompt_version=tool.version, response=data, input_tokens=tokens[0],
                            output_tokens=tokens[1])
        return result

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, "[redacted]") if self._secret else text

    def _scrubbed(self, exc: Exception) -> Exception:
        """The SDK error with the API key taken out of its text: a logged traceback prints the
        cause too, and an error body may echo the key back."""
        exc.args = tuple(self._scrub(a) if isinstance(a, str) else a for a in exc.args)
        if isinstance(getattr(exc, "message", None), str):
            exc.message = self._scrub(exc.message)  # type: ignore[attr-defined]
        return exc

    def _failed(self, record: Callable[..., LLMCall], started: float, tokens: tuple[int, int], kind: str,
                message: str) -> LLMError:
        """Log the failed call and build its error, with the API key scrubbed from the text."""
        message = self._scrub(message)
        self.log.record(record(input_tokens=tokens[0], output_tokens=tokens[1],
                               latency_ms=(time.perf_counter() - started) * 1000, outcome="error",
                               error=message[:500]))
        return LLMError(message, kind=kind)
