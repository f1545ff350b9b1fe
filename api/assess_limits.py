"""Bounds on POST /assess, which does its work while the client waits: a budget of contexts and
characters per request, a number of assessments at once, and a time: the work runs in a
worker thread for at most API_ASSESS_TIMEOUT_S (504 past it) and is given up as soon as the
client disconnects. A thread cannot be killed, so giving up sets a flag the assessment checks
before each call to the answer backend (CancellableBackend) and the store's statements end at
the same deadline (statement_timeout); its slot is free only once the thread has stopped."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import anyio
from starlette.exceptions import HTTPException
from starlette.requests import Request

from services.answering.llm.base import AnswerBackend
from services.errors import InputError, WorkbenchError
from services.intake.schema import ExternalContext
from services.settings import Settings

RETRY_AFTER_SECONDS = 1
DISCONNECT_POLL_SECONDS = 0.2
T = TypeVar("T")


def check_assess_budget(contexts: list[ExternalContext], settings: Settings) -> None:
    """InputError (422) when the contexts are more than one waiting request may ask to score."""
    chars = sum(len(c.text) for c in contexts)
    if len(contexts) > settings.api_assess_max_contexts or chars > settings.api_assess_max_context_chars:
        raise InputError(
            f"POST /assess scores at most {settings.api_assess_max_contexts} contexts and "
            f"{settings.api_assess_max_context_chars:,} characters of them at once (got {len(contexts)} and {chars:,}; "
            "API_ASSESS_MAX_CONTEXTS, API_ASSESS_MAX_CONTEXT_CHARS); push a larger record with POST /runs, "
            "which assesses it in the background")


class AssessSlots:
    """At most `size` assessments at once; one more is turned away at once rather than queued
    behind them, so a burst cannot hold every thread of the API."""

    def __init__(self, size: int) -> None:
        self._free = threading.BoundedSemaphore(size)

    @contextmanager
    def taken(self) -> Iterator[None]:
        self.take()
        try:
            yield
        finally:
            self.give_back()

    def take(self) -> None:
        """A slot, or a 503 with Retry-After at once."""
        if not self._free.acquire(blocking=False):
            raise HTTPException(503, detail="too many assessments at once (API_ASSESS_MAX_CONCURRENT); retry shortly",
                                headers={"Retry-After": str(RETRY_AFTER_SECONDS)})

    def give_back(self) -> None:
        self._free.release()


class AssessmentCancelledError(WorkbenchError):
    """The client went away or the deadline passed: the assessment stops at its next step."""


class CancellableBackend:
    """An answer backend whose calls are refused once `cancelled` is set: an assessment given up
    makes no more calls to the model (the one in flight ends by itself)."""

    def __init__(self, backend: AnswerBackend, cancelled: threading.Event) -> None:
        self._backend = backend
        self._cancelled = cancelled

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._backend, name)
        if not callable(value):
            return value

        def guarded(*args: Any, **kwargs: Any) -> Any:
            if self._cancelled.is_set():
                raise AssessmentCancelledError("the assessment was given up (timeout or the client left)")
            return value(*args, **kwargs)

        return guarded


async def finish_or_give_up(work: Callable[[], T], request: Request, *, timeout_s: float,
                            cancelled: threading.Event) -> T | None:
    """`work()` in a worker thread; its result, or None when the client disconnected first, or
    a 504 when `timeout_s` passed first. Either way of giving up sets `cancelled`."""
    outcome: list[Any] = []  # [result] or [None, exception]

    async def run(group: anyio.abc.TaskGroup) -> None:
        try:
            outcome.append(await anyio.to_thread.run_sync(work, abandon_on_cancel=True))
        except Exception as exc:  # handed back below, not wrapped in the task group's ExceptionGroup
            outcome.extend([None, exc])
        group.cancel_scope.cancel()

    async def watch(group: anyio.abc.TaskGroup) -> None:
        while not await request.is_disconnected():
            await anyio.sleep(DISCONNECT_POLL_SECONDS)
        group.cancel_scope.cancel()

    with anyio.move_on_after(timeout_s) as deadline:
        async with anyio.create_task_group() as group:
            group.start_soon(run, group)
            group.start_soon(watch, group)
    if len(outcome) == 2:
        raise outcome[1]
    if outcome:
        return outcome[0]  # type: ignore[no-any-return]
    cancelled.set()
    if deadline.cancelled_caught:
        raise HTTPException(504, detail=f"the assessment took longer than {timeout_s:g} s (API_ASSESS_TIMEOUT_S) and was "
                                        "given up; send fewer contexts, ?judges=false, or push it with POST /runs")
    return None
