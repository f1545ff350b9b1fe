"""Text edits behind the judge's development set (bench/judge_set.py): where a span sits, what
type of value it is, the question restated with an answer, a changed number, a reversed word.

Pure string functions, seeded only through the `random.Random` passed in.
"""

from __future__ import annotations

import random
import re

# --- finding spans -------------------------------------------------------------------------


def find_spans(text: str, span: str) -> list[tuple[int, int]]:
    """(start, end) of every occurrence of `span` in `text` that is not part of a longer word
    or number; whitespace inside the span matches any run of whitespace (hard-wrapped docs)."""
    words = span.split()
    if not words:
        return []
    pattern = r"\s+".join(re.escape(w) for w in words)
    if re.match(r"\w", span.strip()):
        pattern = r"(?<![\w.])" + pattern if span.strip()[0].isdigit() else r"(?<!\w)" + pattern
    if re.search(r"\w$", span.strip()):
        pattern += r"(?![\w]|\.\d)"
    return [(m.start(), m.end()) for m in re.finditer(pattern, text)]


def contains(text: str, value: str) -> bool:
    """Whether `value` occurs in `text` as a whole word or number, ignoring case."""
    return bool(value.strip()) and bool(find_spans(text.lower(), value.lower()))


# --- what kind of value --------------------------------------------------------------------

_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_DATE = re.compile(rf"(?<!\d)(1[0-9]{{3}}|20[0-9]{{2}})(?!\d)(?!\s?(?:mm|ms|kg|m\b|h\b|ml))|\b(?:{_MONTHS})\b"
                   r"|\b\d+(?:st|nd|rd|th)\s+(?:and\s+\d+(?:st|nd|rd|th)\s+)?centur|\bcentur(?:y|ies)\b|\bBC\b|\bAD\b",
                   re.IGNORECASE)
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
_NUMBER_WORD = re.compile(rf"\b(?:{'|'.join(NUMBER_WORDS)}|dozen|hundred|thousand|million|billion)\b", re.IGNORECASE)
# An identifier token: a code with a hyphen or digits glued to letters (SRVO-063, KR-P-0361, J2,
# UO[6]), a system variable, a dotted or dunder name, a file suffix, a softkey; or a menu path.
_CODE_TOKEN = re.compile(r"^[\w$.\[\]()<>*:/+–-]*(?:[A-Za-z]\w*-[A-Z0-9]|[A-Z]+\[?\d|\d+[A-Z]{2}|\$|__|[A-Za-z_]\.[A-Za-z_]|\w_\w)"
                         r"|^\.[a-z]+$")
_CODE = re.compile(r"^F\d+ \[|\bMENU >")


_NOT_NAMES = {"a", "an", "the", "it", "its", "this", "that", "these", "those", "there", "they", "he", "she", "we", "you",
              "if", "when", "by", "to", "in", "on", "at", "for", "from", "with", "as", "only", "because", "not", "no",
              "all", "any", "each", "every", "some", "one", "use", "using", "yes"}


def value_type(value: str) -> str:
    """date, code, number, name or other: the type a substitute value must share."""
    text = value.strip().strip("\"'`*‘’“”").strip()
    if not text:
        return "other"
    if _CODE.search(text) or (len(text.split()) <= 3 and any(_CODE_TOKEN.search(t) for t in text.split())):
        return "code"
    if text.lower().rstrip(".") in ("yes", "no"):
        return "other"
    if _DATE.search(text):
        return "date"
    if re.search(r"\d", text) or _NUMBER_WORD.search(text):
        return "number"
    first = text.split()[0]
    if first[0].isupper() and first.lower() not in _NOT_NAMES:
        return "name"
    return "other"


def value_shape(value: str) -> str:
    """Digits folded to '#', case folded: '3.2 V' -> '#.# v'. Equal shapes are the closest substitutes."""
    return re.sub(r"\d+", "#", value.strip().lower())


def value_unit(value: str) -> str:
    """What is left after the figures: the unit of a measurement ('3.2 V' -> 'v')."""
    return re.sub(r"[\d.,\s±≤≥<>+−-]+", " ", value.strip().lower()).strip()


