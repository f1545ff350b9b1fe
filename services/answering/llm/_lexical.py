"""Word-level helpers of the offline backend: chunk sentences, query terms, coverage, PRF, decomposition."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from services.answering.llm._morphology import related_in
from services.answering.llm._opposites import substituted, swapped_value, turned_around
from services.answering.llm._words import QUESTION_WORDS as _QUESTION_WORDS
from services.answering.llm._words import WORD as _WORD
from services.corpus.chunking import split_sentences
from services.retrieval.entities import extract_entities, mentions
from services.retrieval.text import STOPWORDS, tokenize

_LEADING_MARKER = re.compile(r"^\s*(?:#{1,6}|[-*+]|\d{1,3}[.)])\s+")
_HEADING = re.compile(r"^\s*#{1,6}\s")
_TABLE_SEPARATOR = re.compile(r"\|(?:\s*:?-{3,}:?\s*\|)+")
_AUXILIARIES = frozenset("is are was were do does did can could should would will has have had must may might".split())
# Words a question is phrased with rather than about: an answer need not repeat them. The
# second group names the kind of answer wanted ("What type of", "In what year", "the name
# of", "an example of", "What is X called"): the answer gives the thing, not the word.
_FILLER = frozenset(
    """often much many long mean means meaning take takes get gets getting need needs know tell
    explain describe happen happens use used using way also else exactly possible please make makes
    come comes keep keeps kept more most before after between because must done up any some all
    each other only just
    type types kind kinds sort sorts year years date century decade name names term terms called
    example examples percentage percent number amount whose along commonly typically""".split()
)
_VERBS = _AUXILIARIES | frozenset(
    """be been mean means cause causes happen happens need take takes work works raise raised go
    add adjust apply assign avoid back calibrate change check clean clear configure connect copy
    create define delete disable enable export find fix import increase decrease inspect install
    jog load map master measure monitor mount move prevent read recover remove repair replace reset
    restore run save select set start stop switch teach test tune turn update use verify write""".split()
)
# A negated question asks about the complement of what a positive statement says: "What is
# not composed of X" is not answered by "It is composed of X". Negation words are stopwords
# to retrieval, so the query's negation becomes a term of its own that only a negated text
# covers. The stems of negated auxiliaries ("didn" of "didn't") are phrasing, not terms.
_NEGATION = re.compile(r"\b(?:not|no|never|nor|neither|none|nothing|without|cannot|unable)\b|n[’']t\b",
                       re.IGNORECASE)
# "whether or not", "may or may not": a question naming both ways is not negated.
_BOTH_WAYS = re.compile(r"\bor\s+(?:\w+\s+)?not\b", re.IGNORECASE)
_NEGATED_AUXILIARIES = frozenset("isn aren wasn weren don doesn didn hasn haven hadn couldn shouldn wouldn mustn".split())
_MIN_ANSWER_TOKENS = 3
# A question (FAQ headings), a code fence, or a piece of a table cut loose from its rows.
_NOT_A_STATEMENT = re.compile(r"\?\W*$|```|\|[^|]*\|")


@dataclass(frozen=True)
class Segment:
    """One sentence (or table row) of a chunk, in the three forms the backend needs."""

    quote: str  # exactly as it appears in the chunk text
    display: str  # as it reads inside an answer
    scoring: str  # markup-free text that is embedded and matched
    answerable: bool  # a statement worth extracting (not a heading, fragment or separator)
    heading: bool


@dataclass(frozen=True)
class Term:
    """A query word or entity an answer is expected to mention."""

    surface: str  # as written in the query
    stems: tuple[str, ...]
    entity: bool
    negation: bool = False  # the query's negation: covered by any negated text


def clean(text: str) -> str:
    """Text without Markdown markup: what is embedded and matched."""
    text = _LEADING_MARKER.sub("", text)
    text = text.replace("**", "").replace("__", "").replace("`", "").replace("|", " ")
    return " ".join(text.split())


def facts(text: str) -> frozenset[str]:
    """Numbers and codes (words with a digit, upper-case words): what makes two similar
    sentences, like two rows of one table, say different things."""
    return frozenset(w for w in _WORD.findall(text) if any(c.isdigit() for c in w) or (w.isupper() and len(w) > 1))


def stems(text: str) -> frozenset[str]:
    return frozenset(tokenize(text))


@lru_cache(maxsize=4096)
def segment_chunk(text: str) -> tuple[Segment, ...]:
    """The sentences and table rows of a chunk, in order, each locatable in `text`."""
    segments: list[Segment] = []
    offset = 0
    for is_table, run in _runs(text):
        start = text.index(run, offset)
        found = _table_rows(run) if is_table else _prose(run)
        for quote, display in found:
            scoring = clean(display)
            tokens = tokenize(scoring)
            letters = sum(ch.isalnum() for ch in scoring)
            heading = bool(_HEADING.match(quote))
            answerable = (not heading and len(tokens) >= _MIN_ANSWER_TOKENS
                          and letters >= 0.5 * len(scoring.replace(" ", "")) and not _NOT_A_STATEMENT.search(
                              display if is_table else quote))
            segments.append(Segment(quote, display, scoring, answerable, heading))
        offset = start + len(run)
    return tuple(segments)


def _runs(text: str) -> list[tuple[bool, str]]:
    """Consecutive table lines and consecutive other lines, as contiguous slices of `text`."""
    runs: list[tuple[bool, list[str]]] = []
    for line in text.splitlines(keepends=True):
        is_table = line.lstrip().startswith("|")
        if runs and runs[-1][0] == is_table:
            runs[-1][1].append(line)
        else:
            runs.append((is_table, [line]))
    return [(is_table, "".join(lines)) for is_table, lines in runs if "".join(lines).strip()]


def _prose(run: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    cursor, pending = 0, ""
    for sentence in (s for block in _blocks(run) for s in split_sentences(block)):
        # pysbd ends a sentence at the "." inside `$INTP_CFG.$MAX_CALL_DEPTH`: rejoin code spans.
        pending = f"{pending} {sentence}" if pending else sentence
        if pending.count("`") % 2:
            continue
        span = _locate(pending, run, cursor)
        if span is not None:  # pysbd changed the text: a sentence we cannot quote is not used
            quote = run[span[0]:span[1]]
            found.append((quote, _LEADING_MARKER.sub("", " ".join(quote.split()))))
            cursor = span[1]
        pending = ""
    return found


def _blocks(run: str) -> list[str]:
    """Lines, rejoined only where a hard wrap continues a sentence: chunking joins the blocks
    of a chunk with a newline, so a line break there ends a list item or paragraph."""
    blocks: list[str] = []
    for line in run.splitlines():
        if blocks and line[:1].islower() and not re.search(r"[.!?:]\W*$", blocks[-1]):
            blocks[-1] += " " + line
        else:
            blocks.append(line)
    return blocks


def _locate(sentence: str, text: str, start: int) -> tuple[int, int] | None:
    index = text.find(sentence, start)
    if index >= 0:
        return index, index + len(sentence)
    # split_sentences normalizes whitespace and we rejoin its pieces with a space: the
    # chunk may hard-wrap inside a sentence, or have no space where pysbd cut.
    match = re.compile(r"\s*".join(map(re.escape, sentence.split()))).search(text, start)
    return match.span() if match else None


def _table_rows(run: str) -> list[tuple[str, str]]:
    """Rows of a Markdown table (one row per line, or rows joined on one line by chunking).

    A row reads "Header: value; Header: value" in an answer, so it stays meaningful alone.
    """
    separator = _TABLE_SEPARATOR.search(run)
    columns = separator.group(0).count("|") - 1 if separator else 0
    pattern = re.compile(rf"\|(?:[^|\n]*\|){{{columns}}}" if columns else r"\|[^\n]*\|")
    header: list[str] = []
    rows: list[tuple[str, str]] = []
    for match in pattern.finditer(run):
        cells = [c.strip() for c in match.group(0).strip().strip("|").split("|")]
        if all(re.fullmatch(r":?-{3,}:?", c) for c in cells):
            continue
        if separator and match.end() <= separator.start():
            header = cells
            continue
        pairs = [f"{h}: {v}" if h else v for h, v in zip(header or [""] * len(cells), cells, strict=False) if v]
        rows.append((match.group(0), "; ".join(pairs)))
    return rows


# --- query terms and coverage -------------------------------------------------------------

def query_terms(query: str) -> tuple[Term, ...]:
    """Entities, then remaining content words, of a query; question phrasing left out."""
    terms: list[Term] = []
    entity_stems: set[str] = set()
    for entity in extract_entities(query):
        words = entity.split()
        while words and (words[0] in _QUESTION_WORDS or words[0] in STOPWORDS):
            words = words[1:]  # "What TCP" is a mention of TCP
        entity_tokens = tuple(tokenize(" ".join(words)))
        if not entity_tokens or entity_stems.issuperset(entity_tokens):
            continue
        terms.append(Term(_surface(" ".join(words), query), entity_tokens, True))
        entity_stems.update(entity_tokens)
    seen = set(entity_stems)
    for word in _WORD.findall(query):
        lowered = word.lower()
        if (lowered in STOPWORDS or lowered in _FILLER or lowered in _NEGATED_AUXILIARIES or len(lowered) < 2
                or (len(lowered) < 3 and word.islower())):
            continue  # "re" of re-validated; "J2", "T1", "IP" stay
        stem = tokenize(lowered)
        if stem and stem[0] not in seen:
            seen.add(stem[0])
            terms.append(Term(word, (stem[0],), False))
    if _NEGATION.search(_BOTH_WAYS.sub(" ", query)):
        terms.append(Term("not", (), False, negation=True))
    return tuple(terms)


def _surface(entity: str, text: str) -> str:
    match = re.search(r"\s+".join(map(re.escape, entity.split())), text, re.IGNORECASE)
    return match.group(0) if match else entity


def covers(term: Term, text: str, text_stems: frozenset[str]) -> bool:
    if term.negation:
        return bool(_NEGATION.search(text))
    if term.entity and mentions(text, term.surface):
        return True
    return all(s in text_stems or related_in(s, text_stems) for s in term.stems)


def coverage(terms: Sequence[Term], text: str) -> float:
    """Share of the query's terms the text mentions (1.0 when the query has none)."""
    if not terms:
        return 1.0
    text_stems = stems(text)
    return sum(covers(t, text, text_stems) for t in terms) / len(terms)


