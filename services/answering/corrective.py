"""CRAG's corrective actions (seed 002): the verdict on an iteration's retrieval, and the
fallback source it turns to when the corpus does not answer, each hit saying where it came from."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from services.domain import Hit, RetrievalResult
from services.errors import WorkbenchError
from services.scoring.crag import (
    CragVerdict,
    FallbackSource,
    RetrievalVerdict,
    decompose_then_recompose,
    evaluate_retrieval,
)

if TYPE_CHECKING:  # the stages pass their context in; at run time stages imports this module
    from services.answering.stages import IterationContext, Plan, RunSetup


def correct(ctx: IterationContext, result: RetrievalResult,
            vectors: np.ndarray | None) -> tuple[CragVerdict | None, Sequence[Hit]]:
    """CRAG's verdict and the chunks generation reads, where no fallback can replace the
    hits (an assessment of a run from outside judges the contexts it was given)."""
    verdict, _, chunks = correct_and_act(ctx, result, vectors)
    return verdict, chunks


def correct_and_act(ctx: IterationContext, result: RetrievalResult,
                    vectors: np.ndarray | None) -> tuple[CragVerdict | None, RetrievalResult, Sequence[Hit]]:
    """CRAG's verdict, the retrieval the answer stands on, and the chunks generation reads:
    those with a relevant strip, when any.

    Seed 002's corrective actions act when a fallback source is set: INCORRECT discards the
    corpus hits and answers from the fallback alone, AMBIGUOUS fuses both. Without one the
    verdict's outcome says so and the corpus hits stand."""
    setup = ctx.setup
    if not setup.config.enable_crag_evaluation:
        return None, result, result.hits
    verdict = ctx.timed("crag", lambda: evaluate_retrieval(setup.query, result.hits, chunk_vectors=vectors,
                                                           config=setup.config.crag))
    if verdict.verdict != RetrievalVerdict.CORRECT:
        if setup.fallback is None or ctx.plan.use_fallback:
            outcome = "fallback unavailable" if setup.fallback is None else "fallback already searched by this iteration"
            verdict = dataclasses.replace(verdict, action_outcome=outcome)
            setup.emit("fallback_unavailable", f"CRAG {verdict.verdict}: {outcome}", verdict=verdict.verdict)
        else:
            result, verdict = _act_on_verdict(ctx, result, verdict, setup.fallback)
    chunks: Sequence[Hit] = result.hits
    if verdict.kept_chunk_ids:  # decompose-then-recompose: drop chunks with no relevant strip
        kept = set(verdict.kept_chunk_ids)
        chunks = [h for h in result.hits if h.chunk_id in kept]
    setup.emit("crag_evaluated", verdict.reasoning, verdict=verdict.verdict, score=verdict.score, action=verdict.action,
               outcome=verdict.action_outcome)
    return verdict, result, chunks


def _act_on_verdict(ctx: IterationContext, result: RetrievalResult, verdict: CragVerdict,
                    fallback: FallbackSource) -> tuple[RetrievalResult, CragVerdict]:
    """Search the fallback for the planned queries; INCORRECT answers from what it found
    alone, AMBIGUOUS from both fused. A source that fails or finds nothing leaves the corpus
    hits standing, and the outcome says which happened."""
    setup = ctx.setup
    ctx.crag_fallback = True
    try:
        found = ctx.timed("fallback", lambda: search_fallback(setup, ctx.plan, fallback))
    except WorkbenchError as exc:
        return result, dataclasses.replace(verdict, action_outcome=fallback_failed(ctx, fallback, exc))
    if not found.hits:
        used, outcome = result, f"fallback {fallback.name} found nothing; kept the corpus hits"
    elif verdict.verdict == RetrievalVerdict.INCORRECT:
        used = found
        outcome = (f"discarded the {len(result.hits)} corpus hits; answered from {fallback.name} alone "
                   f"({len(found.hits)} hits)")
    else:
        used = merge_results([result, found], k=setup.config.k)
        from_fallback = sum(1 for h in used.hits if h.origin == fallback.name)
        outcome = (f"fused the corpus hits with {len(found.hits)} from {fallback.name}: {from_fallback} of the "
                   f"{len(used.hits)} kept came from it")
    setup.emit("fallback_searched", outcome, source=fallback.name, verdict=verdict.verdict, found=len(found.hits),
               used=len(used.hits))
    # The strips are recomposed from the hits the answer now stands on.
    strips = decompose_then_recompose(setup.query, used.hits, config=setup.config.crag) if used.hits else ()
    return used, dataclasses.replace(verdict, action_outcome=outcome, strips=strips,
                                     kept_chunk_ids=tuple(dict.fromkeys(s.chunk_id for s in strips)))


