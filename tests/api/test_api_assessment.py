"""Pushed runs through a real uvicorn server with its assessment worker, on the real store and
model: assessed in the background, shown in the Review queue page, exported with their trace
ids, and their verdicts pulled back; POST /assess answers at once and stores nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from api.app import create_app
from app_pages.common import REVIEWER_KEY
from services.answering.runs import load_run
from services.intake.api_keys import create_api_key
from services.review.export import ExportFilters, export_records
from services.review.queue import current_review_state, submit_review
from services.store import transaction
from tests.api._server import serving

PAGE = str(Path(__file__).resolve().parents[2] / "app_pages" / "review.py")
RUN = {"question": "How do I clear alarm SRVO-062 after the battery ran low?",
       "answer": "Replace the pulsecoder battery with the controller on, then remaster the axis.",
       "trace_id": "prod-0007",
       "contexts": [{"text": "SRVO-062 BZAL alarm: the pulsecoder backup battery is low. Replace it with the "
                             "controller on, then remaster the axis.", "document_id": "alarms/srvo-062", "rank": 1},
                    {"text": "Remastering restores the axis position after the encoder count was lost.",
                     "source": "manuals/mastering.pdf", "rank": 2}],
       "metadata": {"app": "support-bot", "model": "gpt-x", "user": "u-19", "extra": {"latency_ms": 840}}}
# The first record waits for the embedding model to load; on a loaded 2-core machine (a clean-clone
# run beside two benchmarks) that and the first judged assessment took over 180 s once.
ASSESSMENT_TIMEOUT_S = 360


@pytest.fixture(scope="module")
def base_url(engine, settings) -> Iterator[str]:  # type: ignore[no-untyped-def]
    with serving(create_app(settings.model_copy(update={"api_verdict_settle_seconds": 0}))) as url:
        yield url


@pytest.fixture()
def auth(clean_db, settings) -> dict[str, str]:  # type: ignore[no-untyped-def]
    with transaction(settings) as session:
        return {"Authorization": f"Bearer {create_api_key(name='support-bot', session=session).key}"}


@pytest.fixture()
def client(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=120) as http:
        yield http


def push(client: httpx.Client, auth: dict[str, str], run: dict[str, Any], **params: str) -> int:
    response = client.post("/runs", json=run, headers=auth, params=params)
    assert response.status_code == 202, response.text
    return int(response.json()["runs"][0]["intake_id"])


def wait_assessed(client: httpx.Client, auth: dict[str, str], intake_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + ASSESSMENT_TIMEOUT_S
    while True:
        status = client.get(f"/runs/{intake_id}", headers=auth).json()
        if status["status"] != "queued":
            return status  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, "the worker did not assess the pushed run"
        time.sleep(0.2)


def count(table: str) -> int:
    with transaction() as session:
        return int(session.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_a_pushed_run_is_assessed_reviewed_exported_and_its_verdict_pulled_back(client, auth):  # type: ignore[no-untyped-def]
    intake_id = push(client, auth, RUN)
    status = wait_assessed(client, auth, intake_id)
    assert status["status"] == "assessed" and status["error"] is None, status
    assert status["review_status"] in ("pending", "auto_accepted") and 0 <= status["confidence"] <= 1
    run = load_run(status["run_id"])
    assert (run.source, run.query, run.final_answer) == ("api", RUN["question"], RUN["answer"])
    assert run.reflection_score is not None and run.crag_verdict is not None  # judged by default
    assert "bm25_dense_agreement" in run.config["assessment"]["not_computed"]

    # the Review queue page lists it and shows where it came from and what could not be computed
    page = AppTest.from_file(PAGE, default_timeout=120)
    page.session_state[REVIEWER_KEY] = "ana"
    page.run()
    page.multiselect(key="review.statuses").set_value([]).run()  # every status: it may have been auto-accepted
    queue = next(d.value for d in page.dataframe if "disagreement" in d.value.columns)
    assert status["run_id"] in list(queue["run id"])
    page.selectbox(key="review.pick").select(status["run_id"]).run()
    assert not page.exception, page.exception
    shown = [t.value for t in page.text]
    assert any("Source: api" in t and "trace id prod-0007" in t for t in shown), shown
    assert any(c.value.startswith("Not computed: BM25-dense agreement") for c in page.caption)
    assert RUN["contexts"][1]["text"] in shown and "[2] manuals/mastering.pdf" in shown

    exported = [r for r in export_records(ExportFilters()) if r["run_id"] == run.run_id]
    assert [(r["trace_id"], r["source"], r["external"]) for r in exported] == [
        ("prod-0007", "api", {"app": "support-bot", "model": "gpt-x", "user": "u-19", "extra": {"latency_ms": 840}})]

    before = (datetime.now(UTC) - timedelta(seconds=5)).isoformat()
    assert client.get("/runs", params={"reviewed_since": before}, headers=auth).json()["runs"] == []
    _, version = current_review_state(run.run_id)  # type: ignore[arg-type]
    submit_review(run.run_id, expected_version=version, action="correct", reviewer="ana",  # type: ignore[arg-type]
                  corrected_answer="Replace the battery, then remaster.", comment="shorter")
    pulled = client.get("/runs", params={"reviewed_since": before, "limit": 10}, headers=auth)
    assert pulled.status_code == 200
    [verdict] = pulled.json()["runs"]
    assert {k: verdict[k] for k in ("intake_id", "trace_id", "run_id", "verdict", "corrected_answer", "reviewer",
                                    "comment")} == {
        "intake_id": intake_id, "trace_id": "prod-0007", "run_id": run.run_id, "verdict": "corrected",
        "corrected_answer": "Replace the battery, then remaster.", "reviewer": "ana", "comment": "shorter"}
    assert datetime.fromisoformat(verdict["reviewed_at"]) >= datetime.fromisoformat(before)
    assert client.get(f"/runs/{intake_id}", headers=auth).json()["verdict"] == "corrected"
    later = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    assert client.get("/runs", params={"reviewed_since": later}, headers=auth).json()["runs"] == []


def test_judges_false_is_kept_with_the_pushed_record(client, auth):  # type: ignore[no-untyped-def]
    intake_id = push(client, auth, {**RUN, "trace_id": "prod-0008"}, judges="false")
    status = wait_assessed(client, auth, intake_id)
    run = load_run(status["run_id"])
    assert (run.reflection_score, run.grade, run.crag_verdict) == (None, None, None)
    assert run.config["assessment"]["judges"] is False and status["review_status"] == "pending"


def test_post_assess_answers_at_once_and_stores_nothing(client, auth):  # type: ignore[no-untyped-def]
    body = {"question": RUN["question"], "answer": RUN["answer"], "contexts": RUN["contexts"]}
    judged = client.post("/assess", json=body, headers=auth)
    assert judged.status_code == 200, judged.text
    result = judged.json()
    assert set(result["confidence"]["components"]) == {"top_score", "score_gap", "consensus", "bm25_dense_agreement",
                                                       "low_spread", "entity_support", "low_diversity"}
    assert result["status"] in ("pending", "auto_accepted") and result["reflection"] is not None
    assert result["crag"]["verdict"] in ("CORRECT", "AMBIGUOUS", "INCORRECT") and result["grade"]["score"] in range(1, 6)
    assert "bm25_dense_agreement" in result["not_computed"] and result["scores"]["dense_similarity"].startswith("computed")
    assert [h["external_id"] for h in result["hits"]] == ["alarms/srvo-062", "manuals/mastering.pdf"]

    retrieval_only = client.post("/assess", json={k: body[k] for k in ("question", "contexts")}, headers=auth,
                                 params={"judges": "false"}).json()
    assert (retrieval_only["crag"], retrieval_only["reflection"], retrieval_only["status"]) == (None, None, "pending")
    assert retrieval_only["confidence"] == result["confidence"]  # the same breakdown of the same contexts

    # the record POST /runs takes is taken here too: what only a stored run keeps is ignored, and said so
    whole = client.post("/assess", json=RUN, headers=auth, params={"judges": "false"})
    assert whole.status_code == 200, whole.text
    assert set(whole.json()["ignored"]) == {"trace_id", "metadata"} and retrieval_only["ignored"] == {}
    assert whole.json()["confidence"] == retrieval_only["confidence"]

    assert client.post("/assess", json=body).status_code == 401
    bad = client.post("/assess", json={**body, "contexts": [{"rank": 1}]}, headers=auth)
    assert bad.status_code == 422 and "body.contexts.0.text" in bad.json()["message"]
    assert (count("runs"), count("run_intake")) == (0, 0)


def test_pulling_verdicts_needs_a_key_and_a_time(client, auth):  # type: ignore[no-untyped-def]
    assert client.get("/runs", params={"reviewed_since": "2026-01-01T00:00:00Z"}).status_code == 401
    missing = client.get("/runs", headers=auth)
    assert missing.status_code == 422 and "reviewed_since" in missing.json()["message"]
    assert client.get("/runs", params={"reviewed_since": "yesterday"}, headers=auth).status_code == 422
    assert client.get("/runs", params={"reviewed_since": "2026-01-01", "limit": 0}, headers=auth).status_code == 422


def test_the_worker_starts_and_stops_with_the_app(engine, settings):  # type: ignore[no-untyped-def]
    app = create_app(settings)
    with serving(app):
        deadline = time.monotonic() + 30
        while app.state.worker.rounds == 0:
            assert time.monotonic() < deadline, "the worker never looked at the queue"
            time.sleep(0.05)
        assert app.state.worker.alive and app.state.worker.assembling
    assert not app.state.worker.alive  # stopped by the lifespan's shutdown, not left running
    assert not app.state.worker.assembling
    assert create_app(settings, assess=False).state.worker is None
