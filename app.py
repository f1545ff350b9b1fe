"""Streamlit entry: the sign-in gate, navigation over app_pages/, and the shared sidebar.

The folder is not named pages/: Streamlit serves a pages/ folder beside the entry file as
old-style pages (file names in the sidebar, no app.py around them) to every URL until some
session has run st.navigation, so a deep link opened first on a fresh server skipped app.py."""

import streamlit as st

from app_pages._tuning_state import preload_run_matrix
from app_pages.common import render_sidebar, require_sign_in
from services.settings import get_settings

st.set_page_config(page_title="RAG Confidence Workbench", page_icon=":material/fact_check:", layout="wide")
require_sign_in()
if get_settings().tuning_preload:
    preload_run_matrix()
navigation = st.navigation({
    "Start": [st.Page("app_pages/home.py", title="Start here", icon=":material/waving_hand:", default=True)],
    "Answer": [
        st.Page("app_pages/ask.py", title="Ask", icon=":material/chat:"),
        st.Page("app_pages/search.py", title="Search", icon=":material/search:"),
    ],
    "Review": [
        st.Page("app_pages/review.py", title="Review queue", icon=":material/fact_check:"),
        st.Page("app_pages/import_runs.py", title="Import runs", icon=":material/upload_file:"),
        st.Page("app_pages/export.py", title="Export", icon=":material/download:"),
    ],
    "Tune": [
        st.Page("app_pages/tuning.py", title="Tuning", icon=":material/tune:"),
        st.Page("app_pages/routes.py", title="Router paths", icon=":material/alt_route:"),
        st.Page("app_pages/evaluate.py", title="Evaluate", icon=":material/analytics:"),
    ],
    "Data": [
        st.Page("app_pages/corpus.py", title="Corpus", icon=":material/library_books:"),
        st.Page("app_pages/documents.py", title="Document trends", icon=":material/trending_down:"),
    ],
})
render_sidebar()
navigation.run()
