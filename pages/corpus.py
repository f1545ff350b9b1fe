"""Placeholder while the page is built."""

import streamlit as st

st.title("corpus")
st.info("This page is being built.")