def missing(terms: Sequence[Term], texts: Iterable[str]) -> list[str]:
    """Surfaces of the terms no text mentions."""
    pool = list(texts)
    pool_stems = [stems(t) for t in pool]
    return [t.surface for t in terms if not any(covers(t, x, s) for x, s in zip(pool, pool_stems, strict=True))]


def contradiction(query: str, terms: Sequence[Term], sentences: Sequence[str]) -> str | None:
    """Why the sentence that matches the question best says the opposite of what it asks:
    a negated question read against a positive statement ("What did X not do?" against
    "X did Y."), a question word turned around ("lowest" against "highest"), a year,
    ordinal or number swapped ("in 2014" against "in 2004"), or a word of the question's
    phrase replaced ("killer B cells" against "killer T cells"). None when it does not.

    The sentence that matches the question's other terms best decides (ties go to the
    earlier one): a negation or opposite word anywhere else in the answer does not count."""
    if not sentences:
        return None
    asserted = [t for t in terms if not t.negation]
    best = sentences[max(range(len(sentences)), key=lambda i: (coverage(asserted, sentences[i]), -i))]
    if any(t.negation for t in terms) and not _NEGATION.search(best):
        return "the question is negated but the sentence that matches it best is not: it states the opposite"
    if opposite := turned_around(query, best):
        return (f"the question asks about '{opposite[0]}' but the sentence that matches it best says "
                f"'{opposite[1]}': it states the opposite")
    if swapped := swapped_value(query, best):
        return (f"the question names '{swapped[0]}' but the sentence that matches it best says "
                f"'{swapped[1]}': it is about something else")
    if replaced := substituted(query, best, phrasing=_FILLER | _AUXILIARIES):
        return (f"the sentence that matches the question best has '{replaced[1]}' where the question has "
                f"'{replaced[0]}': it is about something else")
    return None


