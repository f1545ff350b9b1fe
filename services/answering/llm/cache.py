"""LLM responses kept by a hash of everything that shapes them, so re-asking costs nothing."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy.dialects.postgresql import insert

from db.models import LLMCacheRow
from services.settings import Settings
from services.store import transaction


@dataclass(frozen=True)
class CachedResponse:
    """A validated tool input as first returned, with the usage that call cost."""

    backend: str
    model: str
    operation: str
    prompt_version: str
    response: dict[str, Any]
    input_tokens: int = 0
    output_tokens: int = 0


class ResponseCache(Protocol):
    def get(self, key: str) -> CachedResponse | None: ...

    def put(self, key: str, *, backend: str, model: str, operation: str, prompt_version: str,
            response: dict[str, Any], input_tokens: int, output_tokens: int) -> None: ...


def cache_key(model: str, prompt_version: str, operation: str, payload: dict[str, Any]) -> str:
    """sha256 over canonical JSON; `payload` must hold every input that changes the answer."""
    canonical = json.dumps(
        {"model": model, "prompt_version": prompt_version, "operation": operation, "payload": payload},
        sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class DatabaseCache:
    """The `llm_cache` table; the first response stored under a key is the one kept."""

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings

    def get(self, key: str) -> CachedResponse | None:
        with transaction(self._settings) as session:
            row = session.get(LLMCacheRow, key)
            if row is None:
                return None
            return CachedResponse(backend=row.backend, model=row.model, operation=row.operation,
                                  prompt_version=row.prompt_version, response=dict(row.response),
                                  input_tokens=row.input_tokens, output_tokens=row.output_tokens)

    def put(self, key: str, *, backend: str, model: str, operation: str, prompt_version: str,
            response: dict[str, Any], input_tokens: int, output_tokens: int) -> None:
        # Two workers may answer the same prompt at once; both answers are valid, keep the first.
        statement = insert(LLMCacheRow).values(
            cache_key=key, backend=backend, model=model, operation=operation, prompt_version=prompt_version,
            response=response, input_tokens=input_tokens, output_tokens=output_tokens,
        ).on_conflict_do_nothing(index_elements=[LLMCacheRow.cache_key])
        with transaction(self._settings) as session:
            session.execute(statement)
