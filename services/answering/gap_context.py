"""Gaps as additional context (seed 000, preset option `gaps_as_context`): each gap-filling
query of a refined iteration is searched on its own, and its best passages are given to the
generator beside the question's retrieval, each saying which gap query found it.

Seed 000's loop asks the next search for what the last answer lacked and hands the refined
synthesis "additional context" about the gaps. Here the passages the gap queries find are that
context: not fused into the question's retrieval (which the retrieval confidence is about),
but appended after it, once each (a passage already in the context is not repeated), within a
token budget counted in the embedding model's tokens (the unit chunks are sized in).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from services.answering.llm.base import GAP_ORIGIN_PREFIX
from services.domain import Hit, RetrievalResult
from services.retrieval.embedding import token_counter
from services.retrieval.search import default_params, search_in_session
from services.store import read_transaction

if TYPE_CHECKING:  # the stages pass their context in; at run time stages imports this module
    from services.answering.stages import IterationContext


@dataclass(frozen=True)
class GapContext:
    """The passages added for the gap queries, and what was left out and why."""

    hits: tuple[Hit, ...]
    queries: tuple[str, ...]
    tokens: int
    duplicates: int  # found by a gap query but already in the context
    over_budget: int  # would have gone past the token budget

    @property
    def message(self) -> str:
        left_out = [f"{n} {why}" for n, why in ((self.duplicates, "already in the context"),
                                               (self.over_budget, "over the token budget")) if n]
        return (f"{len(self.hits)} passage(s) from {len(self.queries)} gap quer{'y' if len(self.queries) == 1 else 'ies'} "
                f"added as additional context ({self.tokens} tokens)" + (f"; left out: {', '.join(left_out)}"
                                                                         if left_out else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"queries": list(self.queries), "tokens": self.tokens, "duplicates": self.duplicates,
                "over_budget": self.over_budget,
                "hits": [{"chunk_id": h.chunk_id, "external_id": h.external_id, "origin": h.origin} for h in self.hits]}


def add_gap_context(ctx: IterationContext, present: Sequence[Hit]) -> GapContext:
    """Search the plan's gap queries in the asked collection and pick the passages to add after
    `present` (what the generator reads already); none when the option is off or the plan has
    no gap queries. The event says what was added and what was left out."""
    setup, queries = ctx.setup, ctx.plan.gap_queries
    config = setup.config
    if not config.gaps_as_context or not queries:
        return GapContext((), (), 0, 0, 0)

    def search() -> list[tuple[str, RetrievalResult]]:
        params = default_params(setup.settings, mode=config.retrieval_mode, k=config.gap_context_hits,
                                collection=setup.collection)
        with read_transaction(setup.settings) as session:
            return [(q, search_in_session(q, params, session=session, settings=setup.settings)) for q in queries]

    found = ctx.timed("gap_context", search)
    context = select_gap_context(found, present, per_query=config.gap_context_hits,
                                 budget_tokens=config.gap_context_tokens,
                                 count_tokens=token_counter(setup.settings.embedding_model))
    setup.emit("gap_context", context.message, iteration=ctx.ordinal, **context.to_dict())
    return context


def gap_origin(gap_query: str) -> str:
    return f"{GAP_ORIGIN_PREFIX}{gap_query}"


def select_gap_context(found: Sequence[tuple[str, RetrievalResult]], present: Sequence[Hit], *,
                       per_query: int, budget_tokens: int, count_tokens: Callable[[str], int]) -> GapContext:
    """The best `per_query` passages of each gap query's result, in gap-query order, each
    labelled with its query; a passage already `present` (same chunk, or same text) or found
    by an earlier gap query is skipped, and one that would pass `budget_tokens` is left out
    (a later, shorter one may still fit)."""
    seen_ids = {h.chunk_id for h in present}
    seen_texts = {h.text.strip() for h in present}
    kept: list[Hit] = []
    tokens = duplicates = over_budget = 0
    for gap_query, result in found:
        for hit in result.hits[:per_query]:
            if hit.chunk_id in seen_ids or hit.text.strip() in seen_texts:
                duplicates += 1
                continue
            size = count_tokens(hit.text)
            if tokens + size > budget_tokens:
                over_budget += 1
                continue
            tokens += size
            seen_ids.add(hit.chunk_id)
            seen_texts.add(hit.text.strip())
            kept.append(dataclasses.replace(hit, origin=gap_origin(gap_query)))
    return GapContext(tuple(kept), tuple(q for q, _ in found), tokens, duplicates, over_budget)


def with_gap_context(result: RetrievalResult, extra: Sequence[Hit]) -> RetrievalResult:
    """The retrieval as stored with the iteration: its own hits, then the gap context's, ranked
    after them (each keeps its own query's BM25 and dense ranks), so the run detail, the export
    and the review show what the answer was composed from. The retrieval confidence was scored
    before, on the question's hits alone."""
    if not extra:
        return result
    start = len(result.hits)
    ranked = tuple(dataclasses.replace(h, rank=start + i) for i, h in enumerate(extra, 1))
    return dataclasses.replace(result, hits=result.hits + ranked)
