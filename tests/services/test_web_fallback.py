"""CRAG's web fallback against a real local HTTP server speaking SearxNG's `format=json`:
answered from it, and its timeout and a malformed reply as warnings on a stored run."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest

from services.answering import pipeline
from services.answering.offline import OfflineBackend
from services.answering.runs import load_run
from services.scoring.weights import DEFAULT_PROFILE

QUESTION = "What does SRVO-062 mean?"
PAGES = [
    {"url": "https://robots.example/srvo-062", "title": "SRVO-062 BZAL alarm",
     "content": "SRVO-062 means the pulsecoder backup battery is empty and the encoder lost its count."},
    {"url": "https://forum.example/t/42", "title": "Battery swap", "content": "Swap the battery with power on."},
    {"url": "https://forum.example/t/43", "title": "No snippet", "content": ""},  # nothing to read: left out
]


class _SearxNG(BaseHTTPRequestHandler):
    """Answers GET /search?q=...&format=json as the server's `mode` says."""

    def do_GET(self) -> None:  # noqa: N802 (the http.server hook's name)
        server = self.server
        server.requests.append(parse_qs(urlsplit(self.path).query))  # type: ignore[attr-defined]
        mode = server.mode  # type: ignore[attr-defined]
        if mode == "slow":
            time.sleep(3)  # past the client's timeout: the test does not wait for it
        body = b"<html>rate limited</html>" if mode == "malformed" else json.dumps({"query": "q", "results": PAGES}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the slow reply: the client gave up waiting, as it should

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture()
def searxng() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SearxNG)
    server.daemon_threads = True
    server.block_on_close = False
    server.mode = "ok"  # type: ignore[attr-defined]
    server.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture()
def corpus(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    from services.corpus.ingest import ingest_paths

    (tmp_path / "grease.md").write_text("# Reducer grease\nReplace the J2 reducer grease every 20,000 hours.",
                                        encoding="utf-8")
    ingest_paths([tmp_path])


def _run(settings, server: ThreadingHTTPServer):  # type: ignore[no-untyped-def]
    """One iteration, CRAG's verdict INCORRECT whatever the retrieval, the web as the fallback."""
    host, port = server.server_address[:2]
    configured = settings.model_copy(update={
        "web_search_url": f"http://{host}:{port}", "web_search_timeout_s": 0.5, "max_refinement_attempts": 0,
        "crag_correct_threshold": 1.0, "crag_incorrect_threshold": 1.0})
    run = pipeline.run(QUESTION, "balanced", DEFAULT_PROFILE, backend=OfflineBackend(), settings=configured)
    return load_run(run.run_id)  # whatever the web did, the run was stored


def test_incorrect_answers_from_the_web_results_each_saying_where_it_came_from(corpus, settings, searxng):
    stored = _run(settings, searxng)
    first = stored.iterations[0]
    host = f"web:127.0.0.1:{searxng.server_address[1]}"
    assert searxng.requests[0]["q"] == [QUESTION] and searxng.requests[0]["format"] == ["json"]
    assert [h.external_id for h in first.hits] == [PAGES[0]["url"], PAGES[1]["url"]]  # the empty snippet left out
    assert {h.origin for h in first.hits} == {host} and all(h.chunk_id < 0 for h in first.hits)
    assert "answered from " + host + " alone" in first.crag.action_outcome
    assert "pulsecoder backup battery" in stored.final_answer


@pytest.mark.parametrize(("mode", "said"), [("slow", "did not answer within 0.5 s"), ("malformed", "did not answer JSON")])
def test_a_web_search_that_times_out_or_answers_nonsense_is_a_warning_on_a_stored_run(corpus, settings, searxng,
                                                                                     mode, said):
    searxng.mode = mode  # type: ignore[attr-defined]
    stored = _run(settings, searxng)
    first = stored.iterations[0]
    assert first.errors[0]["stage"] == "fallback" and said in first.errors[0]["message"]
    assert "failed, kept the corpus hits" in first.crag.action_outcome
    assert {h.origin for h in first.hits} == {"collection:default"}
    assert any(e.event_type == "fallback_failed" for e in stored.events)


def test_json_in_another_shape_is_refused_with_the_expected_shape(searxng):
    from services.errors import WorkbenchError
    from services.retrieval.web_search import WebSearchFallback

    class _Other(_SearxNG):
        def do_GET(self) -> None:  # noqa: N802
            body = json.dumps({"items": [{"link": "https://x.example"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    searxng.RequestHandlerClass = _Other
    host, port = searxng.server_address[:2]
    with pytest.raises(WorkbenchError, match="not SearxNG's"):
        WebSearchFallback(f"http://{host}:{port}", timeout_s=2).search("anything", 5)
