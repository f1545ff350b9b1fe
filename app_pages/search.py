"""Search: hits with both legs' scores and the confidence breakdown."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages.common import corpus_stats_or_error, require_sign_in, show_error
from services.charts import confidence as charts
from services.domain import HIT_COLUMNS, RETRIEVAL_MODES, RetrievalResult, hit_rows
from services.errors import WorkbenchError
from services.retrieval.search import default_params, search
from services.scoring.confidence import score_retrieval
from services.scoring.profiles import active_profile
from services.scoring.weights import WeightsProfile


def hits_frame(result: RetrievalResult) -> pd.DataFrame:
    return pd.DataFrame(hit_rows(result.hits), columns=list(HIT_COLUMNS))


def main() -> None:
    require_sign_in()
    st.title("Search the corpus")
    stats = corpus_stats_or_error()
    if stats is None:
        return
    about = "~" if stats.estimated else ""  # estimated past EXACT_COUNT_CHUNKS (services/corpus/stats.py)
    cols = st.columns(3)
    cols[0].metric("Documents", f"{about}{stats.documents:,}")
    cols[1].metric("Chunks", f"{stats.chunks:,}")
    cols[2].metric("Terms", f"{about}{stats.terms:,}")
    with st.form("search.form"):
        query = st.text_input("Question", key="search.query")
        mode = st.radio("Mode", RETRIEVAL_MODES, index=2, horizontal=True, key="search.mode")
        k = st.slider("Hits", 1, 50, 10, key="search.k")
        submitted = st.form_submit_button("Search")
    if not submitted:
        return
    try:
        result = search(query, default_params(mode=mode, k=k))
        profile = active_profile().weights  # read per search: an activation on Tuning applies at once
    except WorkbenchError as exc:
        show_error(exc)
        return
    _render_result(result, profile)


def _render_result(result: RetrievalResult, profile: WeightsProfile) -> None:
    breakdown = score_retrieval(result, profile)
    left, right = st.columns([1, 2])
    left.plotly_chart(charts.gauge_figure(breakdown, high=profile.high, medium=profile.medium, low=profile.low),
                      key="search.gauge")
    right.subheader(breakdown.interpretation)
    right.caption(f"weights profile: {breakdown.profile}")
    right.plotly_chart(charts.breakdown_figure(breakdown), key="search.breakdown")
    for line in breakdown.recommendations:
        st.text(f"• {line}")
    st.caption(f"reranker: {result.reranker} · {result.latency_ms:.1f} ms")
    st.dataframe(hits_frame(result), hide_index=True)
    if result.mode == "hybrid":
        st.plotly_chart(charts.rank_scatter_figure(result.hits), key="search.scatter")


if __name__ == "__main__":
    main()
