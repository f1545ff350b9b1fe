"""Placeholder while the page is built."""

import streamlit as st

st.title("review")
st.info("This page is being built.")
