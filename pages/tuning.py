"""Placeholder while the page is built."""

import streamlit as st

st.title("tuning")
st.info("This page is being built.")
