"""A real uvicorn server for an app, on a free port, in a thread of the test process; keys for
it; and `real_server`, the module's server and a keyed client as fixtures."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from api.app import create_app
from services.intake.api_keys import DEFAULT_APP, create_api_key
from services.settings import Settings
from services.store import transaction


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(app: FastAPI, *, log_level: str = "warning") -> Iterator[str]:
    """The app's base URL while it serves; shut down (lifespan included) afterwards."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level=log_level))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=70)
        assert not thread.is_alive(), "uvicorn did not shut down"


def new_key(settings: Settings, *, name: str = "client", app: str = DEFAULT_APP, scope: str = "push") -> str:
    """A fresh API key of `app` with `scope`, in the store the settings name."""
    with transaction(settings) as session:
        return create_api_key(name=name, app=app, scope=scope, session=session).key


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def real_server(*, key_name: str = "client", assess: bool = False, timeout: float = 60,
                **settings_update: Any) -> tuple[Any, Any]:
    """The two fixtures most API test modules want, as `base_url, client = real_server(...)`:
    `base_url`, one real server for the module (its settings with `settings_update`, without
    the assessment worker unless `assess`), and `client`, an httpx client on it carrying a
    new key named `key_name` (of the default app, scope push) in a store emptied first."""

    @pytest.fixture(scope="module", name="base_url")
    def base_url_fixture(engine, settings) -> Iterator[str]:  # type: ignore[no-untyped-def]
        api_settings = settings.model_copy(update=settings_update) if settings_update else settings
        with serving(create_app(api_settings, assess=assess)) as url:
            yield url

    @pytest.fixture(name="client")
    def client_fixture(base_url: str, clean_db, settings) -> Iterator[httpx.Client]:  # type: ignore[no-untyped-def]
        with httpx.Client(base_url=base_url, timeout=timeout, headers=bearer(new_key(settings, name=key_name))) as http:
            yield http

    return base_url_fixture, client_fixture
