"""RETENTION_DAILY: the API process runs the daily prune beside its assessment worker, for as
long as it serves (services/review/retention_schedule.py prunes; tests/services test it)."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient

from api.app import create_app


def _retention_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "workbench-retention" and t.is_alive()]


def test_the_daily_prune_runs_while_the_api_serves_and_stops_with_it(engine, settings) -> None:  # type: ignore[no-untyped-def]
    app = create_app(settings.model_copy(update={"retention_daily": True}), assess=False)
    assert not _retention_threads()
    with TestClient(app) as client:
        assert client.get("/health").status_code == 200
        assert len(_retention_threads()) == 1
    assert not _retention_threads()


def test_without_retention_daily_no_prune_runs(engine, settings) -> None:  # type: ignore[no-untyped-def]
    app = create_app(settings.model_copy(update={"retention_daily": False}), assess=False)
    with TestClient(app):
        assert app.state.retention is None and not _retention_threads()
