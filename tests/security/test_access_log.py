"""A key sent in the query string is refused and not written to the access log (issue 28);
through a real uvicorn server logging at info, as `workbench api` does."""

from __future__ import annotations

import logging

import httpx

from api.access_log import ACCESS_LOGGER, redact_query_credentials
from api.app import create_app
from services.intake.api_keys import create_api_key
from services.store import transaction
from tests.api._server import serving


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_key_in_the_query_string_is_refused_and_redacted_in_the_access_log(engine, clean_db, settings):  # type: ignore[no-untyped-def]
    with transaction(settings) as session:
        key = create_api_key(name="url-key-client", session=session).key
    lines = _Lines()
    with serving(create_app(settings, assess=False), log_level="info") as url:
        logging.getLogger(ACCESS_LOGGER).addHandler(lines)  # after uvicorn configured its loggers
        try:
            with httpx.Client(base_url=url, timeout=60) as http:
                assert http.get("/runs/1", params={"api_key": key}).status_code == 401
                assert http.get("/runs/by-trace-id/t-1", params={"x": "1", "API_KEY": key, "token": key}).status_code == 401
        finally:
            logging.getLogger(ACCESS_LOGGER).removeHandler(lines)
    assert len(lines.lines) == 2, lines.lines
    assert not [line for line in lines.lines if key in line or key[:12] in line]
    assert "/runs/1?api_key=[redacted]" in lines.lines[0]
    assert "x=1&API_KEY=[redacted]&token=[redacted]" in lines.lines[1]


def test_only_credential_parameters_are_redacted():
    assert redact_query_credentials("/runs?reviewed_since=2026-01-01&monkey=1&key=s3cret#f") == (
        "/runs?reviewed_since=2026-01-01&monkey=1&key=[redacted]#f")
    assert redact_query_credentials("/runs/by-trace-id/api_key=abc") == "/runs/by-trace-id/api_key=abc"  # a path, not a query
