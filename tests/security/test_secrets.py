"""Secrets (the Anthropic API key, database passwords) never reach logs, the UI, exports, stored
rows or error messages. Each check first makes sure the secret was really in play (set in the
settings, sent in a request), so that "not found" means "not leaked" rather than "never there"."""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from db import describe_store
from services.answering import pipeline
from services.answering.llm.anthropic_backend import AnthropicBackend
from services.cli import app
from services.corpus.ingest import ingest_uploads
from services.errors import DatabaseUnavailableError, LLMError
from services.review.export import export_records
from services.review.export_formats import read_export, write_export
from services.scoring.weights import DEFAULT_PROFILE
from services.settings import Settings, get_settings
from services.store import get_engine, transaction

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "sk-ant-TESTSECRET-0123456789abcdef"
DB_PASSWORD = "p4ssw0rdSECRET"
# Port 1 on loopback refuses at once: the error path runs without waiting for a timeout.
UNREACHABLE_URL = f"postgresql://workbench:{DB_PASSWORD}@127.0.0.1:1/workbench"
SECRETS = (API_KEY, DB_PASSWORD, "TESTSECRET", "p4ssw0rd")  # also a fragment of each, in case of truncation
# common.py and _private modules are parts of pages, not pages (app.py names the pages)
PAGES = sorted(p.name for p in (ROOT / "app_pages").glob("*.py") if p.name != "common.py" and not p.name.startswith("_"))


def leaked(*texts: object) -> list[str]:
    """The secrets found in any of the texts (case-insensitively)."""
    blob = "\n".join(map(str, texts)).lower()
    return [s for s in SECRETS if s.lower() in blob]


def exception_text(exc: BaseException) -> str:
    """Everything a traceback in a log would print: the message, repr, and the whole cause chain."""
    return "".join(traceback.format_exception(exc)) + repr(exc)


@pytest.fixture()
def secret_env(monkeypatch) -> Iterator[Settings]:  # type: ignore[no-untyped-def]
    """DATABASE_URL (unreachable, with a password) and ANTHROPIC_API_KEY in the environment."""
    monkeypatch.setenv("DATABASE_URL", UNREACHABLE_URL)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    get_settings.cache_clear()
    settings = get_settings()
    assert settings.database_url.get_secret_value() == UNREACHABLE_URL  # type: ignore[union-attr]
    yield settings
    get_settings.cache_clear()  # the next test reads the conftest's embedded store again


def test_settings_repr_and_dumps_hide_both_secrets(secret_env):
    settings = secret_env
    assert settings.anthropic_api_key.get_secret_value() == API_KEY  # type: ignore[union-attr]
    shown = [repr(settings), str(settings), settings.model_dump(), settings.model_dump_json(), repr(settings.database_url)]
    assert not leaked(*shown)


def test_describe_store_names_host_and_database_only(secret_env):
    info = describe_store(secret_env)
    assert (info.kind, info.location) == ("external", "127.0.0.1:1/workbench")
    assert not leaked(info, repr(info))


def test_unreachable_database_error_names_where_not_the_password(secret_env, caplog):
    caplog.set_level(logging.DEBUG)
    with pytest.raises(DatabaseUnavailableError) as caught:
        get_engine(secret_env)
    message = str(caught.value)
    assert message.startswith("Database unavailable") and "127.0.0.1:1/workbench" in message
    with pytest.raises(DatabaseUnavailableError) as again:
        with transaction(secret_env):
            pass
    assert not leaked(exception_text(caught.value), exception_text(again.value), caplog.text)


@pytest.mark.parametrize("args", [
    ["search", "battery pack"],
    ["ask", "What does SRVO-062 mean?"],
    ["export", "-o", "{out}"],
    ["--database-url", UNREACHABLE_URL, "ingest", "{docs}"],
])
def test_cli_errors_name_the_store_but_not_the_secrets(secret_env, tmp_path, args):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\nSome text.")
    argv = [a.format(out=tmp_path / "out.jsonl", docs=tmp_path / "docs") for a in args]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 1, result.output
    assert "error: Database unavailable" in result.output and "127.0.0.1:1/workbench" in result.output
    assert not leaked(result.output, result.stderr, repr(result.exception))
    assert not (tmp_path / "out.jsonl").exists()


# --- the Anthropic key: requests, logs, stored calls, stored runs, exports ---------------------------------------


