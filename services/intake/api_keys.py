"""API keys for the HTTP API: created and revoked from the CLI, verified on every request.

A key is shown once, when it is created; the store keeps its sha256 and a short prefix a
person can recognise in `workbench api-key list`. Every key belongs to an app, the system it
speaks for, and has a scope: `push` stores runs under its app and reads them back, `read`
only reads its app's runs, `admin` pushes under its app and reads every app's runs.
Functions take `*, session`, no commit.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from db.models import ApiKey as ApiKeyRow
from services.errors import ConflictError, InputError, NotAuthenticatedError, NotFoundError, PermissionDeniedError
from services.retrieval.text import require_storable

KEY_PREFIX = "wb_"
_VISIBLE_CHARS = 10  # "wb_" and the first 7 random characters
_MAX_NAME_CHARS = 200
_MAX_KEY_CHARS = 200  # far above a real key; anything longer is not one of ours
DEFAULT_APP = "default"  # where migration 0013 put the keys, records and runs from before apps
SCOPES = ("push", "read", "admin")
# A name that can go in a URL's query (?app=) and a log line as it is.
_APP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class ApiKey:
    """What may be shown about a key: never the key itself."""

    key_id: int
    name: str
    app: str  # the system it speaks for: its pushes are stored under this app, its reads see only it
    scope: str  # push, read or admin
    prefix: str
    created_by: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    @property
    def can_push(self) -> bool:
        return self.scope != "read"

    @property
    def reads_every_app(self) -> bool:
        return self.scope == "admin"


@dataclass(frozen=True)
class NewApiKey:
    """A just-created key: `key` is the only time the plaintext exists outside its holder."""

    info: ApiKey
    key: str


def hash_key(key: str) -> str:
    # sha256, not a slow password hash: a key is 32 random bytes, so there is nothing to
    # guess and no dictionary to slow down; a fast hash keeps verification off the hot path.
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def check_app_name(app: str) -> str:
    """The app's name as stored, or InputError saying what a name may hold."""
    if not isinstance(app, str) or not _APP_NAME.fullmatch(app):
        raise InputError(f"an app's name is 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit "
                         f"(e.g. support-bot); got {str(app)[:120]!r}")
    return app


def create_api_key(*, name: str, app: str = DEFAULT_APP, scope: str = "push", created_by: str = "",
                   session: Session) -> NewApiKey:
    """A new random key named `name` for `app` with `scope` (push, read or admin); its
    plaintext is returned once and never stored."""
    name = name.strip()
    if not name:
        raise InputError("name the key after the system that will use it (e.g. support-bot-prod)")
    if len(name) > _MAX_NAME_CHARS:
        raise InputError(f"keep the key's name under {_MAX_NAME_CHARS} characters")
    if scope not in SCOPES:
        raise InputError(f"a key's scope is one of {', '.join(SCOPES)}; got {scope[:40]!r}")
    check_app_name(app)
    require_storable(name, "the key's name")
    require_storable(created_by, "the creator's name")
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKeyRow(name=name, app=app, scope=scope, key_hash=hash_key(key), prefix=key[:_VISIBLE_CHARS],
                    created_by=created_by)
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


@dataclass(frozen=True)
class MovedKey:
    key: ApiKey
    records: int  # intake records the key sent, now under the new app
    runs: int  # their runs
    traces: int  # traces the key exported


# Trace ids the key sent that the app it moves to already holds: moving them would make one
# app hold a trace id twice.
_MOVE_CLASHES = text("""
SELECT i.trace_id FROM run_intake i JOIN run_intake o ON o.app = :app AND o.trace_id = i.trace_id
WHERE i.api_key_id = :id AND i.app <> :app
UNION SELECT t.trace_id FROM otlp_traces t JOIN otlp_traces o ON o.app = :app AND o.trace_id = t.trace_id
WHERE t.api_key_id = :id AND t.app <> :app
LIMIT 5
""")
_MOVE = text("""
WITH key AS (UPDATE api_keys SET app = :app WHERE id = :id RETURNING id),
records AS (UPDATE run_intake SET app = :app WHERE api_key_id = :id AND app <> :app RETURNING run_id),
runs AS (UPDATE runs SET app = :app WHERE id IN (SELECT run_id FROM records) RETURNING id),
traces AS (UPDATE otlp_traces SET app = :app WHERE api_key_id = :id AND app <> :app RETURNING trace_id)
SELECT (SELECT count(*) FROM records) AS records, (SELECT count(*) FROM runs) AS runs,
       (SELECT count(*) FROM traces) AS traces
""")


def move_api_key(key_id: int, *, app: str, session: Session) -> MovedKey:
    """Move a key to another app, with everything it sent: its intake records, their runs and
    its traces (how the keys migration 0013 put in "default" are split into apps). Refused
    with ConflictError, nothing moved, when the app already holds a trace id the key sent."""
    check_app_name(app)
    row = session.get(ApiKeyRow, key_id) if 0 < key_id < 2**31 else None
    if row is None:
        raise NotFoundError(f"no API key {key_id} (workbench api-key list shows them)")
    clashes = [r.trace_id for r in session.execute(_MOVE_CLASHES, {"id": key_id, "app": app})]
    if clashes:
        raise ConflictError(f"app {app!r} already holds trace ids key {key_id} sent ({', '.join(map(repr, clashes))}); "
                            "nothing was moved")
    moved = session.execute(_MOVE, {"id": key_id, "app": app}).one()
    session.refresh(row)
    return MovedKey(_info(row), int(moved.records), int(moved.runs), int(moved.traces))


# Looked up by hash, so how long the lookup takes says nothing about the key; the unique
# index makes it one probe. last_used_at is written at most once a minute per key: a busy
# client does not turn every request into a row update.
_VERIFY = text("""
WITH found AS (
    SELECT id, name, app, scope, prefix, created_by, created_at, last_used_at, revoked_at, key_hash
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


def require_push(key: ApiKey) -> None:
    """PermissionDeniedError for a key that may only read."""
    if not key.can_push:
        raise PermissionDeniedError(f"API key {key.prefix}... is a read key of app {key.app!r}: it cannot push runs "
                                    f"(workbench api-key create NAME --app {key.app} --scope push makes one that can)")


def app_to_read(key: ApiKey, asked: str | None = None) -> str | None:
    """The app whose runs `key` reads: its own app's, or for an admin key the app `asked`
    (None: every app). A key asking for another app than its own gets PermissionDeniedError."""
    if asked is not None:
        check_app_name(asked)
    if key.reads_every_app:
        return asked
    if asked is not None and asked != key.app:
        raise PermissionDeniedError(f"API key {key.prefix}... reads the runs of app {key.app!r} only")
    return key.app


def _info(row: Any) -> ApiKey:  # an ApiKeyRow or a row of _VERIFY
    return ApiKey(key_id=row.id, name=row.name, app=row.app, scope=row.scope, prefix=row.prefix, created_by=row.created_by,
                  created_at=row.created_at, last_used_at=row.last_used_at, revoked_at=row.revoked_at)
