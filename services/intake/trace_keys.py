"""API keys verified against the store at most once per key every `ttl_seconds` instead of on
every request: by api/gate.py before any body is read (every authenticated route), and by
POST /v1/traces before it stores spans.

An exporter sends many small exports a second with the same key; verifying each is a round
trip of its own. A key verified lately is taken on trust for the decode, and store_spans
checks it is still active in the very statement that writes the spans (by id and hash), so a
revoked key stores nothing from its next export on: revocation stays immediate. Only keys
that passed are remembered; a missing, unknown or revoked key always goes to the store.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session

from services.intake.api_keys import ApiKey, hash_key, verify_api_key

DEFAULT_TTL_SECONDS = 30.0  # below api_keys.last_used_at's one-minute resolution: that column stays true
_MAX_KEYS = 1_000  # more keys than a deployment has; past it the memory starts over


@dataclass(frozen=True)
class VerifiedKey:
    key: ApiKey
    key_hash: str  # what store_spans checks the key by, with its id


class TraceKeys:
    """Keys that passed verify_api_key lately, by hash; thread-safe (the API's thread pool)."""

    def __init__(self, *, ttl_seconds: float = DEFAULT_TTL_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._passed: dict[str, tuple[ApiKey, float]] = {}

    def verify(self, key: str | None, *, session: Session) -> VerifiedKey:
        """The key, from memory when it passed within the ttl, else verified in the store
        (NotAuthenticatedError when missing, unknown or revoked)."""
        passed = self.remembered(key)
        if passed is not None:
            return passed
        key_hash = hash_key(key) if key else ""
        now = self._clock()
        found = verify_api_key(key, session=session)
        with self._lock:
            if len(self._passed) >= _MAX_KEYS:
                self._passed.clear()
            self._passed[key_hash] = (found, now)
        return VerifiedKey(found, key_hash)

    def remembered(self, key: str | None) -> VerifiedKey | None:
        """The key if it passed within the ttl, without the store; None means ask the store
        (api/gate.py answers a remembered key on the event loop, no thread or session)."""
        if not key:
            return None
        key_hash = hash_key(key)
        with self._lock:
            passed = self._passed.get(key_hash)
        if passed is None or self._clock() - passed[1] >= self._ttl:
            return None
        return VerifiedKey(passed[0], key_hash)

    def forget(self, key_hash: str) -> None:
        """A key store_spans found revoked: verified in the store again from the next export on."""
        with self._lock:
            self._passed.pop(key_hash, None)