class _RejectingAPI:
    """Answers every request 401 and echoes the key back, as a misbehaving proxy might."""

    def __init__(self) -> None:
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        return httpx2.Response(401, headers={"retry-after-ms": "1"}, json={
            "type": "error", "error": {"type": "authentication_error", "message": f"invalid x-api-key {API_KEY}"}})


def _failing_claude(api: _RejectingAPI) -> AnthropicBackend:
    return AnthropicBackend(api_key=API_KEY, model="claude-sonnet-4-5", max_retries=1, timeout_s=5,
                            http_client=httpx2.Client(transport=httpx2.MockTransport(api)))


def test_a_rejected_key_leaks_into_no_log_error_or_call_record(caplog):
    caplog.set_level(logging.DEBUG)  # the SDK and httpx log requests and responses at DEBUG
    api = _RejectingAPI()
    backend = _failing_claude(api)
    with pytest.raises(LLMError) as caught:
        backend.decompose("What does SRVO-062 mean?")
    sent = [value for request in api.requests for value in request.headers.values()]
    assert any(API_KEY in value for value in sent)  # it was sent: there was something to leak
    assert "Check ANTHROPIC_API_KEY" in str(caught.value)
    assert caplog.records, "nothing was logged: the DEBUG capture is not working"
    records = [r.getMessage() for r in caplog.records] + [str(r.args) for r in caplog.records]
    calls = [json.dumps(c.to_dict()) for c in backend.log.calls]
    assert not leaked(exception_text(caught.value), caplog.text, *records, *calls, repr(backend), vars(caught.value))


def test_runs_answered_by_a_failing_claude_store_and_export_no_key(clean_db, engine, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    assert ingest_uploads([("srvo.md", b"# SRVO-062\nReplace the battery pack, then remaster the axis.")]).ingested == 1
    api = _RejectingAPI()
    run = pipeline.run("What does SRVO-062 mean?", "balanced", DEFAULT_PROFILE, backend=_failing_claude(api))
    assert api.requests and run.iterations[0].errors, "the failing call must have been made and recorded"

    with engine.connect() as conn:
        tables = [r[0] for r in conn.exec_driver_sql("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        # Identifiers from the catalog, quoted; every row of every table as text.
        rows = [row for name in tables for row in conn.exec_driver_sql(
            f"SELECT t::text FROM {conn.dialect.identifier_preparer.quote(name)} t").scalars()]
    assert any("Check ANTHROPIC_API_KEY" in row for row in rows)  # the stored error is there, scrubbed
    records = export_records()
    for fmt in ("csv", "jsonl", "parquet"):
        write_export(records, fmt, tmp_path / f"export.{fmt}")
    # Parquet pages are compressed, so it is read back; the text formats are searched as written.
    exported = [(tmp_path / "export.csv").read_text(), (tmp_path / "export.jsonl").read_text(),
                json.dumps(read_export(tmp_path / "export.parquet", "parquet"))]
    assert [r["run_id"] for r in records] == [run.run_id] and all(run.query in text for text in exported)
    assert not leaked(*rows, json.dumps(run.to_dict(), default=str), *exported, caplog.text)


# --- the UI -------------------------------------------------------------------------------------------------


def _tree_text(at: AppTest) -> str:
    """Every element the app drew, main area and sidebar, as its protobuf text."""
    parts, stack = [], [at._tree]
    while stack:
        node = stack.pop()
        if getattr(node, "proto", None) is not None:
            parts.append(str(node.proto))
        stack.extend(getattr(node, "children", {}).values())
    return "\n".join(parts)


@pytest.fixture()
def fresh_ui_caches() -> Iterator[None]:
    from app_pages.common import ensure_store

    ensure_store.clear()  # the process may have cached the embedded store's description
    st.cache_data.clear()
    yield
    ensure_store.clear()
    st.cache_data.clear()


def test_sidebar_shows_the_model_name_and_no_page_shows_a_secret(secret_env, fresh_ui_caches):
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    assert not at.exception, at.exception
    sidebar = [str(getattr(e, "value", "")) for e in at.sidebar]
    assert "Answers — Claude (claude-sonnet-4-5)" in sidebar  # the key is set, and only the model is named
    assert any("Database unavailable" in s and "127.0.0.1:1/workbench" in s for s in sidebar)
    texts = [_tree_text(at)]
    for page in PAGES:
        at.switch_page(f"app_pages/{page}").run()
        assert not at.exception, (page, at.exception)
        texts.append(_tree_text(at))
    assert len(texts) == len(PAGES) + 1 and all(texts)
    assert not leaked(*texts)
