"""Start here: what the workbench does, four things to try, where each page fits, and the demo."""

from __future__ import annotations

import streamlit as st

from app_pages import _demo as demo
from app_pages.common import ensure_store, require_sign_in, show_error
from services.errors import WorkbenchError

INTRO = (
    "Ask questions of a document corpus and see **why** each answer is or is not trustworthy: hybrid BM25 + dense "
    "retrieval, a seven-part confidence breakdown and an answer loop that checks itself.",
    "Answers the workbench is unsure of wait in a **review queue**, where people approve, flag or correct them.",
    "Their verdicts **calibrate** the confidence and tune its weights, and reviewed answers are **exported** for "
    "audits or fine-tuning sets.",
)
# (title, what you see, page, link label, icon, query parameters)
THINGS_TO_TRY = (
    ("Ask a question", "Watch the pipeline retrieve, score, correct and reflect, then read the seven components "
     "behind the confidence.", "app_pages/ask.py", "Ask", ":material/chat:", None),
    ("Work the review queue", "Most likely wrong answers first. Approve with A, flag with F, skip with N.",
     "app_pages/review.py", "Work the review queue", ":material/fact_check:", {"view": "work"}),
    ("See where runs went", "The router's decisions per run as a Sankey: which questions were refined, "
     "decomposed or accepted as the best effort.", "app_pages/routes.py", "Router paths", ":material/alt_route:", None),
    ("Check calibration", "Does 0.8 confidence mean 80% approved? Compare confidence with verdicts, then move the "
     "weights and watch every run re-score.", "app_pages/tuning.py", "Tuning", ":material/tune:", None),
)
# (step, pages, what happens there)
WORKFLOW = (
    ("1. Answer", "Ask, Search, Import runs",
     "questions are answered (or another system's answers imported) and stored with every number behind them"),
    ("2. Review", "Review queue", "the least certain answers first; a person approves, flags or corrects each"),
    ("3. Tune", "Tuning, Router paths, Evaluate, Document trends",
     "confidence against verdicts, the router's paths, retrieval quality, the documents to fix first"),
    ("4. Ship", "Export", "reviewed answers out as CSV, JSONL or Parquet"),
    ("Data", "Corpus", "the documents everything is answered from"),
)


def workflow_markdown() -> str:
    rows = [f"| {step} | **{pages}** | {what} |" for step, pages, what in WORKFLOW]
    return "\n".join(["| step | pages | what happens there |", "|---|---|---|", *rows])


def main() -> None:
    require_sign_in()
    st.title("Start here")
    for line in INTRO:
        st.markdown(line)
    try:
        ensure_store()
        status = demo.cached_demo_status()
    except WorkbenchError as exc:
        show_error(exc)
        return
    _render_demo(status)
    st.subheader("Four things to try")
    for column, (title, text, page, label, icon, query) in zip(st.columns(4), THINGS_TO_TRY):
        with column.container(border=True, height="stretch"):
            st.markdown(f"**{title}**")
            st.caption(text)
            st.page_link(page, label=label, icon=icon, query_params=query)
    st.subheader("Where each page fits")
    st.markdown(workflow_markdown())


def _render_demo(status: demo.DemoStatus) -> None:
    st.subheader("The live demo")
    demo.render_notice()
    if status.store_empty:
        st.info("The store holds no runs yet, so the queue, the router paths and the calibration have nothing to "
                "show. Load the demo: the handbook's 25 questions answered with all three presets, with answer-key "
                "verdicts on two presets' runs.")
        demo.render_load_button("home")
        return
    st.caption(demo.status_text(status) + (" " + demo.ANSWER_KEY_NOTE if status.answer_key_verdicts else ""))
    if status.demo_runs:
        demo.render_remove_button("home")
    elif status.runs:
        st.caption("The Load demo runs button shows on a store without runs; `workbench demo` adds the demo runs "
                   "beside yours, and `workbench --data-dir DIR demo` gives them a store of their own.")


if __name__ == "__main__":  # Streamlit runs pages as __main__; tests import the pure helpers
    main()
