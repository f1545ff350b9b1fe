"""The decision view the run detail and Work the queue share, under AppTest on the real store,
model and judge: the passages an imported answer was given, the "why this score" strip whose
blend ends on the header's confidence, plain names for the signals, and a correction shown as
the answer with the original labelled as replaced."""

from __future__ import annotations

import re
from pathlib import Path

from streamlit.testing.v1 import AppTest

from app_pages._claim_evidence import HIGHLIGHT
from app_pages._decision_text import blend_sentence, why_items
from app_pages.common import REVIEWER_KEY, as_plain
from app_pages.review import TAB_KEY, WORK_TAB
from services.answering.runs import load_run, retrieval_breakdown
from services.review.queue import submit_review
from tests.pages.test_claim_evidence import CONTEXTS, FABRICATED, open_run, store_import

PAGE = str(Path(__file__).resolve().parents[2] / "app_pages" / "review.py")
STRIP_LABELS = ("Retrieval confidence", "CRAG verdict", "Reflection", "Answer grade", "Judge P(supported)", "Confidence")
INTERNAL_NAMES = ("heuristic_value", "reflection_score", "retrieval_confidence", "p_supported")


def open_work() -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.session_state[REVIEWER_KEY] = "ana"
    at.session_state[TAB_KEY] = WORK_TAB
    at.run()
    assert not at.exception, at.exception
    return at


def everything_shown(at: AppTest) -> list[str]:
    return [str(e.value) for kind in ("markdown", "caption", "text") for e in at.get(kind)]


def strip(at: AppTest) -> dict[str, str]:
    """The "why this score" strip as label -> value: a column each, its label a caption over its value in bold."""
    shown = {}
    for column in at.columns:
        captions, values = list(column.caption), list(column.markdown)
        if len(captions) == 1 and len(values) == 1 and captions[0].value in STRIP_LABELS:
            shown[captions[0].value] = values[0].value.strip("*").replace("\\", "")
    return shown


def test_work_the_queue_shows_the_passages_the_why_strip_and_the_highlighted_word(clean_db, settings):
    run_id = store_import(FABRICATED, settings)
    at = open_work()
    texts = [t.value for t in at.text]
    assert "[1] context 1" in texts and CONTEXTS[0] in texts and CONTEXTS[1] in texts  # the passages
    assert any(c.value.startswith("relevance 0.") for c in at.caption)  # with their scores
    assert "**Why this score**" in [m.value for m in at.markdown]
    metrics = strip(at)
    assert tuple(metrics) == STRIP_LABELS
    run = load_run(run_id)
    assert metrics["Confidence"] == f"{run.final_confidence:.2f} ({run.final_level})"
    assert metrics["Answer grade"] == f"{run.grade}/5"
    assert any(f":{HIGHLIGHT}[Kobe]" in m.value for m in at.markdown)
    shown = " ".join(everything_shown(at))
    assert not [name for name in INTERNAL_NAMES if name in shown]


def test_the_run_detail_explains_its_confidence_with_crag_and_the_reflection_reason(clean_db, settings):
    run_id = store_import(FABRICATED, settings)
    run = load_run(run_id)
    at = open_run(run_id)
    header = next(c.value for c in at.caption if c.value.startswith("Status "))
    blend = next(c.value for c in at.caption if c.value.startswith("Confidence "))
    # The header's confidence is the number the blend sentence ends on, term by term.
    assert f"confidence {run.final_confidence:.2f}" in header and blend.startswith(f"Confidence {run.final_confidence:.2f} = ")
    terms = re.findall(r"(\d\.\d\d) × (\d\.\d\d)", blend)
    assert len(terms) == 3 and abs(sum(float(v) * float(w) for v, w in terms) - run.final_confidence) < 0.02
    metrics = strip(at)
    assert metrics["CRAG verdict"] == run.crag_verdict.value.lower()  # type: ignore[union-attr]
    reflection = run.best().reflection  # type: ignore[union-attr]
    assert as_plain(f"Reflection: {reflection.reflection_reason}") in [c.value for c in at.caption]  # type: ignore[union-attr]
    # The retrieval chart's total names itself retrieval, not a second "confidence".
    chart = next(c for c in at.get("plotly_chart") if "breakdown" in str(c.proto.id))
    assert f"retrieval {run.retrieval_confidence:.2f}" in chart.proto.spec and "total " not in chart.proto.spec


def test_the_strip_and_the_blend_use_plain_names(clean_db, settings):
    run = load_run(store_import(FABRICATED, settings))
    breakdown = retrieval_breakdown(run)[1]  # type: ignore[index]
    words = " ".join([blend_sentence(run, breakdown)] + [f"{i.label} {i.value} {i.detail}" for i in why_items(run, breakdown)])
    assert "answer grade 4/5 → 0.75" in words or re.search(r"answer grade \d/5 → \d\.\d\d", words)
    assert not [name for name in INTERNAL_NAMES if name in words]


def test_a_corrected_run_shows_the_correction_as_its_answer(clean_db, settings):
    run_id = store_import(FABRICATED, settings)
    submit_review(run_id, expected_version=0, action="correct", reviewer="bo",
                  corrected_answer="The maker of the robot arm has its head office in Osaka.")
    at = open_run(run_id)
    markdown = [m.value for m in at.markdown]
    texts = [t.value for t in at.text]
    assert "**Answer** — corrected by bo" in markdown
    # The question, then the correction where the answer goes, then the original struck through.
    assert texts[:2] == [load_run(run_id).query, "The maker of the robot arm has its head office in Osaka."]
    assert "Original answer, replaced by the correction:" in [c.value for c in at.caption]
    assert f"~~{as_plain(FABRICATED)}~~" in markdown