_DIMENSIONS = {
    "time": ("ms", "µs", "s", "sec", "second", "seconds", "min", "minute", "minutes", "h", "hour", "hours", "day", "days",
             "week", "weeks", "month", "months", "year", "years"),
    "length": ("mm", "cm", "m", "km", "in", "ft", "mile", "miles"), "speed": ("mm/s", "m/s", "km/h", "mph"),
    "mass": ("g", "kg", "t", "lb", "tons"), "torque": ("n·m", "nm"), "angle": ("°",), "temperature": ("°c", "°f"),
    "electric": ("v", "a", "ω", "mω", "ah", "w", "kw", "v dc"), "memory": ("kb", "mb", "gb", "bytes"),
    "share": ("%", "percent"),
}
_DIMENSION_OF = {unit: name for name, units in _DIMENSIONS.items() for unit in units}


def value_dimension(value: str) -> str:
    """What a measurement measures ('10 seconds' and '64 ms' are both 'time'); else its unit."""
    unit = value_unit(value)
    return _DIMENSION_OF.get(unit, _DIMENSION_OF.get(unit.split()[-1] if unit else "", unit))


def value_form(value: str) -> str:
    """Letters, digits and punctuation folded to classes: 'KR-P-0361' -> 'a-a-#', 'F4 [CHAIN RST]' -> 'a# [a a]'."""
    return re.sub(r"#+", "#", re.sub(r"[A-Za-z]+", "a", re.sub(r"\d", "#", value.strip())))


def question_class(question: str) -> str:
    """The kind of answer a question asks for, by its wh-word: who, when, where, how-many, ..."""
    q = question.strip().lower()
    measure = r"\bhow (?:long|often|big|large|far|old|fast|tall|high|low|tight|wide)\b"
    for pattern, name in ((r"\bhow (?:many|much)\b", "how-many"), (measure, "how-measure"),
                          (r"\bwhat (?:year|century|decade|date|month|day|time)\b|\bwhen\b", "when"),
                          (r"\bwho(?:m|se)?\b", "who"), (r"\bwhere\b", "where"), (r"\bwhy\b", "why"), (r"\bhow\b", "how"),
                          (r"\bwhich\b", "which"), (r"\bwhat\b", "what")):
        if re.search(pattern, q):
            return name
    return "yes-no"


# --- questions ------------------------------------------------------------------------------

_AUX = r"is|are|was|were|did|does|do|has|have|had|can|could|will|would|should|may|might|must"
_AUX_RE = re.compile(rf"^(?:{_AUX})$", re.IGNORECASE)
_PREP = r"in|on|at|from|to|by|for|with|during|since|after|before|of|under|into|through|against|about|within"
_PARTICIPLES = {"born", "built", "made", "held", "known", "found", "set", "put", "given", "taken", "seen", "won", "lost",
                "led", "sent", "spent", "begun", "done", "sold", "paid", "kept", "left", "bought", "brought", "taught",
                "fought", "told", "shown", "written", "run", "drawn", "chosen", "grown", "thrown", "worn", "split", "cut"}
_TIME_NOUNS = {"year", "century", "decade", "month", "period", "time", "era", "date", "day", "age", "season"}


def _participle(word: str) -> bool:
    w = word.lower()
    return w in _PARTICIPLES or (len(w) > 3 and w.endswith(("ed", "en")))


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!")) else ".")


_ADVERBS = {"also", "often", "usually", "commonly", "first", "best", "most", "still", "originally", "primarily", "mainly",
            "generally", "typically", "currently", "widely", "traditionally", "formally", "officially", "later"}
_TRAILING = {"as", "to", "for", "by", "of", "in", "on", "with", "from", "after", "at", "into"}


