"""API keys for the HTTP API: created and revoked from the CLI, verified on every request.

A key is shown once, when it is created; the store keeps its sha256 and a short prefix a
person can recognise in `workbench api-key list`. Functions take `*, session`, no commit.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from db.models import ApiKey as ApiKeyRow
from services.errors import InputError, NotAuthenticatedError, NotFoundError
from services.retrieval.text import require_storable

KEY_PREFIX = "wb_"
_VISIBLE_CHARS = 10  # "wb_" and the first 7 random characters
_MAX_NAME_CHARS = 200
_MAX_KEY_CHARS = 200  # far above a real key; anything longer is not one of ours


@dataclass(frozen=True)
class ApiKey:
    """What may be shown about a key: never the key itself."""

    key_id: int
    name: str
    prefix: str
    created_by: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True)
class NewApiKey:
    """A just-created key: `key` is the only time the plaintext exists outside its holder."""

    info: ApiKey
    key: str


def hash_key(key: str) -> str:
    # sha256, not a slow password hash: a key is 32 random bytes, so there is nothing to
    # guess and no dictionary to slow down; a fast hash keeps verification off the hot path.
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def create_api_key(*, name: str, created_by: str = "", session: Session) -> NewApiKey:
    """A new random key named `name`; its plaintext is returned once and never stored."""
    name = name.strip()
    if not name:
        raise InputError("name the key after the system that will use it (e.g. support-bot-prod)")
    if len(name) > _MAX_NAME_CHARS:
        raise InputError(f"keep the key's name under {_MAX_NAME_CHARS} characters")
    require_storable(name, "the key's name")
    require_storable(created_by, "the creator's name")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKeyRow(name=name, key_hash=hash_key(key), prefix=key[:_VISIBLE_CHARS], created_by=created_by)
    session.add(row)
    session.flush()
    session.refresh(row)
    return NewApiKey(info=_info(row), key=key)


def list_api_keys(*, session: Session) -> list[ApiKey]:
    """Every key, active and revoked, oldest first."""
    return [_info(row) for row in session.scalars(select(ApiKeyRow).order_by(ApiKeyRow.id))]


def revoke_api_key(key_id: int, *, session: Session) -> ApiKey:
    """Revoke a key (from its next request on); revoking a revoked key changes nothing."""
    row = session.get(ApiKeyRow, key_id) if 0 < key_id < 2**31 else None
    if row is None:
        raise NotFoundError(f"no API key {key_id} (workbench api-key list shows them)")
    if row.revoked_at is None:
        session.execute(text("UPDATE api_keys SET revoked_at = now() WHERE id = :id"), {"id": key_id})
        session.refresh(row)
    return _info(row)


# Looked up by hash, so how long the lookup takes says nothing about the key; the unique
# index makes it one probe. last_used_at is written at most once a minute per key: a busy
# client does not turn every request into a row update.
_VERIFY = text("""
WITH found AS (
    SELECT id, name, prefix, created_by, created_at, last_used_at, revoked_at, key_hash
    FROM api_keys WHERE key_hash = :key_hash
), touched AS (
    UPDATE api_keys SET last_used_at = now() FROM found
    WHERE api_keys.id = found.id AND found.revoked_at IS NULL
      AND (found.last_used_at IS NULL OR found.last_used_at < now() - interval '1 minute')
      AND (api_keys.last_used_at IS NULL OR api_keys.last_used_at < now() - interval '1 minute')
)
SELECT * FROM found
""")


def verify_api_key(key: str | None, *, session: Session) -> ApiKey:
    """The active key `key` is; NotAuthenticatedError when it is missing, unknown or revoked."""
    if not key:
        raise NotAuthenticatedError("send an API key: Authorization: Bearer <key> (workbench api-key create NAME)")
    if len(key) > _MAX_KEY_CHARS:
        raise NotAuthenticatedError("that is not a valid API key")
    key_hash = hash_key(key)
    row = session.execute(_VERIFY, {"key_hash": key_hash}).one_or_none()
    if row is None or not hmac.compare_digest(row.key_hash, key_hash):
        raise NotAuthenticatedError("that is not a valid API key")
    if row.revoked_at is not None:
        raise NotAuthenticatedError(f"API key {row.prefix}... was revoked; ask for a new one")
    return _info(row)


def _info(row: Any) -> ApiKey:  # an ApiKeyRow or a row of _VERIFY
    return ApiKey(key_id=row.id, name=row.name, prefix=row.prefix, created_by=row.created_by, created_at=row.created_at,
                  last_used_at=row.last_used_at, revoked_at=row.revoked_at)
