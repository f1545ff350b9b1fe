"""What kind of answer a question asks for, and whether an answer's new content is of that kind.

"Who" wants a person, "when" a time, "how many" a quantity, "where" a place, and "which
... A or B" one of the options it names. A grounded name of the wrong kind ("1066" for
"who") is not an answer, and the option a passage does not pair with the question's words
is the wrong one (services.judging.evidence measures that).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from services.judging.atoms import CODE, NAME, NUMBER, YEAR, Atom
from services.retrieval.text import tokenize

PERSON, PLACE, TIME, QUANTITY, DURATION, REASON, CHOICE, ANY = (
    "person", "place", "time", "quantity", "duration", "reason", "choice", "any")

_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december"
           "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_TIME_WORDS = re.compile(rf"\b(?:{_MONTHS}|century|centuries|decade|decades|year|years|day|days|week|weeks|"
                         r"month|months|hour|hours|minute|minutes|seconds?|ms|morning|evening|night|"
                         r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekdays?|weekends?|"
                         r"today|tomorrow|yesterday|tonight|noon|midday|midnight|dawn|dusk|daily|weekly|monthly|"
                         r"yearly|annually|immediately|era|a\.m|p\.m|"
                         r"spring|summer|autumn|winter|bc|ad|bce|ce|\d+(?:st|nd|rd|th))\b", re.IGNORECASE)
# A "when" is also answered by the event or condition it follows: "When does the motor stop?"
# "When the guard door opens.", "after Decision Time", "during the Cold War", "if the buffer fills".
_TIME_OPENING = re.compile(r"^\W*(?:(?:just|only|right|shortly|soon|immediately|not\s+until)\s+)?"
                           r"(?:when|whenever|while|once|after|before|until|till|since|during|if|upon|every|each|"
                           r"as\s+soon\s+as|as\s+long\s+as|by\s+the\s+time|at\s+the\s+(?:start|end|beginning|time))\b",
                           re.IGNORECASE)
# A quantity said in words: "a single output", "twice", "free" (for "how much does it cost").
_QUANTITY_WORDS = re.compile(r"\b(?:zero|none|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|"
                             r"hundreds?|thousands?|millions?|billions?|dozens?|single|once|twice|thrice|half|"
                             r"double|triple|both|free)\b", re.IGNORECASE)
# "How long" and "how often" are answered by a figure or by a span without one: "for the rest of the
# interpreter session", "until the process exits", "every time the buffer fills" (_TIME_OPENING).
# Read from the words the question lacks, where "the" or "of" may be gone, so "rest" stands for "for the rest of".
_LASTING = re.compile(r"\b(?:rest|remainder|lifetime|forever|permanently|indefinitely|always|never|until|till)\b",
                      re.IGNORECASE)
# The asking wh-phrase (_ASKING), read in order: the first that matches decides.
_EXPECTED = (
    (re.compile(r"\bhow\s+(?:long|often)\b", re.IGNORECASE), DURATION),
    (re.compile(r"\b(?:how\s+(?:many|much|far|old|big|large|high|tall|fast|heavy)|"
                r"(?:what|which)\s+(?:percentage|percent|proportion|number|amount|fraction|size|length|speed|"
                r"temperature|voltage|distance))\b", re.IGNORECASE), QUANTITY),
    (re.compile(r"\b(?:when|(?:what|which)\s+(?:year|date|time|day|month|century|decade|period|era)|"
                r"(?:in|on|during)\s+(?:what|which)\s+(?:year|date|month|century|decade|period))\b", re.IGNORECASE), TIME),
    (re.compile(r"\b(?:who|whom|whose)\b", re.IGNORECASE), PERSON),
    (re.compile(r"\b(?:where|(?:what|which)\s+(?:city|country|state|place|region|town|continent|location)|"
                r"(?:in|at)\s+(?:what|which)\s+(?:city|country|state|place|region|town))\b", re.IGNORECASE), PLACE),
    (re.compile(r"\bwhy\b", re.IGNORECASE), REASON),
)
# The wh-word that asks: at the question's start or a clause's, after a preposition ("in what
# city"), or last ("was released when?"). A "when", "where" or "whose" elsewhere opens a clause
# of the question and asks nothing: "Why do I get an error when I write into the diagonal?",
# "random ints where the upper bound is included", "remainder whose sign follows the dividend".
_AUXILIARY = r"(?:do|does|did|is|are|was|were|will|would|can|could|should|shall|has|have|had|must|may|might)"
_OPENING_VERB = re.compile(rf"\s*{_AUXILIARY}(?:n['’]t)?\b", re.IGNORECASE)
_ASKING = re.compile(r"(?:^|[,;:(]|\s[-–—]|\b(?:and|but|or|in|on|at|during|by|from|to|for|of|with|after|before|"
                     r"since|until|over|under|about|around|into|within|through|between|among|per|like))\s*"
                     r"(?P<word>why|how|what|which|who|whom|whose|when|where)\b|"
                     rf"\b(?P<inverted>(?:when|where|why|how)\s+{_AUXILIARY}|how\s+(?:many|much))\b|"
                     r"\b(?P<last>when|where|who|what)\W*$", re.IGNORECASE)
# A condition put first is not what is asked: "When I unpack with a starred name like first,
# *rest = data, what type does rest end up being?"
_CONDITION = re.compile(rf"^\s*(?:when|if|while|once|after|before)\b(?!\s+{_AUXILIARY}\b)[^,?]*,\s*", re.IGNORECASE)
# "When should I use a frozen dataclass?" asks in what case, not at what time: a condition answers
# it ("if instances must be hashable"), as it does "When is it safe to call close()?".
_ASKS_A_CASE = re.compile(r"^\s*when\s+(?:(?:should|would|could|can|must|might|may|shall)(?:n['’]t)?\s+"
                          r"(?:i|you|we|one|they|it|he|she)|is\s+it)\b", re.IGNORECASE)
# "... , A or B?": the options are the phrases either side of the question's last "or". The
# first starts after the last comma, colon or "between"/"either" before it; with none, it
# takes as many words as the second ("in Boston or Chicago" asks Boston or Chicago).
_OR = re.compile(r"^(?P<before>.*\S)\s+or\s+(?P<after>[^,;:?]{1,120}?)\s*\?\s*$", re.IGNORECASE | re.DOTALL)
_OPTION_START = re.compile(r"^(?P<lead>.*(?:[,;:]|\bbetween\b|\beither\b))\s*(?P<option>[^,;:]+)$", re.IGNORECASE | re.DOTALL)
_OPTION_WORDS = 6
_LEADING_FILLER = re.compile(r"^(?:the|a|an|is\s+it|was\s+it|it)\s+", re.IGNORECASE)


@dataclass(frozen=True)
class Expected:
    kind: str  # person | place | time | quantity | duration | reason | choice | any
    options: tuple[str, ...] = ()


def expected_kind(question: str) -> Expected:
    """The kind of answer `question` asks for (`any` when its words do not say)."""
    options = _options(question)
    if options:
        return Expected(CHOICE, options)
    asked = _CONDITION.sub("", question)
    match = _ASKING.search(asked)
    if match is None or _ASKS_A_CASE.match(asked) or _OPENING_VERB.match(asked):
        # a yes/no question (one opening with its verb, whatever wh-words its clauses hold: "Is
        # it an enzyme that, when expressed, ...?"), a search-style query naming no wh-word, or a case asked for
        return Expected(ANY)
    if "?" not in asked and asked[:match.start()].strip() and not match.group("last"):
        # A search-style query asks nothing: its wh-word is a clause of what it describes
        # ("count how many times each value occurs", "distinct values along with how many times each occurs").
        return Expected(ANY)
    word = match.group("word") or match.group("inverted") or match.group("last")
    for phrase in (asked[match.start():].lstrip(",;:(-–— "), asked[asked.index(word, match.start()):]):
        for pattern, kind in _EXPECTED:
            if pattern.match(phrase):
                return Expected(kind)
    return Expected(ANY)


def asks_yes_or_no(question: str) -> bool:
    """Whether `question` names no options and asks with no wh-word: a yes/no question ("Does
    argmax ...?"; one opening with its verb asks yes or no whatever wh-words its clauses hold:
    "Is it a problem where one output is expected?") or a search-style query, either of which a
    bare yes or no can answer."""
    if _options(question):
        return False
    return _OPENING_VERB.match(question) is not None or _ASKING.search(_CONDITION.sub("", question)) is None


def type_fit(expected: Expected, added: tuple[Atom, ...], added_text: str, concise: str = "") -> float:
    """1 when the answer's new content is of the asked kind, 0 when it is plainly not, 0.5
    when the question does not say or the answer's kind cannot be read. `added_text` is the
    answer's words that the question does not hold; `concise` a concise answer's whole text,
    whose opening can say when ("after Decision Time")."""
    kinds = {a.kind for a in added}
    if expected.kind in (ANY, CHOICE):
        return 0.5
    quantity = NUMBER in kinds or YEAR in kinds or bool(_QUANTITY_WORDS.search(added_text))
    time = YEAR in kinds or bool(_TIME_WORDS.search(added_text) or _TIME_OPENING.match(concise))
    if expected.kind == QUANTITY:
        return 1.0 if quantity else 0.0
    if expected.kind == DURATION:  # a figure, a time, or a span lasting until something
        return 1.0 if quantity or time or _LASTING.search(added_text) else 0.0
    if expected.kind == TIME:
        return 1.0 if time else 0.0
    if expected.kind == REASON:  # a figure alone gives no reason ("Why is 0755 an error?" "3.0"); words may
        return 0.0 if kinds and kinds <= {NUMBER, YEAR} and not re.search(r"[^\W\d_]", added_text) else 0.5
    if expected.kind in (PERSON, PLACE):
        if NAME in kinds or CODE in kinds:
            return 1.0
        return 0.0 if kinds <= {NUMBER, YEAR} and kinds else 0.5
    return 0.5


def words_not_asked(question: str, answer: str) -> str:
    """`answer`'s words, as written, that `question` does not hold: what its kind is read from."""
    asked = {w.lower() for w in re.findall(r"[^\W_]+", question)}
    return " ".join(w for w in re.findall(r"[^\W_]+", answer) if w.lower() not in asked)


def chosen_option(expected: Expected, answer: str) -> int | None:
    """Which of the question's options the answer names (0-based): the one sharing most of its
    words with the answer; None for neither, or when both share as many."""
    said = set(tokenize(answer))
    shared = [len(set(tokenize(option)) & said) for option in expected.options]
    best = max(shared, default=0)
    return shared.index(best) if best and shared.count(best) == 1 else None


def without_options(question: str, options: Sequence[str]) -> str:
    """`question` with the options it names taken out: what an answer picking one is asked."""
    for option in options:
        question = question.replace(option, " ")
    return question


def _options(question: str) -> tuple[str, ...]:
    match = _OR.match(question.strip())
    if match is None or re.match(r"not\b", match.group("after"), re.IGNORECASE):
        return ()  # "whether or not" names no options ("or Notable examples" does)
    started = _OPTION_START.match(match.group("before"))
    if started is not None:
        first = started.group("option")
    else:
        first = " ".join(match.group("before").split()[-min(_OPTION_WORDS, len(match.group("after").split())):])
    found = tuple(_LEADING_FILLER.sub("", part.strip()).strip(" .\"'“”") for part in (first, match.group("after")))
    if not all(found) or found[0].lower() == found[1].lower():
        return ()
    return found
