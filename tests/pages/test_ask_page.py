"""The Ask page under AppTest, on the real store, the real model and the offline backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text
from streamlit.testing.v1 import AppTest

from services.answering.runs import load_run
from tests.pages._support import open_page
from tests.services.test_pipeline import DOCS, ScriptedBackend

APP = str(Path(__file__).resolve().parents[2] / "app.py")
DEMO_QUESTION = "What does SRVO-062 mean and how do I clear it?"  # q01 of the bundled demo questions


@pytest.fixture()
def corpus(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    from services.corpus.ingest import ingest_paths

    for name, body in DOCS.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    ingest_paths([tmp_path])


def _ask_page() -> AppTest:
    return open_page(AppTest.from_file(APP, default_timeout=300), "ask", "Ask")


def _ask(at: AppTest, question: str) -> AppTest:
    at.text_area(key="ask.query").input(question)
    return at.button(key="ask.submit").click().run()


def _figures(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def test_demo_question_streams_events_and_shows_every_number(corpus):
    at = _ask_page()
    at.selectbox(key="ask.demo").select(DEMO_QUESTION).run()
    assert at.text_area(key="ask.query").value == DEMO_QUESTION  # the demo picker fills the box
    at.button(key="ask.submit").click().run()
    assert not at.exception and not at.error

    run = load_run(at.session_state["ask.run_id"])
    assert run.query == DEMO_QUESTION and run.source == "ask"
    status = at.status[0]
    assert status.state == "complete" and run.final_level in status.label
    streamed = [t.value for t in status.text]
    assert len(streamed) == len(run.events) and streamed[0].strip().startswith("0 ms")
    assert [line.split("ms  ", 1)[1] for line in streamed] == [e.message for e in run.events]

    texts = [t.value for t in at.text]
    assert run.final_answer and run.final_answer in texts  # shown as plain text

    citation = run.citations[0]
    expander = next(e for e in at.expander if e.label == f"Citation [{citation.marker}]")
    assert f"document {citation.external_id} · chunk {citation.chunk_id}" in [t.value for t in expander.text]
    assert [c.value for c in expander.code] == [citation.quote]  # the quote, highlighted inside its chunk

    badge = [m.value for m in at.markdown if "-badge[" in m.value]
    assert badge and badge[0].endswith(f"[{run.final_level}]")

    figures = _figures(at)
    gauge = next(f for f in figures if f["data"][0]["type"] == "indicator")
    assert gauge["data"][0]["value"] == pytest.approx(run.final_confidence)
    stacked = next(f for f in figures if f["layout"].get("barmode") == "stack")
    assert len(stacked["data"]) == 7  # one bar per weighted component
    best = run.best()
    assert best is not None and best.ordinal == run.best_iteration
    assert sum(bar["x"][0] for bar in stacked["data"]) == pytest.approx(best.retrieval_confidence)

    hits = next(d.value for d in at.dataframe if "bm25" in d.value.columns)
    for column in ("fused", "bm25", "bm25 rank", "dense sim", "dense rank"):
        assert column in hits.columns
    assert list(hits["chunk"]) == [h.chunk_id for h in best.hits]
    assert hits.iloc[0]["document"] == "srvo-062.md"

    route = next(f for f in figures if f["data"][0].get("text", [None])[0] == "START")
    assert route["data"][0]["text"][-1] == f"END ({run.status})" and len(route["data"][0]["text"]) == len(run.route) + 2
    reflection = next(f for f in figures if any(t.get("name") == "reflection score" for t in f["data"]))
    assert [h["y0"] for h in reflection["layout"]["shapes"] if h["y0"] == h["y1"]] == [0.8]
    assert any(f["layout"].get("xaxis", {}).get("title", {}).get("text", "").startswith("BM25 rank") for f in figures)
    assert len([e for e in at.expander if e.label.startswith("Iteration ")]) == len(run.iterations)

    at.run()  # a rerun shows the stored run again, without asking
    assert not at.exception and run.final_answer in [t.value for t in at.text] and len(at.status) == 0


def test_script_in_the_question_is_shown_as_text(corpus):
    question = "<script>alert(1)</script> What does **SRVO-062** mean?"
    at = _ask(_ask_page(), question)
    assert not at.exception and not at.error
    assert any(question in t.value for t in at.text)  # the query used, verbatim
    assert not at.get("html")
    rendered_as_markdown = [m.value for m in at.markdown] + [c.value for c in at.caption]
    assert not any("script" in value or "SRVO" in value for value in rendered_as_markdown)


def test_empty_question_is_an_error_not_a_traceback(corpus):
    at = _ask(_ask_page(), "   ")
    assert not at.exception
    assert "empty" in at.error[0].value and at.status[0].state == "error"
    assert "ask.run_id" not in at.session_state


def test_auto_accepted_run_can_be_sent_to_review(corpus, engine):
    from services.answering import pipeline
    run = pipeline.run("What does SRVO-062 mean?", "balanced", backend=ScriptedBackend((0.9,)))
    with engine.begin() as conn:  # the offline judge rarely auto-accepts; set the state under test directly
        conn.execute(text("UPDATE runs SET status = 'auto_accepted' WHERE id = :id"), {"id": run.run_id})
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.switch_page("app_pages/ask.py")
    at.session_state["ask.run_id"] = run.run_id
    at.run()
    assert not at.exception and not at.get("page_link")
    at.button(key="ask.send_to_review").click().run()
    assert not at.exception
    assert load_run(run.run_id).status == "pending"
    assert "sent to the review queue" in at.success[0].value
    assert [link.value for link in at.get("page_link")] == ["Open the review queue"]  # now it is queued
    assert not [b for b in at.button if b.key == "ask.send_to_review"]


def test_empty_corpus_points_to_the_corpus_page(clean_db):
    at = _ask_page()
    assert "corpus is empty" in at.info[0].value
    assert [link.value for link in at.get("page_link")] == ["Open the Corpus page"]
    assert not [b for b in at.button if b.key == "ask.submit"]


# --- the page's pure helpers, without Streamlit ------------------------------------------------

def test_split_around_finds_the_quote_despite_whitespace_and_case():
    from app_pages.common import split_around

    chunk = "# SRVO-062\nSRVO-062 means the backup\nbattery dropped. Replace it."
    assert split_around(chunk, "Replace it.") == ("# SRVO-062\nSRVO-062 means the backup\nbattery dropped. ", "Replace it.", "")
    before, found, after = split_around(chunk, "the backup battery   dropped.")
    assert found == "the backup\nbattery dropped." and before.endswith("means ") and after == " Replace it."
    assert split_around(chunk, "THE BACKUP battery") == ("# SRVO-062\nSRVO-062 means ", "the backup\nbattery",
                                                         " dropped. Replace it.")
    assert split_around(chunk, "  Replace it.\n") == ("# SRVO-062\nSRVO-062 means the backup\nbattery dropped. ",
                                                       "Replace it.", "")
    assert split_around(chunk, "not in the chunk") is None and split_around(chunk, "  ") is None


def test_demo_picker_offers_only_answerable_questions():
    from app_pages.ask import answerable_questions

    questions = [{"text": "a", "metadata": {"answerable": True}}, {"text": "b", "metadata": {"answerable": False}}]
    assert answerable_questions(questions) == ["a"]


def test_signals_table_lists_blended_signals_with_renormalized_weights_first():
    from app_pages.ask import signals_frame

    frame = signals_frame({"heuristic_value": 0.4, "grade": 0.5, "retrieval": 0.6})
    assert list(frame["signal"]) == ["retrieval", "answer grade", "heuristic (reference, not blended)"]
    assert list(frame["blend weight"][:2]) == pytest.approx([0.15 / 0.50, 0.35 / 0.50])
    assert frame["blend weight"].isna().tolist() == [False, False, True]
