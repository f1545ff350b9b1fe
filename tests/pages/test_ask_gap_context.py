"""The Ask page shows the passages gap queries added as additional context (issue 30, preset
option gaps_as_context): labelled in the passages table and under their iteration."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from app_pages._ask_details import found_by, gap_context_lines
from services.answering import pipeline
from services.answering.runs import load_run
from services.scoring.weights import DEFAULT_PROFILE
from tests.pages._support import open_page
from tests.services.test_gap_context import GAP_QUERY, QUESTION, GapBackend, _config
from tests.services.test_pipeline import demo_docs  # noqa: F401  (fixture)

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def test_the_run_detail_labels_what_the_gap_queries_added(demo_docs):  # noqa: F811
    # The page's own presets leave the option off; a run of the notes' loop is shown as stored.
    run = pipeline.run(QUESTION, "as-written", DEFAULT_PROFILE, backend=GapBackend((0.3, 0.9)), config=_config(True))
    stored = load_run(run.run_id)
    refined = stored.best()
    assert refined is not None and refined.ordinal == 2
    lines = gap_context_lines(refined)
    added = [h for h in refined.hits if h.origin == f"gap:{GAP_QUERY}"]
    assert added and len(lines) == len(added) and all(GAP_QUERY in line for line in lines)
    assert not gap_context_lines(stored.iterations[0])
    assert found_by(added[0]) == f"gap query: {GAP_QUERY}" and found_by(stored.iterations[0].hits[0]) == "collection:default"

    at = open_page(AppTest.from_file(APP, default_timeout=300), "ask", "Ask")  # shows the newest stored run
    (hits,) = [d.value for d in at.dataframe if "found by" in d.value.columns]
    assert list(hits["found by"])[-len(added):] == [f"gap query: {GAP_QUERY}"] * len(added)
    assert any("additional context" in c.value for c in at.caption)
    shown = [t.value for t in at.text]
    assert all(f"additional context {line}" in shown for line in lines)
