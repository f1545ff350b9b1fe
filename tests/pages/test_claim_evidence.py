"""The judge's evidence as reviewers see it: the pure string-building (whole words highlighted
in any case, everything else literal whatever markdown it holds), and under AppTest, on the
real store, model and judge, an imported answer with one invented name shown with that name
highlighted on the Review page and in Work the queue, and a concise right answer with none."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt  # CommonMark, as Streamlit's parser reads everything but directives
from streamlit.testing.v1 import AppTest

from app_pages._claim_evidence import (
    HIGHLIGHT,
    NO_SUPPORT,
    evidence_line,
    headline,
    highlighted,
    p_supported_text,
    reason,
    reversal_line,
)
from app_pages.common import REVIEWER_KEY
from app_pages.review import TAB_KEY, WORK_TAB
from services.judging import ClaimCheck, Verdict

PAGE = str(Path(__file__).resolve().parents[2] / "app_pages" / "review.py")
QUESTION = "The maker of the robot arm has its head office in what city?"
CONTEXTS = ("The maker of the robot arm, Kawada Robotics, has its head office in Osaka. It was founded in 1962.",
            "Kawada Robotics builds welding cells for car plants.")
FABRICATED = "The maker of the robot arm has its head office in Kobe."
# A highlighted span as Streamlit's directive syntax writes it; its label keeps its escapes.
DIRECTIVE = re.compile(r":" + re.escape(HIGHLIGHT) + r"\[((?:\\.|[^\\\]])*)\]")
SENTINEL_OPEN, SENTINEL_CLOSE = "\u0001", "\u0002"


def rendered(markdown: str) -> str:
    """What a reader sees of `markdown`: highlighted spans marked with sentinels, and the rest as
    CommonMark renders it, which must be plain text only (no emphasis, link, code, math or HTML)."""
    marked = DIRECTIVE.sub(lambda m: f"{SENTINEL_OPEN}{m[1]}{SENTINEL_CLOSE}", markdown)
    tokens = MarkdownIt("commonmark").parse(marked)
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"], markdown
    children = tokens[1].children or []
    assert {c.type for c in children} <= {"text"}, (markdown, [c.type for c in children])
    return "".join(c.content for c in children)


def unescaped_specials(markdown: str) -> list[str]:
    """Markdown specials outside the highlight directives not preceded by a backslash."""
    outside = DIRECTIVE.sub(lambda m: "", markdown)
    return re.findall(r"(?<!\\)(?:\\\\)*([\[\]*_`$<>#|~&:/])", outside)


# --- highlighted ---------------------------------------------------------------------------------

def test_the_invented_name_is_highlighted_and_the_rest_is_as_written():
    assert highlighted(FABRICATED, ["Kobe"]) == (
        f"The maker of the robot arm has its head office in :{HIGHLIGHT}[Kobe].")
    assert highlighted("Osaka", []) == "Osaka"


def test_words_match_whole_in_any_case_every_time():
    shown = highlighted("kobe, Kobe and KOBE; not Kobeya or Shin-kobe's", ["Kobe"])
    assert shown == (f":{HIGHLIGHT}[kobe], :{HIGHLIGHT}[Kobe] and :{HIGHLIGHT}[KOBE]; not Kobeya or "
                     f"Shin-:{HIGHLIGHT}[kobe]'s")
    assert highlighted("In 1962 and 19621 and 1962.", ["1962"]) == (
        f"In :{HIGHLIGHT}[1962] and 19621 and :{HIGHLIGHT}[1962].")
    assert highlighted("Run by Kawada  Robotics of Kawada", ["Kawada Robotics"]) == (
        f"Run by :{HIGHLIGHT}[Kawada Robotics] of Kawada")  # a name of two words, across any spacing


@pytest.mark.parametrize("text", [
    "a ] b", "a *b* c", "costs $5 or $6", "see :red[this] and :red-background[that]", "[x](http://e.com)",
    "**bold** _it_ `code` <b>html</b> # no | table ~~gone~~", "1. first", "- item", "+ item", "> quoted",
    "&amp; &lt;b&gt;", "back\\slash \\*", "a\n\n# heading\n    code", "a :red b :smile: :material/home: at 10:30",
    "x:b",
])
def test_markdown_in_a_claim_renders_literally(text: str):
    for words in ([], ["b", "x", "this"]):
        shown = highlighted(text, words)
        assert unescaped_specials(shown) == [], shown
        visible = rendered(shown)
        assert visible.replace(SENTINEL_OPEN, "").replace(SENTINEL_CLOSE, "") == " ".join(text.split())


def test_a_highlighted_word_with_markdown_in_it_stays_literal_inside_the_highlight():
    shown = highlighted("the [x] and *y* values", ["x", "y"])
    assert shown == rf"the \[:{HIGHLIGHT}[x]\] and \*:{HIGHLIGHT}[y]\* values"
    assert rendered(shown) == f"the [{SENTINEL_OPEN}x{SENTINEL_CLOSE}] and *{SENTINEL_OPEN}y{SENTINEL_CLOSE}* values"


_WORDS = ("Kobe", "Osaka", "1962", "x", "red")
_PIECES = st.sampled_from([*_WORDS, "kobe", "KOBE", "the", " ", "  ", ".", ",", "'", "[", "]", "*", "_", "$", ":",
                           "`", "<", ">", "#", "|", "~", "&", "\\", "(", ")", "!", "-", "1.", ":red[", "\n"])


@given(pieces=st.lists(_PIECES, max_size=30), words=st.sets(st.sampled_from(_WORDS)))
def test_any_text_shows_literally_with_exactly_its_whole_words_highlighted(pieces: list[str], words: set[str]):
    text = "".join(pieces)
    if not text.strip():
        return
    shown = highlighted(text, sorted(words))
    assert unescaped_specials(shown) == []
    visible = rendered(shown)
    assert visible.replace(SENTINEL_OPEN, "").replace(SENTINEL_CLOSE, "") == " ".join(text.split())
    spans = re.findall(f"{SENTINEL_OPEN}(.*?){SENTINEL_CLOSE}", visible)
    assert {s.lower() for s in spans} <= {w.lower() for w in words}
    rest = re.sub(f"{SENTINEL_OPEN}.*?{SENTINEL_CLOSE}", " ", visible)
    for word in words:  # no occurrence left unhighlighted
        assert not re.search(rf"(?<!\w){re.escape(word)}(?!\w)", rest, re.IGNORECASE), (word, visible)


# --- the other lines ------------------------------------------------------------------------------

def _claim(**changes) -> ClaimCheck:  # type: ignore[no-untyped-def]
    fields = {"text": FABRICATED, "added": ("Kobe",), "unsupported": ("Kobe",), "evidence": CONTEXTS[0].split(". ")[0],
              "context": 2, "support": 0.0, "reversed": None}
    return ClaimCheck(**{**fields, **changes})


def test_the_headline_reason_evidence_and_reversal_lines():
    verdict = Verdict(0.1234, "unsupported", "P(supported) 0.12: 'Kobe' appears in no context", False, (_claim(),))
    assert headline(verdict) == "P(supported) 0.12 · unsupported"
    assert reason(verdict) == "'Kobe' appears in no context"
    assert evidence_line(_claim()) == "context 2: The maker of the robot arm, Kawada Robotics, has its head office in Osaka"
    assert evidence_line(_claim(evidence="", context=None)) == NO_SUPPORT == "no context sentence supports this claim"
    assert reversal_line(_claim()) is None
    assert reversal_line(_claim(reversed=("raises", "lowers"))) == "says 'raises' where context 2 says 'lowers'"
    assert p_supported_text(None) == "not judged" and p_supported_text(0.5) == "0.50"


# --- the Review page on imported runs (real store, model and judge) ---------------------------------

def store_import(answer: str, settings, *, judges: bool = True,  # type: ignore[no-untyped-def]
                 trace_id: str | None = "") -> int:
    """The record assessed, made a run and stored as intake stores it (trace id "t-" and the
    answer's start unless given; None sends none)."""
    from services.answering.llm.backends import backend_for
    from services.answering.runs import save_run
    from services.intake.assess import assess_record, imported_run
    from services.intake.schema import ExternalRun
    from services.store import transaction

    trace = f"t-{answer[:8]}" if trace_id == "" else trace_id
    record = ExternalRun.model_validate({"question": QUESTION, "answer": answer, "trace_id": trace,
                                         "contexts": [{"text": c} for c in CONTEXTS]})
    with transaction() as session:
        assessment = assess_record(record, session=session, backend=backend_for(settings), judges=judges)
        run = imported_run(assessment, record, source="import", collection="default")
        return save_run(run, session=session)


def open_run(run_id: int) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.session_state[REVIEWER_KEY] = "ana"
    at.run()
    assert not at.exception, at.exception
    at.multiselect(key="review.statuses").set_value([]).run()  # every status: a right answer may be auto-accepted
    at.selectbox(key="review.pick").select(run_id).run()
    assert not at.exception, at.exception
    return at


def shown_markdown(at: AppTest) -> list[str]:
    return [str(e.value) for kind in ("markdown", "caption") for e in at.get(kind)]


def test_the_review_page_highlights_the_invented_name_and_says_why(clean_db, settings):
    run_id = store_import(FABRICATED, settings)
    at = open_run(run_id)
    shown = shown_markdown(at)
    highlighted_claims = [m for m in shown if f":{HIGHLIGHT}[" in m]
    assert highlighted_claims == [f"**Claim 1** · The maker of the robot arm has its head office in :{HIGHLIGHT}[Kobe]."]
    assert any(m.startswith("**P(supported) ") and "'Kobe' appears in no context" in m for m in shown), shown
    assert any(m.startswith("context 1\\: The maker of the robot arm, Kawada Robotics, has its head office in Osaka")
               for m in shown), shown
    frame = next(d.value for d in at.dataframe if "P(supported)" in d.value.columns)
    assert re.fullmatch(r"0\.\d\d", frame.loc[frame["run id"] == run_id, "P(supported)"].item())


def test_a_concise_right_answer_has_no_highlighted_word(clean_db, settings):
    run_id = store_import("Osaka", settings)
    at = open_run(run_id)
    shown = shown_markdown(at)
    assert [m for m in shown if f":{HIGHLIGHT}[" in m] == []
    assert "**Claim 1** · Osaka" in shown  # the claim is shown, with its evidence
    assert any(m.startswith("context 1\\: The maker of the robot arm") for m in shown), shown
    assert not any("appears in no context" in m for m in shown), shown


def test_a_run_the_judge_never_saw_says_not_judged(clean_db, settings):
    run_id = store_import(FABRICATED, settings, judges=False)
    at = open_run(run_id)
    shown = shown_markdown(at)
    assert "**P(supported)** — not judged\\: this run was assessed with the judges off." in shown
    assert [m for m in shown if f":{HIGHLIGHT}[" in m or m.startswith("**Claim ")] == []
    frame = next(d.value for d in at.dataframe if "P(supported)" in d.value.columns)
    assert frame.loc[frame["run id"] == run_id, "P(supported)"].item() == "not judged"


def test_work_the_queue_shows_the_evidence_beside_the_answer(clean_db, settings):
    run_id = store_import(FABRICATED, settings)
    at = AppTest.from_file(PAGE, default_timeout=300)
    at.session_state[REVIEWER_KEY] = "ana"
    at.session_state[TAB_KEY] = WORK_TAB
    at.run()
    assert not at.exception, at.exception
    shown = shown_markdown(at)
    assert [m for m in shown if m.startswith(f"**Run {run_id}** · P(supported) 0.")]
    assert f"The maker of the robot arm has its head office in :{HIGHLIGHT}[Kobe]." in " ".join(shown)
    assert any("most likely wrong first" in c for c in shown), shown