def _passive(rest: list[str], aux: str) -> tuple[str, bool] | None:
    """ "the treaty signed" + "was" -> "the treaty was signed"; "X also known as" -> "X is also known as".
    Returns (clause, ends in a preposition) when `rest` ends in a participle (and a preposition)."""
    if len(rest) > 1 and _participle(rest[-1]):
        at, trailing = len(rest) - 1, False
    elif len(rest) > 2 and rest[-1].lower() in _TRAILING and _participle(rest[-2]):
        at, trailing = len(rest) - 2, True
    else:
        return None
    if at > 1 and (rest[at - 1].lower() in _ADVERBS or rest[at - 1].lower().endswith("ly")):
        at -= 1
    return " ".join([*rest[:at], aux, *rest[at:]]), trailing


def restate(question: str, answer: str) -> str:
    """The question turned into a statement carrying `answer`: the wh-phrase replaced by the
    answer where a simple pattern fits ("In what country is Normandy located?" -> "Normandy
    is located in France."), else "<question without ?>: <answer>." The same template for
    any answer to the same question, so right and wrong restatements differ only in the value."""
    choice = _OPTIONS.search(question.strip())
    if choice is not None:  # "Which X, A or B?" is restated as "Which X?"
        question = question.strip()[:choice.start()] + "?"
    q = " ".join(question.strip().rstrip("?").split())
    words = q.split()
    low = [w.lower() for w in words]
    if len(words) < 3 or not answer.strip():
        return _sentence(f"{q}: {answer}")
    # "Who/What is the leader of X" -> "A is the leader of X"; "What is X called" -> "X is called A"
    if low[0] in ("who", "what") and low[1] in ("is", "are", "was", "were"):
        passive = _passive(words[2:], words[1])
        if passive is not None and (passive[1] or low[-1] in ("called", "named", "known", "termed", "nicknamed")):
            return _sentence(f"{passive[0]} {answer}")
        return _sentence(f"{answer} {' '.join(words[1:])}")
    # "Who ruled the duchy" -> "A ruled the duchy"
    if low[0] == "who" and not _AUX_RE.match(low[1]):
        return _sentence(f"{answer} {' '.join(words[1:])}")
    # "[In] what/which <noun phrase> <aux> <rest ending in a participle>" -> "<rest> <aux> <participle> [in] A"
    lead = 1 if re.match(rf"^(?:{_PREP})$", low[0]) else 0
    if len(words) > lead + 2 and low[lead] in ("what", "which", "when", "where"):
        aux_at = next((i for i in range(lead + 1, min(len(words), lead + 5)) if _AUX_RE.match(low[i])), None)
        if aux_at is not None and aux_at + 1 < len(words):
            noun = low[aux_at - 1] if aux_at > lead + 1 else ""
            rest, aux = words[aux_at + 1:], words[aux_at]
            prep = low[0] if lead else ("in" if low[lead] in ("when", "where") or noun in _TIME_NOUNS else "")
            passive = _passive(rest, aux) if low[aux_at] not in ("did", "does", "do") else None
            if passive is not None:
                return _sentence(f"{passive[0]} {'' if passive[1] else prep} {answer}".replace("  ", " "))
            if low[aux_at] in ("is", "are", "was", "were") and lead == 0 and low[0] in ("what", "which") and noun:
                return _sentence(f"{' '.join(rest)} {aux} {answer}")
            if lead:
                return _sentence(f"{words[0]} {answer}, {' '.join(words[aux_at:])}")
        # "Which team won X" -> "A won X"
        if low[lead] in ("what", "which") and not lead and len(words) > 3 and not _AUX_RE.match(low[2]) \
                and (low[2].endswith(("ed", "s")) or low[2] in _PARTICIPLES):
            return _sentence(f"{answer} {' '.join(words[2:])}")
    # "How many <noun> <aux> <rest>" -> "A <noun> <aux> <rest>" when the wh-phrase is the subject
    if low[0] == "how" and low[1] in ("many", "much"):
        aux_at = next((i for i in range(2, min(len(words), 6)) if _AUX_RE.match(low[i])), None)
        if aux_at is not None and aux_at > 2 and aux_at + 1 < len(words) and low[aux_at] not in ("did", "does", "do") \
                and (low[aux_at + 1] in ("be", "been", "being", "there", "not", "also", "still") or _participle(low[aux_at + 1])):
            return _sentence(f"{answer} {' '.join(words[2:])}")
    return _sentence(f"{q}: {answer}")


