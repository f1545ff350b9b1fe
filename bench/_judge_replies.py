"""Bare yes/no replies for the judge's development set: a passage's sentence asked as a yes/no
question, once as it stands and once turned (a direction reversed, a figure changed), each
answered "yes" and "no". The right reply to the first is yes, to the second no; each question
gets both replies, so the two sides hold the same words and lengths."""

from __future__ import annotations

import random
import re

# Fronted to ask the sentence ("The timeout is 30 s." -> "Is the timeout 30 s?"). Not "do" and its
# forms, which a sentence uses for emphasis or negation, nor "cannot", which cannot open a question.
_FRONTED = frozenset("is are was were can could will would should must may has have".split())
# Words opening a subject that lose their capital when the verb goes first; any other (a name) keeps it.
_COMMON_OPENERS = frozenset("the a an this that these those it its each every all some any no their his her there "
                            "he she they we one".split())
# A subject holding a clause ("Note that ...", "The value which ...") is not one to ask about.
_CLAUSE_WORDS = frozenset("that which who whom whose when where if because while before after although though since "
                          "unless once as".split())
MAX_SUBJECT_WORDS = 12
# A reply's wording, as a system writes it: bare, with a stop, or echoing the question's verb
# ("Yes, it was." / "No, it wasn't."). The same form answers both ways on one question, so its
# length says nothing of which is right.
_FORMS = ("bare", "stop", "echo")
_NEGATED = {"can": "can't", "will": "won't", "may": "may not", "shall": "shan't"}
_PLURAL = frozenset("are were have".split())


def yes_no_question(sentence: str) -> str | None:
    """`sentence` asked as a yes/no question by fronting the verb that opens its predicate; None
    where no such verb comes before a comma, colon, bracket or clause word within MAX_SUBJECT_WORDS
    words (a clause before the subject, or no auxiliary: "Raising it lowers ..."), or where the
    question would offer options."""
    words = sentence.strip().rstrip(".!").split()
    if sentence.count("(") != sentence.count(")") or sentence.count("[") != sentence.count("]"):
        return None  # cut inside a bracket: not a sentence to ask
    if re.search(r"\bor\b", sentence, re.IGNORECASE):
        return None  # asked, "… A or B?" offers options: a choice, not a yes/no question
    for i, word in enumerate(words[:MAX_SUBJECT_WORDS + 1]):
        if i >= 1 and word.lower() in _FRONTED:
            first = words[0].lower() if words[0].lower() in _COMMON_OPENERS else words[0]
            return " ".join([word.capitalize(), first, *words[1:i], *words[i + 1:]]) + "?"
        if re.search(r"[,:;()\[\]]", word) or word.lower() in _CLAUSE_WORDS:
            return None
    return None


def _replies(question: str, form: str) -> tuple[str, str]:
    if form == "bare":
        return "Yes", "No"
    if form == "stop":
        return "Yes.", "No."
    verb = question.split()[0].lower()
    subject = "they" if verb in _PLURAL else "it"
    negated = _NEGATED.get(verb, f"{verb}n't")
    return f"Yes, {subject} {verb}.", f"No, {subject} {negated}."


def reply_cases(stated: str, turned: str, rng: random.Random) -> list[tuple[str, str, str]]:
    """(kind, question, answer) for the sentence `stated` and its `turned` version: right_reply
    and wrong_reply on each; none when either cannot be asked."""
    asked, denied = yes_no_question(stated), yes_no_question(turned)
    if asked is None or denied is None or asked == denied:
        return []
    form = rng.choice(_FORMS)
    (yes, no), (denied_yes, denied_no) = _replies(asked, form), _replies(denied, form)
    return [("right_reply", asked, yes), ("wrong_reply", asked, no),
            ("right_reply", denied, denied_no), ("wrong_reply", denied, denied_yes)]
