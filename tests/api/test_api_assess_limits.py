"""POST /assess is bounded (issue 28: 200 contexts of 19,000 characters took 23 s, ten at once
165 s each): a budget of contexts and characters per request, and a number at once past which
it answers 503 with Retry-After. On a real server and the real store."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI

from api.app import create_app
from services.intake.api_keys import create_api_key
from services.store import transaction
from tests.api._server import serving

PASSAGE = "SRVO-062 BZAL alarm: the pulsecoder battery is low; replace it with the power on. "


@pytest.fixture(scope="module")
def app(engine, settings) -> FastAPI:  # type: ignore[no-untyped-def]
    bounded = settings.model_copy(update={"api_assess_max_contexts": 3, "api_assess_max_context_chars": 2_000,
                                          "api_assess_max_concurrent": 1})
    return create_app(bounded, assess=False)


@pytest.fixture()
def client(app: FastAPI, clean_db, settings) -> Iterator[httpx.Client]:  # type: ignore[no-untyped-def]
    with transaction(settings) as session:
        key = create_api_key(name="assessor", session=session).key
    with serving(app) as url, httpx.Client(base_url=url, timeout=60, headers={"X-API-Key": key}) as http:
        yield http


def _record(contexts: int, chars_each: int) -> dict:  # type: ignore[type-arg]
    text = (PASSAGE * (chars_each // len(PASSAGE) + 1))[:chars_each]
    return {"question": "How do I clear SRVO-062?", "answer": "Replace the battery [1].",
            "contexts": [{"text": text} for _ in range(contexts)]}


@pytest.mark.parametrize(("contexts", "chars_each"), [(4, 100), (2, 1_500)], ids=["too many contexts", "too many characters"])
def test_an_assessment_over_the_budget_is_422_and_points_at_post_runs(client, contexts, chars_each):  # type: ignore[no-untyped-def]
    response = client.post("/assess", params={"judges": "false"}, json=_record(contexts, chars_each))
    assert response.status_code == 422, response.text
    assert "POST /runs" in response.json()["detail"] and "API_ASSESS_MAX_CONTEXT" in response.json()["detail"]


def test_an_assessment_within_the_budget_is_answered(client):  # type: ignore[no-untyped-def]
    response = client.post("/assess", params={"judges": "false"}, json=_record(3, 600))
    assert response.status_code == 200, response.text
    assert response.json()["judges"] is False


def test_past_the_assessments_at_once_it_is_503_with_retry_after(app, client):  # type: ignore[no-untyped-def]
    with app.state.assess_slots.taken():  # the one slot, held as a running assessment holds it
        busy = client.post("/assess", params={"judges": "false"}, json=_record(1, 200))
    assert busy.status_code == 503 and busy.headers["Retry-After"] == "1"
    assert "API_ASSESS_MAX_CONCURRENT" in busy.json()["detail"]
    assert client.post("/assess", params={"judges": "false"}, json=_record(1, 200)).status_code == 200  # slot given back
