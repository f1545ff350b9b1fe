"""The decision view the Review page's run detail and Work the queue share: everything one
verdict needs — the question, the answer (the correction when there is one), why the confidence
is what it is, the passages the answer was given beside the judge's claim evidence, and hints
that fit where the run came from."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from app_pages._claim_evidence import render_claim_evidence
from app_pages._decision_text import (
    blend_sentence,
    came_from_outside,
    corrected_answer,
    passage_scores,
    reviewer_hints,
    why_items,
)
from app_pages.common import as_plain, render_quote_in_chunk, show_error
from services.answering.runs import Run, retrieval_breakdown
from services.charts.confidence import COMPONENT_LABELS, breakdown_figure
from services.errors import WorkbenchError
from services.review.queue import Review
from services.scoring.confidence import ConfidenceBreakdown

STRIP_COLUMNS = 3
PASSAGES_HEIGHT = 520  # px: long contexts scroll inside the view instead of pushing the verdict keys down


def render_decision(run: Run, history: Sequence[Review], *, key: str) -> None:
    """The run as a reviewer decides on it; `key` keeps its widgets apart from another view's."""
    try:
        scored = retrieval_breakdown(run)
    except WorkbenchError as exc:
        show_error(exc)
        scored = None
    breakdown = scored[1] if scored is not None else None
    _render_question_and_answer(run, history)
    _render_why(run, breakdown)
    passages, evidence = st.columns(2)
    with passages:
        _render_passages(run)
    with evidence:
        st.markdown("#### The judge's evidence")
        render_claim_evidence(run)
    _render_hints(run, breakdown)
    if breakdown is not None:
        _render_breakdown(run, breakdown, key=key)


# The per-context scores a record may lack, besides the breakdown's components.
_SCORE_NAMES = {"bm25": "keyword (BM25) scores", "rerank_score": "reranker scores", "dense_similarity": "dense similarity"}


def _render_question_and_answer(run: Run, history: Sequence[Review]) -> None:
    st.markdown("**Question**")
    st.text(run.query)
    correction = corrected_answer(history)
    if correction is None:
        st.markdown("**Answer**")
        st.text(run.final_answer or _no_answer_text(run))
        return
    st.markdown(f"**Answer** — corrected by {as_plain(correction.reviewer)}")
    st.text(correction.corrected_answer)
    st.caption("Original answer, replaced by the correction:")
    st.markdown(f"~~{as_plain(run.final_answer)}~~" if run.final_answer else _no_answer_text(run))


def _no_answer_text(run: Run) -> str:
    return ("(none: the source system gave no answer)" if came_from_outside(run)
            else "(no answer was produced from the retrieved text)")


def _render_why(run: Run, breakdown: ConfidenceBreakdown | None) -> None:
    """The compact "why this score" strip: each signal in plain words, then how they blend."""
    items = why_items(run, breakdown)
    with st.container(border=True):
        st.markdown("**Why this score**")
        # Label over value at text size, three to a row: st.metric's large figures, or six columns in a
        # 1024-wide window, broke "ambiguous" and "0.36 (VERY LOW)" mid-word.
        for row in range(0, len(items), STRIP_COLUMNS):
            for column, item in zip(st.columns(STRIP_COLUMNS), items[row:row + STRIP_COLUMNS]):
                column.caption(item.label, help=as_plain(item.detail) if item.detail else None)
                column.markdown(f"**{as_plain(item.value)}**")
        st.caption(as_plain(blend_sentence(run, breakdown)))
        for item in items:
            if item.detail:
                st.caption(as_plain(f"{item.label}: {item.detail}"))
        assessment = run.config.get("assessment") or {}
        for name, why in (assessment.get("not_computed") or {}).items():
            st.caption(as_plain(f"Not computed: {_SCORE_NAMES.get(name) or COMPONENT_LABELS.get(name, name)}: {why}"))


def _render_passages(run: Run) -> None:
    best = run.best()
    hits = best.hits if best is not None else ()
    st.markdown(f"#### The passages the answer was given ({len(hits)})")
    if not hits:
        st.info("No passages: the answer could not be checked against any source."
                if came_from_outside(run) else "Nothing was retrieved for this question.")
        return
    quotes = {c.chunk_id: c.quote for c in run.citations}
    with st.container(height=PASSAGES_HEIGHT):
        for number, hit in enumerate(hits, start=1):
            with st.container(border=True):
                # [n] is the number the judge's evidence calls "context n".
                st.text(f"[{number}] {hit.external_id or hit.title}")
                st.caption(passage_scores(hit, cited=hit.chunk_id in quotes))
                if hit.chunk_id in quotes:
                    render_quote_in_chunk(hit.text, quotes[hit.chunk_id])
                else:
                    st.text(hit.text)


def _render_hints(run: Run, breakdown: ConfidenceBreakdown | None) -> None:
    hints = reviewer_hints(run, breakdown)
    if hints:
        st.markdown("**What to check**" if came_from_outside(run) else "**Hints**")
        for line in hints:
            st.text(f"• {line}")


def _render_breakdown(run: Run, breakdown: ConfidenceBreakdown, *, key: str) -> None:
    with st.expander(f"Retrieval confidence {breakdown.overall:.2f}, component by component"):
        st.caption(f"The bars add up to the retrieval confidence ({breakdown.overall:.2f}, {breakdown.level}, "
                   f"weights profile {breakdown.profile}): one of the signals blended into this run's confidence "
                   f"{run.final_confidence:.2f}, as Why this score shows.")
        figure = breakdown_figure(breakdown)
        # The figure's own "total" would read as the run's confidence beside a different number.
        figure.update_annotations(text=f"retrieval {breakdown.overall:.2f}")
        st.plotly_chart(figure, key=f"{key}.breakdown")
