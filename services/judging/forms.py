"""The form an answer takes (a phrase, a passage's sentence, a restated question), read from its
words and the question's: the fitted model weighs the signals per form
(services.judging.model), since the same signal means different things in each."""

from __future__ import annotations

from collections.abc import Mapping

from services.judging._sentences import answer_sentences, strip_markers
from services.retrieval.text import tokenize

FORMS = ("phrase", "sentence", "restated")
# Read beside the signals and stored with them; never weighed themselves.
FORM_SIGNALS = ("phrase", "question_echo")
PHRASE_WORDS = 8  # an answer of this many words or fewer is a phrase picked from its passage
RESTATES_AT = 0.7  # question_echo from which an answer restates its question


def form_signals(question: str, said: str, *, bare_reply: bool) -> dict[str, float]:
    """`phrase` and `question_echo` for what the answer says (`question` without its options)."""
    return {"phrase": float(not bare_reply and len(strip_markers(said).split()) <= PHRASE_WORDS),
            "question_echo": _echo(question, said)}


def answer_form(features: Mapping[str, float]) -> str | None:
    """The form whose weights read `features`: None for signals read before forms were (they
    carry no form signals) and are read with the pooled weights."""
    if not set(FORM_SIGNALS) <= set(features):
        return None
    if features["question_echo"] >= RESTATES_AT:
        return "restated"
    return "phrase" if features["phrase"] else "sentence"


def _echo(question: str, said: str) -> float:
    """The largest share of the question's content words one sentence of the answer repeats: a
    restated question holds nearly all of them in its sentence, a passage's sentence some (an
    answer of several passage sentences may hold many between them, none restating it)."""
    asked = set(tokenize(question))
    if not asked:
        return 0.0
    return max((len(asked & set(tokenize(sentence))) / len(asked) for sentence in answer_sentences(said)), default=0.0)
