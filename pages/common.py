"""What every page shares: cached service accessors, the sidebar, error display."""

from __future__ import annotations

import streamlit as st

from db import describe_store, get_settings
from services.corpus import CorpusStats, corpus_stats
from services.errors import WorkbenchError
from services.store import get_engine


@st.cache_resource(show_spinner="Starting the database…")
def ensure_store() -> str:
    """Start/connect the store once per process; returns a description for the sidebar."""
    get_engine()
    info = describe_store(get_settings())
    return f"{info.kind}: {info.location}"


@st.cache_data(ttl=10, show_spinner=False)
def cached_corpus_stats() -> CorpusStats:
    return corpus_stats()


def render_sidebar() -> None:
    with st.sidebar:
        try:
            st.caption(f"Database — {ensure_store()}")
            stats = cached_corpus_stats()
            st.caption(f"Corpus — {stats.documents:,} documents, {stats.chunks:,} chunks")
        except WorkbenchError as exc:
            st.error(str(exc))