def containment(part: frozenset[str], whole: frozenset[str]) -> float:
    return len(part & whole) / len(part) if part else 0.0


def quoted_list(items: Sequence[str]) -> str:
    return ", ".join(f"'{i}'" for i in items)


# --- pseudo-relevance feedback ----------------------------------------------------------------

def prf_terms(query: str, texts: Sequence[str], n: int = 5) -> list[str]:
    """Terms weighted by rank-discounted frequency in the texts times an idf over them,
    leaving out what the query already says; surface words as first written."""
    query_stems = stems(query)
    per_text: list[Counter[tuple[str, ...]]] = []
    surfaces: dict[tuple[str, ...], str] = {}
    for text in texts:
        counts: Counter[tuple[str, ...]] = Counter()
        for entity in extract_entities(text):
            key = tuple(tokenize(entity))
            if len(key) > 1 and any(ch.isdigit() for ch in entity) and not query_stems.issuperset(key):
                counts[key] += len(re.findall(re.escape(entity), text, re.IGNORECASE))
                surfaces.setdefault(key, _surface(entity, text))
        for word in _WORD.findall(text):
            lowered = word.lower()
            if lowered in STOPWORDS or lowered in _FILLER or len(lowered) < 3 or not lowered.isalpha():
                continue
            key = tuple(tokenize(lowered))
            if key and key[0] not in query_stems:
                counts[key] += 1
                surfaces.setdefault(key, lowered if not word.isupper() else word)
        per_text.append(counts)
    document_frequency = Counter(key for counts in per_text for key in counts)
    scores: dict[tuple[str, ...], float] = defaultdict(float)
    for rank, counts in enumerate(per_text):
        for key, tf in counts.items():
            scores[key] += tf / (rank + 1) * math.log(1 + len(per_text) / document_frequency[key])
    chosen: list[tuple[str, ...]] = []
    for key, _score in sorted(scores.items(), key=lambda kv: (-kv[1], surfaces[kv[0]])):
        if any(set(key) <= set(c) for c in chosen):
            continue  # "srvo" adds nothing once "SRVO-063" is in
        chosen.append(key)
        if len(chosen) == n:
            break
    return [surfaces[key] for key in chosen]


