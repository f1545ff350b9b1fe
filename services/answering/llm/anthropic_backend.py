"""Claude as an answer backend: one forced tool call per operation, validated, cached and logged."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

import anthropic
import httpx2
from anthropic.types import Message, TextBlock, ToolChoiceToolParam, ToolParam, ToolUseBlock, UserMessageParam

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

log = logging.getLogger(__name__)
T = TypeVar("T")

# Bump an operation's version whenever its system prompt, user message or tool schema changes.
PROMPT_VERSIONS = {
    "generate": "generate-v1",
    "reflect": "reflect-v1",
    "grade": "grade-v1",
    "identify_gaps": "identify_gaps-v1",
    "refine_query": "refine_query-v1",
    "decompose": "decompose-v1",
}


def _object(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _text(description: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "description": description}


def _texts(description: str, **limits: int) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string", "minLength": 1}, "description": description, **limits}


def _flag(description: str) -> dict[str, Any]:
    return {"type": "boolean", "description": description}


@dataclass(frozen=True)
class _Tool:
    """The tool Claude is forced to call for one operation, and the instructions around it."""

    operation: str
    name: str
    description: str
    schema: dict[str, Any]
    system: str

    @property
    def version(self) -> str:
        return PROMPT_VERSIONS[self.operation]

    def param(self) -> ToolParam:
        return {"name": self.name, "description": self.description, "input_schema": self.schema}


_TOOLS = {tool.operation: tool for tool in (
    _Tool("generate", "submit_answer", "Submit the answer and the passages it cites.", _object(
        answer=_text("The answer, citing the documents it relies on as [n], n being the Document number."),
        citations={"type": "array", "description": "One entry per cited passage.", "items": _object(
            document={"type": "integer", "minimum": 1, "description": "The Document number cited as [n]."},
            quote=_text("The supporting sentence(s), copied exactly as they appear in that document."),
        )},
    ), "You answer questions using only the numbered documents you are given. Cite every claim as [n], "
       "n being the number of the Document that supports it. If the documents do not contain the answer, "
       "say so plainly and cite nothing. Submit the answer with the submit_answer tool."),
    _Tool("reflect", "submit_reflection", "Submit the grounding assessment of the answer.", _object(
        answer_grounded=_flag("True if the documents support the answer's claims."),
        hallucination_detected=_flag("True if the answer states anything the documents do not support."),
        reflection_score={"type": "number", "minimum": 0, "maximum": 1,
                          "description": "Overall grounding: 1.0 every claim supported, 0.0 unsupported."},
        sources_cited=_texts('Numbers of the Documents that support the answer, as strings, e.g. ["1", "3"].'),
        reflection_reason=_text("A short explanation of the assessment."),
        needs_regeneration=_flag("True if the answer should be regenerated from better retrieval."),
    ), "You check whether an answer is grounded in the numbered documents it was written from. Judge only "
       "against those documents, not your own knowledge. Submit your assessment with the submit_reflection tool."),
    _Tool("grade", "submit_grade", "Submit the adequacy grade of the answer.", _object(
        score={"type": "integer", "minimum": 1, "maximum": 5, "description": "Adequacy, 1-5, per the rubric."},
        gaps=_texts("Specific information the answer is missing (empty if none)."),
        refinements=_texts("Follow-up search queries that would fill the gaps (empty if none)."),
    ), "You grade how adequately an answer addresses a question, on this scale:\n"
       "5 = fully answers with specific, actionable details\n4 = mostly answers, minor gaps\n"
       "3 = partially answers, significant gaps\n2 = tangentially relevant\n1 = does not answer the question\n"
       "Submit the grade with the submit_grade tool."),
    _Tool("identify_gaps", "submit_gaps", "Submit the information gaps in the answer.", _object(
        gaps=_texts("Concrete pieces of information missing from the answer; empty if it is complete."),
    ), "You find what specific information is missing for an answer to fully address a question. List only "
       "concrete gaps (e.g. 'the torque value for step 3'), never vague suggestions. If the answer is complete, "
       "submit an empty list. Submit them with the submit_gaps tool."),
    _Tool("refine_query", "submit_query", "Submit the refined search query.", _object(
        query=_text("One search query, ready to run."),
    ), "You rewrite a search query so that a document search finds what the previous attempt missed. Keep the "
       "original intent, add the specific terms the feedback calls for, and submit one query with the "
       "submit_query tool."),
    _Tool("decompose", "submit_sub_queries", "Submit the sub-questions.", _object(
        sub_queries=_texts("Self-contained sub-questions, each answerable by one search.", minItems=1, maxItems=6),
    ), "You break a complex question into 2 to 4 self-contained sub-questions that can each be answered by a "
       "separate document search. Submit them with the submit_sub_queries tool."),
)}


class _Malformed(Exception):
    """A response that does not carry a valid tool call; becomes LLMError(kind="malformed")."""


class _Refused(Exception):
    """Claude declined the request; becomes LLMError(kind="refusal")."""


def _check(value: Any, schema: dict[str, Any], path: str) -> None:
    """Raise _Malformed naming the first place `value` breaks `schema` (the subset our tools use)."""
    kind = schema["type"]
    shown = repr(value)[:80]
    if kind == "object":
        if not isinstance(value, dict):
            raise _Malformed(f"{path} must be an object, got {shown}")
        missing = [name for name in schema["required"] if name not in value]
        if missing:
            raise _Malformed(f"{path} is missing {', '.join(missing)}")
        unknown = sorted(set(value) - set(schema["properties"]))
        if unknown:
            raise _Malformed(f"{path} has unexpected field(s) {', '.join(unknown)}")
        for name, field_schema in schema["properties"].items():
            _check(value[name], field_schema, f"{path}.{name}")
    elif kind == "array":
        if not isinstance(value, list):
            raise _Malformed(f"{path} must be a list, got {shown}")
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", math.inf):
            raise _Malformed(f"{path} has {len(value)} items, expected {schema.get('minItems', 0)}"
                             f"..{schema.get('maxItems', 'any')}")
        for i, item in enumerate(value):
            _check(item, schema["items"], f"{path}[{i}]")
    elif kind == "string":
        if not isinstance(value, str):
            raise _Malformed(f"{path} must be a string, got {shown}")
        if schema.get("minLength") and not value.strip():
            raise _Malformed(f"{path} is blank")
    elif kind == "boolean":
        if not isinstance(value, bool):
            raise _Malformed(f"{path} must be true or false, got {shown}")
    else:  # integer or number; bool is an int subclass in Python but not a JSON number
        number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not number or (kind == "integer" and not float(value).is_integer()):
            raise _Malformed(f"{path} must be {'an integer' if kind == 'integer' else 'a number'}, got {shown}")
        low, high = schema.get("minimum", -math.inf), schema.get("maximum", math.inf)
        if not low <= value <= high:
            raise _Malformed(f"{path} is {value}, outside {low}..{high}")


def _tool_input(response: Message, tool: _Tool) -> dict[str, Any]:
    """The validated input of the one forced tool call in `response`."""
    if response.stop_reason == "refusal":
        details = response.stop_details
        raise _Refused(details.explanation if details and details.explanation else "no explanation given")
    calls = [block for block in response.content if isinstance(block, ToolUseBlock)]
    if not calls:
        text = " ".join(block.text for block in response.content if isinstance(block, TextBlock))
        raise _Malformed(f"no {tool.name} tool call in the response (stop_reason {response.stop_reason!r}); "
                         f"it said: {text[:120]!r}")
    if len(calls) != 1 or calls[0].name != tool.name:
        raise _Malformed(f"expected one {tool.name} tool call, got {', '.join(c.name for c in calls)}")
    if response.stop_reason == "max_tokens":
        raise _Malformed(f"the {tool.name} call was cut off by max_tokens; raise LLM_MAX_TOKENS")
    data = dict(calls[0].input)
    _check(data, tool.schema, "input")
    return data


def _to_generation(data: dict[str, Any], chunks: Sequence[Hit]) -> Generation:
    citations = []
    for i, item in enumerate(data["citations"]):
        number = int(item["document"])
        if number > len(chunks):
            raise _Malformed(f"input.citations[{i}].document is {number}, but only {len(chunks)} documents were given")
        hit = chunks[number - 1]
        citations.append(Citation(marker=number, chunk_id=hit.chunk_id, document_id=hit.document_id,
                                  external_id=hit.external_id, quote=item["quote"]))
    return Generation(answer=data["answer"], citations=tuple(citations))


def _to_reflection(data: dict[str, Any], chunks: Sequence[Hit]) -> Reflection:
    for source in data["sources_cited"]:
        if not (source.isascii() and source.isdigit() and 1 <= int(source) <= len(chunks)):
            raise _Malformed(f"input.sources_cited has {source!r}, not a Document number 1..{len(chunks)}")
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

    def refine_query(self, query: str, feedback: str) -> str:
        user = f"Original query: {query}\n\nWhat the last search missed:\n{feedback}"
        return self._ask("refine_query", user, (), lambda data: str(data["query"]).strip())

    def decompose(self, query: str) -> list[str]:
        return self._ask("decompose", f"Question: {query}", (), lambda data: list(data["sub_queries"]))

    def _ask(self, operation: str, user: str, chunks: Sequence[Hit], parse: Callable[[dict[str, Any]], T]) -> T:
        """One forced tool call: from the cache when possible, else from Claude; logged either way."""
        tool = _TOOLS[operation]
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
            except _Malformed as exc:  # stored under an older validator; ask again
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
            data = _tool_input(response, tool)
            result = parse(data)
        except anthropic.AnthropicError as exc:
            kind, message = _describe_api_error(exc, operation, self._timeout_s, self._max_retries)
            raise self._failed(record, started, tokens, kind, message) from self._scrubbed(exc)
        except _Refused as exc:
            raise self._failed(record, started, tokens, "refusal",
                               f"Claude declined the {operation} request: {exc}") from exc
        except _Malformed as exc:
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
    def _revalidate(data: dict[str, Any], tool: _Tool) -> dict[str, Any]:
        _check(data, tool.schema, "input")
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
