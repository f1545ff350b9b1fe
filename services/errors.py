"""The one error tree users can cause; pages and the CLI turn these into messages.

    WorkbenchError
    ├── InputError            bad query, bad file, bad filter, bad weights
    │   └── PayloadTooLargeError  a body or file over its size limit
    ├── DatabaseUnavailableError   the store cannot be reached (names what was tried)
    ├── DatabaseRefusedError  the store aborted one action (deadlock, timeout, full disk)
    ├── NotFoundError         a run, document or profile that does not exist
    ├── ConflictError         a review saved over a newer version (optimistic locking)
    ├── PermissionDeniedError an action the signed-in user may not take
    ├── NotAuthenticatedError an API request without a valid, unrevoked API key
    └── LLMError              the answer backend failed (timeout, refusal, bad output)
"""

from __future__ import annotations


class WorkbenchError(Exception):
    """Base of every error a person can act on; the message says what to do."""


class InputError(WorkbenchError):
    """Input that cannot be used as given (empty query, unreadable file, bad filter)."""


class PayloadTooLargeError(InputError):
    """A request body (as sent or once decompressed) over its size limit."""


class DatabaseUnavailableError(WorkbenchError):
    """The database could not be reached or started."""


class DatabaseRefusedError(WorkbenchError):
    """The database is up but aborted this action; nothing of it was saved."""


class NotFoundError(WorkbenchError):
    """A referenced record does not exist."""


class ConflictError(WorkbenchError):
    """Someone else changed the record first; nothing was overwritten."""

    def __init__(self, message: str, *, current: dict | None = None) -> None:
        super().__init__(message)
        self.current = current or {}


class PermissionDeniedError(WorkbenchError):
    """The current user is not allowed to do this."""


class NotAuthenticatedError(WorkbenchError):
    """An HTTP API request whose key is missing, unknown or revoked."""


class LLMError(WorkbenchError):
    """The answer backend failed; `kind` is timeout, rate_limit, refusal, malformed or api."""

    def __init__(self, message: str, *, kind: str = "api") -> None:
        super().__init__(message)
        self.kind = kind
