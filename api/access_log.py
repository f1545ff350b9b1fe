"""Credentials in a query string are blanked in the access log.

The API takes keys only in headers, but a client that puts one in the URL (`?api_key=...`)
is refused with the URL logged as sent, and a log is read by more people than hold keys.
"""

from __future__ import annotations

import logging
import re

ACCESS_LOGGER = "uvicorn.access"
REDACTED = "[redacted]"
# Parameter names clients use for a key or token; matched whole, in any case.
_CREDENTIAL = re.compile(r"(?i)([?&](?:api[_-]?key|key|token|access[_-]?token|auth|authorization)=)[^&#\s]*")


def redact_query_credentials(path: str) -> str:
    """`path` with the value of every credential-looking query parameter replaced."""
    return _CREDENTIAL.sub(lambda m: m.group(1) + REDACTED, path)


class RedactQueryCredentials(logging.Filter):
    """uvicorn's access record carries (client, method, path with query, http version, status)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_query_credentials(a) if isinstance(a, str) else a for a in record.args)
        return True


def redact_access_log() -> None:
    """Install the filter on uvicorn's access logger, once per process."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, RedactQueryCredentials) for f in logger.filters):
        logger.addFilter(RedactQueryCredentials())
