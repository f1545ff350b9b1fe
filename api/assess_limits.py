"""Bounds on POST /assess, which does its work while the client waits: a budget of contexts and
characters per request, and a number of assessments at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from starlette.exceptions import HTTPException

from services.errors import InputError
from services.intake.schema import ExternalContext
from services.settings import Settings

RETRY_AFTER_SECONDS = 1


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
        if not self._free.acquire(blocking=False):
            raise HTTPException(503, detail="too many assessments at once (API_ASSESS_MAX_CONCURRENT); retry shortly",
                                headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        try:
            yield
        finally:
            self._free.release()