# --- query refinement ---------------------------------------------------------------------

_QUOTED = re.compile(r"(?<!\w)['\"‘“]([^'\"‘’“”\n]{1,60})['\"’”](?!\w)")
_LABELLED = re.compile(r"^\s*(prf|gaps?|missing)\s*:\s*(.*)$", re.IGNORECASE | re.MULTILINE)
_BULLET = re.compile(r"^\s*[-*•]\s+(.{1,60})$", re.MULTILINE)


def refine(query: str, feedback: str, max_chars: int = 300) -> str:
    """The query plus gap terms (quoted, listed or bulleted in the feedback) and `prf:` terms."""
    query = " ".join(query.split())
    gaps: list[str] = [m.group(1).strip() for m in _QUOTED.finditer(feedback)]
    prf: list[str] = []
    for label, body in _LABELLED.findall(feedback):
        if label.lower() == "prf":
            prf.extend(body.replace(",", " ").split())
        else:
            gaps.extend(p.strip().strip("'\"‘’“”") for p in re.split(r"[,;]", body))
    gaps.extend(m.group(1).strip() for m in _BULLET.finditer(feedback))
    query_stems = stems(query)
    added: list[str] = []
    added_stems: set[str] = set()
    # Gap terms go in even when the query has them: repeating a facet the answer missed
    # weights it up; PRF terms only when they are new.
    candidates = [(g, False) for g in gaps] + [(p, True) for p in prf]
    for term, must_be_new in candidates:
        term_stems = stems(term)
        if not term_stems or term_stems <= added_stems or (must_be_new and term_stems <= query_stems):
            continue
        if len(query) + len(" ".join(added + [term])) + 1 > max_chars:
            continue
        added.append(term)
        added_stems |= term_stems
    return " ".join([query, *added]) if added else query


