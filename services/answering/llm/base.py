"""The answer-backend interface, its result shapes, and the registry backends join."""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from services.domain import Hit

GRADE_LABELS = {5: "EXCELLENT", 4: "GOOD", 3: "PARTIAL", 2: "TANGENTIAL", 1: "INADEQUATE"}


@dataclass(frozen=True)
class Citation:
    """`[n]` in an answer points at the n-th chunk given to generate() (1-based)."""

    marker: int
    chunk_id: int
    document_id: int
    external_id: str
    quote: str  # the cited sentence(s) as they appear in the chunk


@dataclass(frozen=True)
class Generation:
    answer: str
    citations: tuple[Citation, ...] = ()


@dataclass(frozen=True)
class Reflection:
    """Seed 004's grounding JSON, plus per-sentence support for the UI."""

    answer_grounded: bool
    hallucination_detected: bool
    reflection_score: float
    sources_cited: tuple[str, ...]
    reflection_reason: str
    needs_regeneration: bool
    sentence_support: tuple[float, ...] = ()


@dataclass(frozen=True)
class Grade:
    """Answer adequacy 1-5 (AT-RAG style) with the gaps and follow-up queries behind it."""

    score: int
    gaps: tuple[str, ...] = ()
    refinements: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return GRADE_LABELS[self.score]


@dataclass(frozen=True)
class LLMCall:
    """One backend call, as logged: what ran, what it cost, how it ended."""

    backend: str
    model: str
    operation: str
    prompt_version: str
    temperature: float
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    cached: bool = False
    outcome: str = "ok"  # ok | error
    error: str | None = None
    cache_key: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CallLog:
    """Calls made since the caller last drained it (the pipeline drains per stage)."""

    calls: list[LLMCall] = field(default_factory=list)

    def record(self, call: LLMCall) -> None:
        self.calls.append(call)

    def drain(self) -> list[LLMCall]:
        drained, self.calls = self.calls, []
        return drained


class AnswerBackend(abc.ABC):
    """Generate and judge answers from retrieved chunks. Failures raise LLMError."""

    name: ClassVar[str]
    label: ClassVar[str]  # how the UI names it, e.g. "offline (extractive)"
    is_llm: ClassVar[bool]
    # True for a backend whose reflection is the judge's verdict read as one (services.judging):
    # the pipeline then judges once and does not call reflect() again.
    reflects_by_judge: ClassVar[bool] = False

    def __init__(self) -> None:
        self.log = CallLog()

    @abc.abstractmethod
    def generate(self, query: str, chunks: Sequence[Hit]) -> Generation: ...

    @abc.abstractmethod
    def reflect(self, query: str, answer: str, chunks: Sequence[Hit]) -> Reflection: ...

    @abc.abstractmethod
    def grade(self, query: str, answer: str) -> Grade: ...

    @abc.abstractmethod
    def identify_gaps(self, query: str, answer: str, chunks: Sequence[Hit]) -> list[str]: ...

    @abc.abstractmethod
    def refine_query(self, query: str, *, reason: str, gaps: Sequence[str], expansion_terms: Sequence[str]) -> str:
        """One search query for what the last attempt missed. `reason` is the judge's account of
        the answer's weakness ("" when none ran), `gaps` the information it lacks, and
        `expansion_terms` words from the top passages (services.retrieval.expansion)."""

    @abc.abstractmethod
    def decompose(self, query: str) -> list[str]: ...

    @property
    def model(self) -> str:
        return self.name

    def _timed(self, operation: str, prompt_version: str, fn: Callable[[], Any]) -> Any:
        """Run a local (non-LLM) operation and log it like any other call."""
        started = time.perf_counter()
        try:
            result = fn()
        except Exception as exc:
            self.log.record(LLMCall(self.name, self.model, operation, prompt_version, 0.0,
                                    latency_ms=(time.perf_counter() - started) * 1000,
                                    outcome="error", error=str(exc)[:500]))
            raise
        self.log.record(LLMCall(self.name, self.model, operation, prompt_version, 0.0,
                                latency_ms=(time.perf_counter() - started) * 1000))
        return result


_REGISTRY: dict[str, Callable[..., AnswerBackend]] = {}


def register_backend(name: str, factory: Callable[..., AnswerBackend]) -> None:
    """Backends (built-in ones too) join through this one hook."""
    _REGISTRY[name] = factory


def registered_backends() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def create_backend(name: str, **options: Any) -> AnswerBackend:
    from services.errors import InputError

    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise InputError(f"unknown answer backend '{name}' (available: {', '.join(_REGISTRY)})") from None
    return factory(**options)


# A hit's origin when a gap-filling query found it and it was given to the generator as
# additional context (services.answering.gap_context): "gap:<the gap query>".
GAP_ORIGIN_PREFIX = "gap:"


def gap_query_of(hit: Hit) -> str | None:
    """The gap query that found `hit` when it is additional context, else None."""
    origin = hit.origin or ""
    return origin[len(GAP_ORIGIN_PREFIX):] if origin.startswith(GAP_ORIGIN_PREFIX) else None


def chunk_block(chunks: Sequence[Hit]) -> str:
    """Chunks numbered as the prompts and citations refer to them; a passage found for a gap
    of an earlier answer says so (the model reads it as additional context, not as the search
    for the question). Without such passages the block is as it always was."""
    def heading(i: int, c: Hit) -> str:
        gap = gap_query_of(c)
        return f"Document {i}: {c.title}" if gap is None else (
            f"Document {i} (additional context, found by the gap query {gap!r}): {c.title}")
    return "\n\n".join(f"{heading(i, c)}\n{c.text}" for i, c in enumerate(chunks, 1))


def gap_note(chunks: Sequence[Hit]) -> str:
    """The line a prompt adds when some documents are additional context for gaps; "" if none."""
    numbers = [str(i) for i, c in enumerate(chunks, 1) if gap_query_of(c) is not None]
    if not numbers:
        return ""
    return (f"\n\nDocuments {', '.join(numbers)} are additional context: follow-up searches found them for "
            "information an earlier answer lacked. Use them where they answer the question, cited like the others.")
