"""Quotas per API key: how fast a key may send requests (a token bucket), and how many of its
records may wait for their assessment at once (its backlog). Past either, the request is
refused with the seconds to wait (HTTP 429 with Retry-After), nothing of it stored.

Both are kept in the memory of one API process: with several processes behind a balancer,
each lets a key through at the rate set, and the backlog is counted in the store, so it
holds across processes to within what each accepted in the last `refresh_seconds`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from services.errors import WorkbenchError
from services.intake.intake import count_queued_for_key

_MAX_KEYS = 10_000  # more keys than a deployment has; past it the memory starts over
BACKLOG_RETRY_AFTER_SECONDS = 30  # the worker needs a while to take a key's records below its quota


class QuotaExceededError(WorkbenchError):
    """A key over one of its quotas; `retry_after` is how many seconds to wait (at least 1)."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = max(1, math.ceil(retry_after))


class KeyRates:
    """A token bucket per key (by its hash): `burst` requests at once, refilled at `rate` a
    second. A rate of 0 lets every request through. Thread-safe."""

    def __init__(self, *, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = max(1, burst)
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # key hash: (tokens, when counted)

    def take(self, key_id: str) -> float:
        """0 when the request may go (a token is taken), else the seconds until one is there."""
        if self.rate <= 0:
            return 0.0
        now = self._clock()
        with self._lock:
            tokens, then = self._buckets.get(key_id, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - then) * self.rate)
            if tokens < 1:
                self._buckets[key_id] = (tokens, now)
                return (1 - tokens) / self.rate
            if len(self._buckets) >= _MAX_KEYS and key_id not in self._buckets:
                self._buckets.clear()
            self._buckets[key_id] = (tokens - 1, now)
            return 0.0

    def check(self, key_id: str, *, key_prefix: str) -> None:
        """QuotaExceededError when the key is over its rate."""
        wait = self.take(key_id)
        if wait:
            raise QuotaExceededError(f"API key {key_prefix}... is over its rate of {self.rate:g} requests a second "
                                     f"(API_RATE_PER_KEY, bursts of {self.burst}, API_RATE_BURST); retry after the "
                                     "Retry-After seconds", retry_after=wait)


@dataclass
class _Known:
    queued: int
    counted_at: float


class Backlogs:
    """Records each key has waiting for their assessment: counted in the store at most every
    `refresh_seconds` per key, and in between, what this process accepted is added on."""

    def __init__(self, *, refresh_seconds: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._refresh = refresh_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._known: dict[int, _Known] = {}

    def check(self, key_id: int, incoming: int, *, cap: int, key_prefix: str, session: Session) -> None:
        """QuotaExceededError when `incoming` more records would take the key past `cap`
        waiting records (0: no cap)."""
        if cap <= 0:
            return
        now = self._clock()
        with self._lock:
            known = self._known.get(key_id)
        if known is None or now - known.counted_at >= self._refresh:
            known = _Known(count_queued_for_key(key_id, cap=cap, session=session), now)
            with self._lock:
                if len(self._known) >= _MAX_KEYS:
                    self._known.clear()
                self._known[key_id] = known
        if known.queued + incoming > cap:
            raise QuotaExceededError(
                f"API key {key_prefix}... has {known.queued:,} records waiting for their assessment; it may have at most "
                f"{cap:,} (API_MAX_QUEUED_PER_KEY), so these {incoming:,} were not stored. Retry once the worker has "
                "caught up", retry_after=BACKLOG_RETRY_AFTER_SECONDS)

    def added(self, key_id: int, records: int) -> None:
        """`records` of the key were stored now (their transaction committed)."""
        with self._lock:
            known = self._known.get(key_id)
            if known is not None:
                known.queued += records
