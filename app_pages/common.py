"""What every page shares: cached service accessors, the sidebar, the sign-in gate."""

from __future__ import annotations

import re

import streamlit as st

from db import describe_store
from services.answering.llm.backends import backend_label
from services.answering.presets import PRESETS
from services.answering.runs import Run, load_run
from services.auth import CurrentUser, auth_config, resolve_user
from services.corpus.stats import CorpusStats, corpus_stats
from services.errors import WorkbenchError
from services.intake.status import Backlog, cached_backlog
from services.retrieval.rerank import reranker_status
from services.settings import get_settings
from services.store import get_engine

REVIEWER_KEY = "common.reviewer"
PRESET_KEY = "common.preset"


@st.cache_resource(show_spinner="Starting the database…")
def ensure_store() -> str:
    """Start/connect the store once per process; returns a description for the sidebar."""
    get_engine()
    info = describe_store(get_settings())
    return f"{info.kind}: {info.location}"


@st.cache_data(ttl=10, show_spinner=False)
def cached_corpus_stats() -> CorpusStats:
    return corpus_stats()


def corpus_stats_or_error() -> CorpusStats | None:
    """The store started and the corpus counted; None once the error is shown."""
    try:
        ensure_store()
        return cached_corpus_stats()
    except WorkbenchError as exc:
        show_error(exc)
        return None


def run_or_error(run_id: int | None) -> Run | None:
    """The stored run, or None (nothing selected, or the error shown)."""
    if run_id is None:
        return None
    try:
        return load_run(run_id)
    except WorkbenchError as exc:
        show_error(exc)
        return None


def empty_state(message: str, page: str, label: str, icon: str) -> None:
    """What fills an empty view, and a link to where to do it."""
    st.info(message)
    st.page_link(page, label=label, icon=icon)


@st.cache_data(ttl=5, show_spinner=False)
def cached_intake_backlog() -> Backlog:
    """Records waiting for assessment: the API's own reader (counted afresh below 10,000)."""
    return cached_backlog(get_settings())


def wait_text(seconds: float) -> str:
    """A wait as a person reads it: '40 s', '3 min', '2 h 5 min', '3 d 4 h'."""
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = int(seconds // 60)
    if minutes < 90:
        return f"{minutes} min"
    hours = minutes // 60
    if hours < 48:
        return f"{hours} h {minutes % 60} min"
    return f"{hours // 24} d {hours % 24} h"


def backlog_line(backlog: Backlog) -> str:
    """How far the assessment is behind, in a line for the sidebar and the Import page."""
    if not backlog.queued:
        return "nothing waiting for assessment"
    runs = "1 run" if backlog.queued == 1 else f"{backlog.queued:,} runs"
    oldest = f", the oldest for {wait_text(backlog.oldest_age_s)}" if backlog.oldest_age_s is not None else ""
    return f"{runs} waiting for assessment{oldest}"


@st.cache_data(ttl=10, show_spinner=False)
def cached_active_profile_label() -> str:
    from services.scoring.profiles import active_profile

    return active_profile()[0].label


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]()<>#|~$])")  # what can make links, images, emphasis, math


def as_plain(text: str) -> str:
    """Escape markdown so messages quoting user text (ids, file names) show literally."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def show_error(error: Exception | str) -> None:
    st.error(as_plain(str(error)))


def split_around(text: str, quote: str) -> tuple[str, str, str] | None:
    """(before, quote as it appears, after), or None when the quote is not in the text.

    Whitespace and case may differ (chunking and sentence splitting normalize spacing)."""
    quote = quote.strip()
    if not quote:
        return None
    start = text.find(quote)
    if start >= 0:
        return text[:start], quote, text[start + len(quote):]
    match = re.search(r"\s+".join(re.escape(word) for word in quote.split()), text, flags=re.IGNORECASE)
    return (text[:match.start()], match.group(0), text[match.end():]) if match else None


def render_quote_in_chunk(chunk_text: str | None, quote: str) -> None:
    """The cited chunk with its quoted passage set apart (`chunk_text` is None when the chunk is not stored)."""
    parts = split_around(chunk_text, quote) if chunk_text is not None else None
    if parts is None:
        st.code(quote, language=None, wrap_lines=True)
        st.caption("The quoted passage was not found verbatim in the stored chunk." if chunk_text is not None
                   else "The cited chunk is not among the stored hits.")
        if chunk_text:
            st.text(chunk_text)
        return
    before, found, after = parts
    if before.strip():
        st.text(before.strip())
    st.code(found, language=None, wrap_lines=True)
    if after.strip():
        st.text(after.strip())


def _secrets() -> dict:
    try:
        return st.secrets.to_dict()
    except (FileNotFoundError, KeyError, st.errors.StreamlitSecretNotFoundError):
        return {}


def current_user() -> CurrentUser:
    config = auth_config(_secrets())
    user_info = st.user.to_dict() if config.oidc else None
    return resolve_user(config, user_info=user_info, local_name=st.session_state.get(REVIEWER_KEY, ""))


def require_sign_in() -> CurrentUser:
    """With OIDC configured, nothing but the sign-in prompt is shown until the user logs in."""
    user = current_user()
    if auth_config(_secrets()).oidc and not user.signed_in:
        st.title("RAG Confidence Workbench")
        st.info("Sign in to review answers.")
        st.button("Sign in", on_click=st.login, key="common.login")
        st.stop()
    return user


def selected_preset() -> str:
    return st.session_state.get(PRESET_KEY, "balanced")


def render_sidebar() -> None:
    st.session_state.setdefault(PRESET_KEY, "balanced")
    st.session_state.setdefault(REVIEWER_KEY, "")
    with st.sidebar:
        user = current_user()
        if auth_config(_secrets()).oidc:
            st.caption(f"Signed in as {user.name}" + (" (admin)" if user.is_admin else ""))
            st.button("Sign out", on_click=st.logout, key="common.logout")
        else:
            st.text_input("Reviewer", key=REVIEWER_KEY, placeholder="your name (recorded on every action)")
        st.selectbox("Preset", tuple(PRESETS), key=PRESET_KEY)
        try:
            st.caption(f"Database — {ensure_store()}")
            stats = cached_corpus_stats()
            st.caption(f"Corpus — {stats.documents:,} documents, {stats.chunks:,} chunks")
            st.caption(f"Weights profile — {cached_active_profile_label()}")
            st.caption(f"Intake — {backlog_line(cached_intake_backlog())}")
        except WorkbenchError as exc:
            show_error(exc)
        st.caption(f"Answers — {backend_label()}")
        st.caption(f"Reranking — {reranker_status(get_settings()).note}")
