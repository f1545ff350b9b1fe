"""Search: hits with both legs' scores and the confidence breakdown."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from pages.common import cached_corpus_stats, ensure_store, require_sign_in, show_error
from services.charts import confidence as charts
from services.domain import RETRIEVAL_MODES, RetrievalResult
from services.errors import WorkbenchError
from services.retrieval.search import default_params, search
from services.scoring.confidence import DEFAULT_PROFILE, score_retrieval


def hits_frame(result: RetrievalResult) -> pd.DataFrame:
    return pd.DataFrame([
        {"rank": h.rank, "document": h.external_id, "fused": h.fused_score, "bm25": h.bm25_score,
         "bm25 rank": h.bm25_rank, "dense sim": h.dense_similarity, "dense rank": h.dense_rank,
         "text": h.text[:300]}
        for h in result.hits
    ])


def main() -> None:
    require_sign_in()
    st.title("Search the corpus")
    try:
        ensure_store()
        stats = cached_corpus_stats()
    except WorkbenchError as exc:
        show_error(exc)
        return
    cols = st.columns(3)
    cols[0].metric("Documents", f"{stats.documents:,}")
    cols[1].metric("Chunks", f"{stats.chunks:,}")
    cols[2].metric("Terms", f"{stats.terms:,}")
    with st.form("search.form"):
        query = st.text_input("Question", key="search.query")
        mode = st.radio("Mode", RETRIEVAL_MODES, index=2, horizontal=True, key="search.mode")
        k = st.slider("Hits", 1, 50, 10, key="search.k")
        submitted = st.form_submit_button("Search")
    if not submitted:
        return
    try:
        result = search(query, default_params(mode=mode, k=k))
    except WorkbenchError as exc:
        show_error(exc)
        return
    _render_result(result)


def _render_result(result: RetrievalResult) -> None:
    breakdown = score_retrieval(result)
    left, right = st.columns([1, 2])
    left.plotly_chart(charts.gauge_figure(breakdown, high=DEFAULT_PROFILE.high, medium=DEFAULT_PROFILE.medium,
                                          low=DEFAULT_PROFILE.low), key="search.gauge")
    right.subheader(breakdown.interpretation)
    right.plotly_chart(charts.breakdown_figure(breakdown), key="search.breakdown")
    for line in breakdown.recommendations:
        st.text(f"• {line}")
    st.caption(f"reranker: {result.reranker} · {result.latency_ms:.1f} ms")
    st.dataframe(hits_frame(result), hide_index=True)
    if result.mode == "hybrid":
        st.plotly_chart(charts.rank_scatter_figure(result.hits), key="search.scatter")


if __name__ == "__main__":
    main()
