"""Bad requests from a key holder get bounded, precise answers (issue 28): a batch of bad records
lists its first problems and counts the rest; a character the store cannot hold in a path or
query is a 422, not a 500. On a real server and the real store."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from api.errors import MAX_LISTED_PROBLEMS
from services.store import transaction
from tests.api._server import real_server

UNKNOWN_FIELDS = 20


base_url, client = real_server(key_name="careless-client")


def test_a_batch_of_bad_records_lists_the_first_problems_and_counts_them_all(client, settings):  # type: ignore[no-untyped-def]
    # Each record: question missing, answer a number, and twenty misspelt fields: 22 problems.
    bad = {"answer": 7, **{f"unknown_{i}": i for i in range(UNKNOWN_FIELDS)}}
    batch = [bad] * settings.api_max_batch
    response = client.post("/runs", json=batch)
    assert response.status_code == 422
    answer = response.json()
    assert answer["problems"] == settings.api_max_batch * (UNKNOWN_FIELDS + 2)
    assert len(answer["detail"]) == MAX_LISTED_PROBLEMS
    assert answer["detail"][0]["loc"][:2] == ["body", 0]
    assert answer["message"].endswith(f"and {answer['problems'] - 5} more")
    assert len(response.content) < 50_000  # the first problems, not a megabyte per hundred records
    with transaction(settings) as session:
        assert session.execute(text("SELECT count(*) FROM run_intake")).scalar_one() == 0


def test_a_single_bad_record_lists_every_problem(client):  # type: ignore[no-untyped-def]
    response = client.post("/runs", json={"question": "q", "answer": "a", "contexts": [{"txt": "x"}]})
    assert response.status_code == 422
    assert response.json()["problems"] == len(response.json()["detail"]) == 2  # text missing, txt unknown


@pytest.mark.parametrize("path", ["/runs/by-trace-id/%00", "/runs/by-trace-id/trace-%00-1"])
def test_a_character_the_store_cannot_hold_in_a_path_is_422(client, path):  # type: ignore[no-untyped-def]
    response = client.get(path)
    assert response.status_code == 422, response.text
    assert "trace id contains" in response.json()["detail"]


def test_a_nul_in_the_assess_collection_is_422(client):  # type: ignore[no-untyped-def]
    response = client.post("/assess", params={"collection": "docs\x00", "judges": "false"},
                           json={"question": "q", "answer": "a", "contexts": [{"text": "a passage"}]})
    assert response.status_code == 422 and "collection contains a NUL" in response.json()["detail"]
