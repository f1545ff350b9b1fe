"""Helpers the page tests share: opening a page through the app and reading what it drew."""

from __future__ import annotations

import pandas as pd
from streamlit.testing.v1 import AppTest


def open_page(at: AppTest, page: str, title: str) -> AppTest:
    """`at` (the app, not run yet: a test may set secrets first) run and switched to
    pages/<page>.py, which must draw without an exception under `title`."""
    at.run()
    at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception, at.exception
    assert at.title[0].value == title
    return at


def frame_by_first_column(at: AppTest, first_column: str) -> pd.DataFrame:
    """The one dataframe on the page whose first column is `first_column`."""
    (frame,) = [d.value for d in at.dataframe if d.value.columns[0] == first_column]
    return frame