def strips_only(chunks: Sequence[Hit], verdict: CragVerdict | None) -> list[Hit]:
    """The chunks as generation reads them under `generate_from_strips`: each kept chunk's text
    is its relevant strips, in the order they stand in the chunk (CRAG ranks them by relevance;
    an answer reads better in the source's order). A chunk without a strip is left out; with
    no strips at all (CRAG off, or none relevant) the chunks stand whole."""
    if verdict is None or not verdict.strips:
        return list(chunks)
    by_chunk: dict[int, list[str]] = {}
    for strip in verdict.strips:
        by_chunk.setdefault(strip.chunk_id, []).append(strip.text)
    stripped = []
    for hit in chunks:
        texts = by_chunk.get(hit.chunk_id)
        if texts:
            ordered = sorted(texts, key=lambda t: (hit.text.find(t) % (len(hit.text) + 1), t))
            stripped.append(dataclasses.replace(hit, text=" ".join(ordered)))
    return stripped or list(chunks)


def fallback_failed(ctx: IterationContext, fallback: FallbackSource, exc: WorkbenchError) -> str:
    """Record a fallback that failed (timeout, unreachable, malformed reply, no such collection)
    as a warning on the iteration; the run goes on with the corpus hits."""
    outcome = f"fallback {fallback.name} failed, kept the corpus hits: {exc}"
    ctx.errors.append({"stage": "fallback", "kind": "unavailable", "message": str(exc)})
    ctx.setup.emit("fallback_failed", outcome, source=fallback.name)
    return outcome


def search_fallback(setup: RunSetup, plan: Plan, fallback: FallbackSource) -> RetrievalResult:
    """The fallback's hits for every planned query, fused, each saying it came from there."""
    results = [with_origin(fallback.search(q, setup.config.k), fallback.name) for q in plan.queries]
    return results[0] if len(results) == 1 else merge_results(results, k=setup.config.k)


def with_origin(result: RetrievalResult, origin: str) -> RetrievalResult:
    hits = tuple(h if h.origin else dataclasses.replace(h, origin=origin) for h in result.hits)
    return dataclasses.replace(result, hits=hits)


def merge_results(results: Sequence[RetrievalResult], *, k: int, rrf_k: int = 60) -> RetrievalResult:
    """Fuse the hit lists of several queries by RRF; each chunk keeps its best-ranked scores."""
    scores: dict[int, float] = {}
    best: dict[int, Hit] = {}
    for result in results:
        for hit in result.hits:
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + 1.0 / (rrf_k + hit.rank)
            if hit.chunk_id not in best or hit.rank < best[hit.chunk_id].rank:
                best[hit.chunk_id] = hit
    order = sorted(scores, key=lambda cid: (-scores[cid], cid))[:k]
    hits = tuple(dataclasses.replace(best[cid], rank=i + 1, fused_score=scores[cid]) for i, cid in enumerate(order))
    first = results[0]  # the original question: its entities are what entity support checks
    return dataclasses.replace(first, query=" | ".join(r.query for r in results), hits=hits,
                               latency_ms=sum(r.latency_ms for r in results))
