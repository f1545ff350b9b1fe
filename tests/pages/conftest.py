"""Fixtures every page test shares: caches cleared around each test, page modules by name."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest
import streamlit as st


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    """Cached getters (corpus statistics, run matrices, the active profile) live for the whole
    process and AppTests share it: no test may see the previous test's store, and none leaves
    its own behind for the tests that run after the page tests."""
    from app_pages._tuning_state import cached_run_matrix  # a resource (shared arrays), not data

    st.cache_data.clear()
    cached_run_matrix.clear()
    yield
    st.cache_data.clear()
    cached_run_matrix.clear()


@pytest.fixture()
def load_page() -> Callable[[str], ModuleType]:
    """`load_page("corpus")` is the module pages/corpus.py itself, for its pure helpers:
    importing a page does not render it (its main() only runs under Streamlit)."""
    return lambda name: importlib.import_module(f"app_pages.{name}")