_OPTIONS = re.compile(r",\s*(.+?)\s+or\s+(.+?)\?$")


def question_options(question: str) -> tuple[str, str] | None:
    """The two options of a "Which ..., A or B?" question, or None."""
    match = _OPTIONS.search(question.strip())
    return (match.group(1), match.group(2)) if match else None


def with_options(question: str, first: str, second: str) -> str:
    """The question asked as a choice: "..., <first> or <second>?"."""
    return f"{question.strip().rstrip('?').rstrip()}, {first} or {second}?"


# --- a changed number ------------------------------------------------------------------------

NUMBER = re.compile(r"(?<![\w$.\[\]/:-])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(st|nd|rd|th)?(?!\d|\.\d|,\d{3}|-\w)")
_NUMBER_WORD_ONLY = re.compile(rf"\b(?:{'|'.join(NUMBER_WORDS[1:])})\b", re.IGNORECASE)
_YEAR_UNIT = re.compile(r"^\s?(?:%|°|[a-zµΩ])", re.IGNORECASE)


def _ordinal(n: int) -> str:
    return "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _changed_figure(match: re.Match[str], after: str, rng: random.Random, *, double: bool = False) -> str:
    whole, fraction, suffix = match.group(1), match.group(2) or "", match.group(3) or ""
    commas = "," in whole
    n = int(whole.replace(",", ""))
    year = not commas and not fraction and 1000 <= n <= 2099 and len(whole) == 4 and not _YEAR_UNIT.match(after)
    if year and not double:
        new_int = n + rng.choice([-1, 1]) * rng.randint(1, 15)
        return f"{new_int}{suffix}"
    decimals = len(fraction) - 1 if fraction else 0
    value = n + (float(fraction) if fraction else 0.0)
    if double or rng.random() < 0.5:
        new = value * 2 if value else rng.randint(1, 9)
    else:
        new = value + rng.randint(1, 9) * (10 ** -decimals if decimals else 1)
    if decimals:
        text = f"{new:,.{decimals}f}" if commas else f"{new:.{decimals}f}"
    else:
        new_int = int(round(new))
        text = f"{new_int:,}" if commas or new_int >= 10000 and commas else str(new_int)
        if whole.startswith("0") and len(whole) > 1:
            text = text.zfill(len(whole))
        if suffix:
            suffix = _ordinal(new_int)
    return text + suffix


def change_number(text: str, start: int, end: int, rng: random.Random, *, avoid: str = "") -> tuple[str, str, str] | None:
    """`text` with one figure (or number word) inside [start, end) changed: years by 1-15,
    other figures doubled or raised by 1-9, keeping the format. Returns (new text, old, new)
    or None when the span holds no figure; the new figure is one `avoid` does not contain
    when a few tries find one."""
    figures = [m for m in NUMBER.finditer(text) if start <= m.start() and m.end() <= end]
    words = [m for m in _NUMBER_WORD_ONLY.finditer(text) if start <= m.start() and m.end() <= end]
    if not figures and not words:
        return None
    target = rng.choice(figures) if figures else rng.choice(words)
    old = target.group(0)
    new = old
    for _ in range(12):
        if figures:
            new = _changed_figure(target, text[target.end():target.end() + 3], rng)
        else:
            choices = [w for w in NUMBER_WORDS[2:] if w != old.lower()]
            new = rng.choice(choices)
            new = new.capitalize() if old[0].isupper() else new
        if new != old and not contains(avoid, new):
            break
    if new == old:
        return None
    return text[:target.start()] + new + text[target.end():], old, new


