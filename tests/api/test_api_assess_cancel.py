"""POST /assess gives up (issue 28), on a real server with a real local model server that takes
5 s a call: past API_ASSESS_TIMEOUT_S the answer is a 504, and when the client disconnects the
work is dropped; either way the assessment makes no further call to the model (without the
cancellation its judges call it again after the first), and its slot comes back once the call
in flight, if any, ends."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from fastapi import FastAPI

from api.app import create_app
from tests.api._server import bearer, new_key, serving

MODEL_SECONDS = 5.0
TIMEOUT_S = 2.0
RECORD = {"question": "How do I clear alarm SRVO-062?", "answer": "Replace the pulsecoder battery.",
          "contexts": [{"text": "SRVO-062 BZAL: the pulsecoder battery is low; replace it.", "score": 0.8}]}


class SlowModel(BaseHTTPRequestHandler):
    calls = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        type(self).calls += 1
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        time.sleep(MODEL_SECONDS)
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"error": {"message": "too slow anyway"}}')

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def model_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


@pytest.fixture(scope="module")
def app(engine, settings, model_url) -> FastAPI:  # type: ignore[no-untyped-def]
    return create_app(settings.model_copy(update={
        "llm_backend": "openai-compatible", "llm_base_url": model_url, "llm_model": "slow", "llm_max_retries": 0,
        "llm_timeout_s": 30, "api_assess_timeout_s": TIMEOUT_S, "api_assess_max_concurrent": 1}), assess=False)


@pytest.fixture(scope="module")
def base_url(app: FastAPI) -> Iterator[str]:
    with serving(app) as url:
        yield url


@pytest.fixture()
def key(base_url, clean_db, settings) -> str:  # type: ignore[no-untyped-def]
    key = new_key(settings, name="assessor")
    # One judged assessment first, whatever its answer, so every model it loads is loaded and
    # the test's own call reaches the model server within the timeout.
    httpx.post(f"{base_url}/assess", json=RECORD, headers=bearer(key), timeout=60)
    wait_for_the_slot(base_url, key)
    SlowModel.calls = 0
    return key


def wait_for_the_slot(base_url: str, key: str) -> int:
    """Assess without judges until the only slot is free again: how many times it was busy."""
    busy = 0
    for _ in range(600):
        answer = httpx.post(f"{base_url}/assess", json=RECORD, params={"judges": "false"}, headers=bearer(key), timeout=60)
        if answer.status_code != 503:
            assert answer.status_code in (200, 504), answer.text
            if answer.status_code == 200:
                return busy
        busy += 1
        time.sleep(0.2)
    raise AssertionError("the slot never came back")


def test_past_the_timeout_the_answer_is_504_and_the_model_is_not_called_again(base_url, key):  # type: ignore[no-untyped-def]
    answer = httpx.post(f"{base_url}/assess", json=RECORD, headers=bearer(key), timeout=60)
    assert answer.status_code == 504 and "API_ASSESS_TIMEOUT_S" in answer.json()["detail"]
    wait_for_the_slot(base_url, key)  # held until the call in flight, if any, ended
    # Left to run, the judges would call the model again after the first call's 5 s. (Under
    # load the deadline can come before the first call: then there is none.)
    assert SlowModel.calls <= 1


def test_a_client_that_disconnects_stops_the_assessment(base_url, key):  # type: ignore[no-untyped-def]
    with pytest.raises(httpx.ReadTimeout):  # gives up before the server's own timeout
        httpx.post(f"{base_url}/assess", json=RECORD, headers=bearer(key), timeout=httpx.Timeout(60, read=TIMEOUT_S * 0.75))
    wait_for_the_slot(base_url, key)
    # Left to run, the judges would call the model again after the first call's 5 s.
    assert SlowModel.calls <= 1
