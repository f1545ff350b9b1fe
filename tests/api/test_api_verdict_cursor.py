"""GET /runs pages by a keyset cursor (issues 28 and 32), on a real server: following `next`
returns every reviewed run of the key's app exactly once while new verdicts arrive between
the pages; `resume` picks up later reviews; the old `reviewed_since` time still starts a
pull; a cursor the API did not give is a 422."""

from __future__ import annotations

import httpx
import pytest

from services.review.queue import submit_review
from tests.api._server import bearer, new_key, real_server
from tests.api.test_api_apps import assess_directly, push

base_url, client = real_server(api_verdict_settle_seconds=0)
EPOCH = "1970-01-01T00:00:00Z"


@pytest.fixture()
def key(clean_db, settings) -> str:  # type: ignore[no-untyped-def]
    return new_key(settings, name="support-bot", app="support")


def page(base_url: str, key: str, **params: object) -> dict[str, object]:
    response = httpx.get(f"{base_url}/runs", headers=bearer(key), params=params)  # type: ignore[arg-type]
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def test_the_cursor_returns_every_reviewed_run_once_while_verdicts_arrive_between_pages(base_url, key, settings):  # type: ignore[no-untyped-def]
    runs = [assess_directly(settings, r["intake_id"]) for r in push(base_url, key, *(
        {"question": f"Question {i}?", "answer": "An answer.", "trace_id": f"t-{i}", "contexts": []} for i in range(14)))]
    other_app = new_key(settings, name="other", app="other")
    [foreign] = [assess_directly(settings, r["intake_id"]) for r in push(base_url, other_app, {
        "question": "Not yours?", "answer": "No.", "trace_id": "t-0", "contexts": []})]
    submit_review(foreign, expected_version=0, action="approve", reviewer="ben")  # never in this app's pages
    waiting = list(runs)
    for run_id in waiting[:5]:
        submit_review(run_id, expected_version=0, action="approve", reviewer="ana")
    del waiting[:5]

    seen: list[int] = []
    answer = page(base_url, key, reviewed_since=EPOCH, limit=3)
    while True:
        seen += [r["run_id"] for r in answer["runs"]]  # type: ignore[attr-defined]
        for run_id in waiting[:2]:  # verdicts keep coming while the client pages
            submit_review(run_id, expected_version=0, action="approve", reviewer="ben")
        del waiting[:2]
        if answer["next"] is None and not answer["runs"] and not waiting:
            break
        if answer["next"] is not None:
            assert answer["next"] == answer["resume"] and len(answer["runs"]) == 3  # type: ignore[arg-type]
        answer = page(base_url, key, cursor=answer["next"] or answer["resume"], limit=3)  # at the end: poll on
    assert not waiting and len(seen) == len(set(seen)) and sorted(seen) == sorted(runs)  # each once, none missed

    # The last `resume` is where a later poll starts: a run reviewed again comes again, once.
    assert page(base_url, key, cursor=answer["resume"])["runs"] == []
    submit_review(runs[3], expected_version=1, action="flag", reviewer="ana", flag_reason="wrong answer")
    later = page(base_url, key, cursor=answer["resume"])
    assert [(r["run_id"], r["verdict"], r["review_version"]) for r in later["runs"]] == [(runs[3], "flagged", 2)]
    assert later["next"] is None and later["resume"] != answer["resume"]


def test_reviewed_since_still_starts_a_pull_and_bad_paging_is_422(base_url, key, settings):  # type: ignore[no-untyped-def]
    [run_id] = [assess_directly(settings, r["intake_id"]) for r in push(base_url, key, {
        "question": "Q?", "answer": "A.", "trace_id": "only", "contexts": []})]
    review = submit_review(run_id, expected_version=0, action="approve", reviewer="ana")
    at = review.created_at.isoformat()
    assert [r["run_id"] for r in page(base_url, key, reviewed_since=at)["runs"]] == [run_id]  # inclusive, as before
    assert page(base_url, key, reviewed_since="2999-01-01T00:00:00")["runs"] == []
    for params in ({}, {"reviewed_since": EPOCH, "cursor": page(base_url, key, reviewed_since=EPOCH)["resume"]},
                   {"cursor": "not-a-cursor"}, {"cursor": "djE6eDox"}, {"cursor": "x" * 201}):
        response = httpx.get(f"{base_url}/runs", headers=bearer(key), params=params)
        assert response.status_code == 422, (params, response.text)
