"""Streamlit entry: navigation over pages/ and the shared sidebar."""

import streamlit as st

from pages.common import render_sidebar

st.set_page_config(page_title="RAG Confidence Workbench", layout="wide")
navigation = st.navigation([
    st.Page("pages/search.py", title="Search", icon=":material/search:", default=True),
])
render_sidebar()
navigation.run()
