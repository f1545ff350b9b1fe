"""Streamlit entry: the sign-in gate, navigation over pages/, and the shared sidebar."""

import streamlit as st

from pages.common import render_sidebar, require_sign_in

st.set_page_config(page_title="RAG Confidence Workbench", page_icon=":material/fact_check:", layout="wide")
require_sign_in()
navigation = st.navigation({
    "Start": [st.Page("pages/home.py", title="Start here", icon=":material/waving_hand:", default=True)],
    "Answer": [
        st.Page("pages/ask.py", title="Ask", icon=":material/chat:"),
        st.Page("pages/search.py", title="Search", icon=":material/search:"),
    ],
    "Review": [
        st.Page("pages/review.py", title="Review queue", icon=":material/fact_check:"),
        st.Page("pages/import_runs.py", title="Import runs", icon=":material/upload_file:"),
        st.Page("pages/export.py", title="Export", icon=":material/download:"),
    ],
    "Tune": [
        st.Page("pages/tuning.py", title="Tuning", icon=":material/tune:"),
        st.Page("pages/routes.py", title="Router paths", icon=":material/alt_route:"),
        st.Page("pages/evaluate.py", title="Evaluate", icon=":material/analytics:"),
    ],
    "Data": [
        st.Page("pages/corpus.py", title="Corpus", icon=":material/library_books:"),
        st.Page("pages/documents.py", title="Document trends", icon=":material/trending_down:"),
    ],
})
render_sidebar()
navigation.run()
