"""The judge's evidence on a run's answer, as a reviewer reads it: P(supported) and the reason,
then each claim with the words no context holds highlighted and the context sentence that
supports it (services.judging.Verdict on the best iteration)."""

from __future__ import annotations

import re
from collections.abc import Sequence

import streamlit as st

from services.answering.runs import Run
from services.judging import ClaimCheck, Verdict
from services.judging.verdict import reversal_text

NOT_JUDGED = "not judged"
NO_SUPPORT = "no context sentence supports this claim"
HIGHLIGHT = "red-background"
_SPECIAL = re.compile(r"[\\`*_\[\]<>#|~$&:/]")
_REASON_PREFIX = re.compile(r"^P\(supported\) [0-9.]+:\s*")  # the headline says it already
# Text that opens a block when a line starts with it (a list item, a numbered item, a rule):
# escaped so a claim such as "1. Turn it off" or "- no" stays a line of text.
_BLOCK_START = re.compile(r"^(\d+)([.)])|^([-+=])")


# --- pure string-building ------------------------------------------------------------------------

def _literal(text: str) -> str:
    """`text` as markdown that shows literally. Beyond CommonMark's specials: in Streamlit a
    colon starts a directive (`:red[...]`, or an empty span for a bare `:red`), an emoji
    (`:smile:`) or an icon; an `&` starts an entity. Parentheses are left alone: they need a `]` to make a link,
    and an escaped one shows its backslash inside an autolinked URL."""
    return _SPECIAL.sub(r"\\\g<0>", text)


def highlighted(text: str, words: Sequence[str]) -> str:
    """`text` as Streamlit markdown that renders literally, each whole-word occurrence of
    `words` (any case; a word of several parts matches across any spacing) on a red background."""
    text = " ".join(text.split())  # one line: a claim's line breaks must not open blocks
    parts = sorted({" ".join(w.split()) for w in words if w.strip()}, key=len, reverse=True)
    if not parts:
        return _escape_block_start(_literal(text))
    pattern = re.compile("(?<!\\w)(?:" + "|".join(r"\s+".join(map(re.escape, p.split(" "))) for p in parts) + ")(?!\\w)",
                         re.IGNORECASE)
    out, at = [], 0
    for match in pattern.finditer(text):
        out += [_literal(text[at:match.start()]), f":{HIGHLIGHT}[{_literal(match.group(0))}]"]
        at = match.end()
    out.append(_literal(text[at:]))
    return _escape_block_start("".join(out))


def _escape_block_start(markdown: str) -> str:
    return _BLOCK_START.sub(lambda m: f"{m[1]}\\{m[2]}" if m[1] else f"\\{m[3]}", markdown, count=1)


def headline(verdict: Verdict) -> str:
    return f"P(supported) {verdict.p_supported:.2f} · {verdict.label}"


def reason(verdict: Verdict) -> str:
    """The judge's reason without the P(supported) it starts with (the headline shows that)."""
    return _REASON_PREFIX.sub("", verdict.reason, count=1)


def evidence_line(claim: ClaimCheck) -> str:
    """Where the claim's support is: "context 2: <sentence>" (plain text), or that there is none."""
    if not claim.evidence or claim.context is None:
        return NO_SUPPORT
    return f"context {claim.context}: {' '.join(claim.evidence.split())}"


def reversal_line(claim: ClaimCheck) -> str | None:
    """"says 'raises' where context 2 says 'lowers'" (plain text); None without a reversal."""
    if claim.reversed is None:
        return None
    return reversal_text(claim.reversed, f"context {claim.context}" if claim.context is not None else "its context")


def claim_words(claim: ClaimCheck) -> tuple[str, ...]:
    """The words to highlight in a claim: what no context holds, and a word turned around."""
    return claim.unsupported + ((claim.reversed[0],) if claim.reversed and claim.reversed[0] else ())


def p_supported_text(p_supported: float | None) -> str:
    """A queue row's P(supported), or "not judged" for runs the judge never saw."""
    return NOT_JUDGED if p_supported is None else f"{p_supported:.2f}"


def not_judged_text(run: Run) -> str:
    if not run.final_answer.strip():
        return f"{NOT_JUDGED}: there is no answer to judge."
    assessment = run.config.get("assessment")
    if assessment is not None and not assessment.get("judges"):
        return f"{NOT_JUDGED}: this run was assessed with the judges off."
    return (f"{NOT_JUDGED}: this run was stored before the judge existed, or with its judges off "
            "(a preset without reflection or grading).")


# --- the part ------------------------------------------------------------------------------------

def render_claim_evidence(run: Run) -> None:
    """The verdict on `run`'s best iteration: headline, reason, and each claim with its evidence."""
    best = run.best()
    verdict = best.verdict if best is not None else None
    if verdict is None:
        st.markdown(f"**P(supported)** — {_literal(not_judged_text(run))}")
        return
    st.markdown(f"**{headline(verdict)}** — {_literal(reason(verdict))}")
    if not verdict.claims:
        return
    for n, claim in enumerate(verdict.claims, start=1):
        with st.container(border=True):
            st.markdown(f"**Claim {n}** · {highlighted(claim.text, claim_words(claim))}")
            st.caption(_literal(evidence_line(claim)))
            if (turned := reversal_line(claim)) is not None:
                st.caption(":orange[" + _literal(turned) + "]")
    asks = "no particular kind of answer" if verdict.expected == "any" else f"a {verdict.expected}"
    st.caption(f"Highlighted: words no context holds, and a word its context turns around. The question asks for "
               f"{_literal(asks)}; judge model {_literal(verdict.model_version or '(unversioned)')}.")