# --- decomposition -------------------------------------------------------------------------

_STEM = re.compile(r"^((?:how|what|why|when|where|which|who)\s+(?:do|does|can|could|should|would|must|will|did)"
                   r"\s+(?:i|we|you))\s", re.IGNORECASE)
_ENUMERATION = re.compile(r"^((?:what|who|where|which)\s+(?:is|are|was|were))\s+(.+)$", re.IGNORECASE)
_JOINER = re.compile(r"\s*(?:;|,?\s+and\s+also\s+|,?\s+and\s+)\s*")


def decompose(query: str, max_parts: int = 6) -> list[str]:
    """Self-contained sub-questions of a multi-part question; [query] when it has one part.

    Statements around the questions ("My program stops with MOTN-023.") are context: an
    object "it" in a sub-question is replaced by the entity they, or earlier parts, name.
    """
    text = " ".join(query.split())
    if not text:
        return []
    context: list[str] = []
    parts: list[str] = []
    for sentence in re.split(r"(?<=[?.!])\s+(?=[A-Z0-9\"'])", text):
        if not (sentence.endswith("?") or _first_word(sentence) in _QUESTION_WORDS | _AUXILIARIES):
            context.append(sentence)
            continue
        for clause in _split_clauses(sentence.rstrip("?.! ")):
            parts.append(_resolve_it(clause, " ".join(context)))
            context.append(clause)
    if len(parts) < 2:
        return [query]
    return list(dict.fromkeys(p[0].upper() + p[1:] + "?" for p in parts))[:max_parts]


def _first_word(text: str) -> str:
    words = _WORD.findall(text.lower())
    return words[0] if words else ""


def _has_verb(text: str) -> bool:
    return any(w in _VERBS or w in _QUESTION_WORDS for w in _WORD.findall(text.lower()))


def _split_clauses(question: str) -> list[str]:
    for joiner in _JOINER.finditer(question):
        left, right = question[:joiner.start()].strip(), question[joiner.end():].strip()
        if not left or not right or not _has_verb(left) or not _has_verb(right):
            continue
        if _first_word(right) in _QUESTION_WORDS | _AUXILIARIES:
            return [*_enumerate(left), *_split_clauses(right)]
        if (stem := _STEM.match(left)) and _first_word(right) not in _QUESTION_WORDS:
            return [left, *_split_clauses(f"{stem.group(1)} {right}")]
    return _enumerate(question)


def _enumerate(question: str) -> list[str]:
    """"What is X, Y and Z" -> one question per item, when the items are plain noun phrases."""
    match = _ENUMERATION.match(question)
    if not match or re.search(r"\b(between|difference|compare|versus|vs)\b", question, re.IGNORECASE):
        return [question]
    stem, rest = match.groups()
    items = [i.strip() for i in re.split(r",\s*(?:and\s+|or\s+)?|\s+and\s+", rest) if i.strip()]
    plain = all(len(i.split()) <= 6 and not _has_verb(i) for i in items)
    if len(items) < 2 or not plain or ("," not in rest and not all(extract_entities(i) for i in items)):
        return [question]
    singular = re.sub(r"\bare\b", "is", stem)
    return [f"{stem if item.endswith('s') else singular} {item}" for item in items]


def _resolve_it(clause: str, context: str) -> str:
    """Replace an object "it" (clear it, avoid it) by the first entity of the context; a
    subject "it" (does it, can it) is too often something else and is left alone."""
    mentioned = [e for e in extract_entities(context) if e.split()[0] not in _QUESTION_WORDS]
    if not mentioned:
        return clause
    antecedent = _surface(min(mentioned, key=lambda e: context.lower().find(e)), context)

    def replace(match: re.Match[str]) -> str:
        before = match.group(1)
        return match.group(0) if before.lower() in _AUXILIARIES | _QUESTION_WORDS else f"{before} {antecedent}"

    return re.sub(r"\b(\w+)\s+it\b", replace, clause)