def double_figure(text: str, outside: tuple[int, int], rng: random.Random) -> tuple[str, str, str] | None:
    """`text` with a figure outside the span `outside` doubled (the figure nearest the span)."""
    s, e = outside
    figures = [m for m in NUMBER.finditer(text) if m.end() <= s or m.start() >= e]
    if not figures:
        return None
    target = min(figures, key=lambda m: s - m.end() if m.end() <= s else m.start() - e)
    new = _changed_figure(target, text[target.end():target.end() + 3], rng, double=True)
    return text[:target.start()] + new + text[target.end():], target.group(0), new


# --- a reversed direction ---------------------------------------------------------------------

_PAIRS = [("increase", "decrease"), ("increases", "decreases"), ("increased", "decreased"), ("increasing", "decreasing"),
          ("higher", "lower"), ("raise", "lower"), ("raises", "lowers"), ("raised", "lowered"), ("raising", "lowering"),
          ("more", "less"), ("most", "least"), ("fewer", "more"), ("highest", "lowest"),
          ("high", "low"), ("before", "after"), ("above", "below"), ("larger", "smaller"), ("largest", "smallest"),
          ("bigger", "smaller"), ("greater", "smaller"), ("enable", "disable"), ("enables", "disables"),
          ("enabled", "disabled"), ("minimum", "maximum"), ("min", "max"), ("first", "last"), ("earlier", "later"),
          ("earliest", "latest"), ("longer", "shorter"), ("longest", "shortest"), ("faster", "slower"),
          ("inside", "outside"), ("upper", "lower"), ("always", "never"), ("can", "cannot"), ("positive", "negative"),
          ("rise", "fall"), ("rises", "falls"), ("rose", "fell"), ("win", "lose"), ("wins", "loses"), ("won", "lost"),
          ("include", "exclude"), ("includes", "excludes"), ("included", "excluded"), ("heavier", "lighter"),
          ("older", "younger"), ("oldest", "youngest"), ("major", "minor"), ("majority", "minority"),
          ("north", "south"), ("east", "west"), ("northern", "southern"), ("eastern", "western"),
          ("reduce", "increase"), ("reduces", "increases"), ("reduced", "increased"), ("allow", "prevent"),
          ("allows", "prevents"), ("allowed", "prevented"), ("TRUE", "FALSE"), ("ON", "OFF")]
REVERSALS: dict[str, str] = {}
for _a, _b in _PAIRS:
    REVERSALS.setdefault(_a, _b)
    REVERSALS.setdefault(_b, _a)
# Not inside an identifier or a quoted name ("lower()", "max_size", '"min"').
_REVERSIBLE = re.compile(r"(?<![\w$.\"'-])(" + "|".join(sorted(map(re.escape, REVERSALS), key=len, reverse=True))
                         + r")(?![\w\"'(-])", re.IGNORECASE)


def reverse_direction(text: str, span: tuple[int, int]) -> tuple[str, str, str] | None:
    """`text` with the direction word nearest the span swapped for its opposite (raise/lower,
    more/less, before/after, TRUE/FALSE ...), case kept. Capitalized words inside a sentence
    are left alone (Lower Saxony, East Germany), ON/OFF/TRUE/FALSE only in capitals, and
    "raised" where the sentence is about exceptions."""
    s, e = span
    about_errors = re.search(r"exception|error|warning", text, re.IGNORECASE) is not None
    found = []
    for m in _REVERSIBLE.finditer(text):
        word = m.group(1)
        key = word if word in ("TRUE", "FALSE", "ON", "OFF") else word.lower()
        if key not in REVERSALS or (about_errors and key.startswith("rais")):  # an exception is raised, not lowered
            continue
        if word[0].isupper() and not word.isupper() and m.start() > 0:
            continue
        distance = 0 if s <= m.start() < e else (s - m.end() if m.end() <= s else m.start() - e)
        found.append((distance, m, key))
    if not found:
        return None
    _, m, key = min(found, key=lambda f: (f[0], f[1].start()))
    word, new = m.group(1), REVERSALS[key]
    if word.isupper() and len(word) > 1:
        new = new.upper()
    elif word[0].isupper():
        new = new[:1].upper() + new[1:]
    return text[:m.start()] + new + text[m.end():], word, new
