"""Seed 000's gaps as additional context (issue 30, preset option gaps_as_context): a refined
iteration searches each gap query on its own and gives what it found to the generator after the
question's chunks, labelled with the gap query, deduplicated and within a token budget."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx2

from services.answering import pipeline
from services.answering.gap_context import select_gap_context, with_gap_context
from services.answering.llm.anthropic_backend import AnthropicBackend
from services.answering.llm.base import Generation, chunk_block, gap_query_of
from services.answering.offline import MAX_CANDIDATES, _candidates
from services.answering.presets import get_preset, with_thresholds
from services.answering.runs import load_run
from services.domain import Hit, RetrievalResult
from services.scoring.weights import DEFAULT_PROFILE
from tests.services.test_anthropic_backend import message, tool_use
from tests.services.test_pipeline import ScriptedBackend, demo_docs  # noqa: F401  (fixture)

QUESTION = "What does SRVO-062 mean?"
GAP = "DSZ dual-check safety zones"
GAP_QUERY = f"{GAP} What does SRVO-062 mean?"  # seed 000: the gap, then the question's first five words


def _hit(chunk_id: int, text: str, rank: int = 1) -> Hit:
    return Hit(chunk_id=chunk_id, document_id=chunk_id, external_id=f"d{chunk_id}", title=f"T{chunk_id}", text=text,
               rank=rank, fused_score=1.0 / rank)


def _result(query: str, *hits: Hit) -> RetrievalResult:
    return RetrievalResult(query=query, mode="hybrid", hits=hits)


class GapBackend(ScriptedBackend):
    """Finds one gap (the DSZ zones) and records what each generate() call read."""

    def __init__(self, reflection_scores: Sequence[float]) -> None:
        super().__init__(reflection_scores)
        self.read: list[list[Hit]] = []

    def generate(self, query: str, chunks: Sequence[Hit]) -> Generation:
        self.read.append(list(chunks))
        return super().generate(query, chunks)

    def identify_gaps(self, query: str, answer: str, chunks: Sequence[Hit]) -> list[str]:
        return [GAP]


def _config(on: bool) -> Any:
    # One chunk a search, so the question's retrieval leaves the DSZ document for the gap query.
    return get_preset("balanced", k=1, max_refinement_attempts=1, gaps_as_context=on)


# --- the pipeline -------------------------------------------------------------------------------


def test_a_gap_querys_passage_is_in_the_refined_answers_contexts_labelled(demo_docs):  # noqa: F811
    events: list[Any] = []
    backend = GapBackend((0.3, 0.9))
    run = pipeline.run(QUESTION, "balanced", DEFAULT_PROFILE, events.append, backend=backend, config=_config(True))
    assert run.route[0] == "REFINE_QUERY" and len(run.iterations) == 2
    first, refined = backend.read
    assert all(gap_query_of(h) is None for h in first)
    # the generator read the question's chunks, then the gap query's passage, labelled with that query
    added = [h for h in refined if gap_query_of(h) is not None]
    assert added and refined[-len(added):] == added
    assert {gap_query_of(h) for h in added} == {GAP_QUERY}
    assert any(h.external_id == "dsz.md" for h in added)
    # ...once: nothing the question's retrieval already holds is repeated
    ids = [h.chunk_id for h in refined]
    assert len(ids) == len(set(ids))
    # the gap query is searched beside the question's retrieval, not fused into it
    assert GAP_QUERY not in run.iterations[1].query_used.split(" | ")
    # the stored iteration holds them after its own hits, labelled, for the run detail and the Ask page
    stored = load_run(run.run_id).iterations[1]
    labelled = [h for h in stored.hits if h.origin == f"gap:{GAP_QUERY}"]
    assert [h.chunk_id for h in labelled] == [h.chunk_id for h in added]
    assert stored.hits[-len(labelled):] == tuple(labelled) and [h.rank for h in stored.hits] == list(
        range(1, len(stored.hits) + 1))
    (event,) = [e for e in events if e.event_type == "gap_context"]
    assert event.data["queries"] == [GAP_QUERY] and [h["chunk_id"] for h in event.data["hits"]] == ids[-len(added):]
    assert run.config["gaps_as_context"] is True


def test_switched_off_the_gap_queries_join_the_fused_pool_as_before(demo_docs):  # noqa: F811
    events: list[Any] = []
    backend = GapBackend((0.3, 0.9))
    run = pipeline.run(QUESTION, "balanced", DEFAULT_PROFILE, events.append, backend=backend, config=_config(False))
    assert len(backend.read) == 2
    assert not any(gap_query_of(h) for chunks in backend.read for h in chunks)
    assert not any(h.origin and h.origin.startswith("gap:") for it in run.iterations for h in it.hits)
    assert GAP_QUERY in run.iterations[1].query_used.split(" | ")
    assert "gap_context" not in [e.event_type for e in events]
    assert get_preset("balanced").gaps_as_context is False


def test_the_notes_presets_pass_the_gaps_on_as_context():
    assert get_preset("as-written").gaps_as_context and get_preset("full").gaps_as_context
    assert not any(get_preset(name).gaps_as_context for name in ("minimal", "balanced", "research"))
    # a run can ask for either loop over its preset (Ask page options, pipeline.run(options=...))
    assert with_thresholds(get_preset("balanced"), gaps_as_context=True).gaps_as_context
    assert not with_thresholds(get_preset("as-written"), gaps_as_context=False).gaps_as_context


# --- choosing the passages ------------------------------------------------------------------------


def test_gap_passages_are_deduplicated_and_kept_within_the_budget():
    present = [_hit(1, "already read"), _hit(2, "same words, other chunk")]
    found = [("q1", _result("q1", _hit(1, "already read"), _hit(3, "one two three"), _hit(4, "never reached", 3))),
             ("q2", _result("q2", _hit(9, "same words, other chunk"), _hit(5, "a b c d e f g h"), _hit(6, "x y", 3))),
             ("q3", _result("q3", _hit(3, "one two three")))]
    context = select_gap_context(found, present, per_query=2, budget_tokens=5, count_tokens=lambda t: len(t.split()))
    # q1: chunk 1 is present; q2: chunk 9 repeats a present text, chunk 5 (8 tokens) passes the
    # budget; q3: chunk 3 was taken for q1. Each query gives at most its first two.
    assert [(h.chunk_id, h.origin) for h in context.hits] == [(3, "gap:q1")]
    assert (context.tokens, context.duplicates, context.over_budget) == (3, 3, 1)
    assert "1 passage(s) from 3 gap queries" in context.message and "over the token budget" in context.message
    stored = with_gap_context(_result("q", *present), context.hits)
    assert [(h.chunk_id, h.rank) for h in stored.hits] == [(1, 1), (2, 1), (3, 3)]
    assert with_gap_context(_result("q", *present), ()) == _result("q", *present)


def test_the_offline_backend_reads_the_gap_passages_however_long_the_question_chunks_are():
    sentences = " ".join(f"Sentence number {i} describes the widget in detail." for i in range(MAX_CANDIDATES + 5))
    gap = _hit(7, "The widget's torque value is 12 newton metres.", 9)
    chunks = [_hit(1, sentences), Hit(**{**gap.to_dict(), "origin": "gap:torque value widget"})]
    read = _candidates(chunks)
    assert any(index == 1 and "torque" in seg.scoring for index, _, seg in read)
    # without gap passages the candidates are what they always were: the first MAX_CANDIDATES
    assert len(_candidates(chunks[:1])) == MAX_CANDIDATES


# --- the model's prompt ---------------------------------------------------------------------------


def test_the_prompt_of_a_model_names_the_gap_context(demo_docs):  # noqa: F811
    """Claude through the real SDK (MockTransport): the refined iteration's generate request
    holds the gap query's passage, labelled as additional context; the first one does not."""
    requests: list[dict[str, Any]] = []
    reflections = iter([0.3, 0.95])

    def reply(request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content)
        requests.append(body)
        tool = body["tool_choice"]["name"]
        answers: dict[str, Any] = {
            "submit_answer": {"answer": "SRVO-062 means the backup battery voltage dropped [1].",
                              "citations": [{"document": 1, "quote": "SRVO-062 means the pulsecoder backup"}]},
            "submit_grade": {"score": 3, "gaps": [GAP], "refinements": []},
            "submit_gaps": {"gaps": [GAP]},
            "submit_query": {"query": "SRVO-062 meaning backup battery"},
        }
        if tool == "submit_reflection":
            score = next(reflections, 0.95)
            answers[tool] = {"answer_grounded": score > 0.5, "hallucination_detected": False,
                             "reflection_score": score, "sources_cited": ["1"], "reflection_reason": "scripted",
                             "needs_regeneration": score < 0.5}
        return httpx2.Response(200, json=message(tool_use(tool, answers[tool])))

    backend = AnthropicBackend(api_key="sk-ant-test-SECRET", model="claude-sonnet-4-5",
                               http_client=httpx2.Client(transport=httpx2.MockTransport(reply)))
    run = pipeline.run(QUESTION, "balanced", DEFAULT_PROFILE, backend=backend, config=_config(True))
    assert run.route[0] == "REFINE_QUERY"
    prompts = [r["messages"][0]["content"] for r in requests if r["tool_choice"]["name"] == "submit_answer"]
    assert len(prompts) == 2
    assert "additional context" not in prompts[0]
    dsz = next(h for h in run.iterations[1].hits if gap_query_of(h) is not None)
    assert f"(additional context, found by the gap query {GAP_QUERY!r})" in prompts[1] and dsz.text in prompts[1]
    assert "are additional context: follow-up searches found them" in prompts[1]


def test_a_block_without_gap_passages_is_unchanged():
    hits = [_hit(1, "alpha"), _hit(2, "beta")]
    assert chunk_block(hits) == "Document 1: T1\nalpha\n\nDocument 2: T2\nbeta"
