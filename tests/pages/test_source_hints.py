"""Hints by where a run came from, under AppTest on the real store, model and judge: the advice
written for whoever asked on the Ask page (rephrase, add documents, "review recommended") never
shows on an answer another system gave; there the reviewer is told what to check."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from app_pages._decision_text import reviewer_hints
from services.answering.runs import load_run, retrieval_breakdown
from tests.pages._support import open_page
from tests.pages.test_claim_evidence import FABRICATED, open_run, store_import

APP = str(Path(__file__).resolve().parents[2] / "app.py")
# Words only the retrieval's recommendations (services.scoring.confidence.recommendations) use,
# and the Ask page's line for a question it could not answer.
ASK_ADVICE = ("review recommended", "review is mandatory", "rephrase", "make the question more specific",
              "broaden the question", "add documents", "narrow the question", "No reranker ran",
              "No answer could be produced")


def shown(at: AppTest) -> str:
    return " ".join(str(e.value) for kind in ("markdown", "caption", "text", "warning", "info") for e in at.get(kind))


def test_an_imported_abstention_gets_reviewer_hints_not_the_ask_pages(clean_db, settings):
    run_id = store_import("", settings)
    run = load_run(run_id)
    breakdown = retrieval_breakdown(run)[1]  # type: ignore[index]
    assert breakdown.recommendations  # the retrieval has advice for an asker...
    hints = reviewer_hints(run, breakdown)
    assert any(h.startswith("The source system gave no answer") for h in hints)
    assert not [a for a in ASK_ADVICE if a in " ".join(hints)]  # ...which the reviewer is not given
    at = open_run(run_id)
    page = shown(at)
    assert "The source system gave no answer: approve only if" in page
    assert not [a for a in ASK_ADVICE if a in page]


def test_an_imported_run_with_an_invented_word_is_told_to_check_it(clean_db, settings):
    run_id = store_import(FABRICATED, settings)
    page = shown(open_run(run_id))
    assert "The highlighted words appear in no passage: check them before approving." in page
    assert not [a for a in ASK_ADVICE if a in page]


def test_the_ask_page_showing_an_imported_abstention_does_not_speak_to_an_asker(clean_db, settings, tmp_path):
    from services.corpus.ingest import ingest_paths
    from tests.services.test_pipeline import DOCS

    for name, body in DOCS.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    ingest_paths([tmp_path])
    run_id = store_import("", settings)  # the newest run: the Ask page shows it before any question
    at = open_page(AppTest.from_file(APP, default_timeout=300), "ask", "Ask")
    page = shown(at)
    assert f"#{run_id}" in page and "The source system gave no answer (it abstained)." in page
    assert not [a for a in ASK_ADVICE if a in page]


def test_an_auto_accepted_run_of_our_own_keeps_its_hints_but_not_the_call_for_review(clean_db, settings):
    import dataclasses

    from services.domain import RunStatus

    imported = load_run(store_import("Osaka", settings))
    config = {k: v for k, v in imported.config.items() if k != "assessment"}
    own = dataclasses.replace(imported, source="ask", config=config, status=RunStatus.PENDING)
    breakdown = retrieval_breakdown(own)[1]  # type: ignore[index]
    assert reviewer_hints(own, breakdown) == breakdown.recommendations  # the asker's advice, all of it
    accepted = dataclasses.replace(own, status=RunStatus.AUTO_ACCEPTED)
    assert reviewer_hints(accepted, breakdown) == breakdown.recommendations[1:]  # the level's "review ..." line goes
