"""The questions the judge's development set is built from: one answer span per question, located
in its gold document, from SQuAD 2.0 half-dev, python-reference, numpy-api and the demo handbook;
and the values a document holds that a fabricated or same-passage answer can be made of.

Our sets' spans were written to mark where the answer is, for retrieval, and many of numpy-api's
restate its search phrase in the docstring's words ("number of occurrences of each value" for
"count how many times each non-negative integer occurs"): no answer to it. The right answers are
therefore the audited answers of bench/data/gold-audit.jsonl (each question read against its
document, blind to any score: a span kept, replaced by the document's words that answer, or the
question left out), unless `golds="evidence"` asks for the spans as written.

The wrong answers drawn from a question's own passage (bench/judge_set.py's same-passage names and
other options) were audited the same way, blind to scores: bench/data/distractor-audit.jsonl says
for each drawn one whether a reviewer reading the passage would accept it as an answer
(`also_right`); the set leaves those out unless asked for the draws as they are.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from bench._common import EVAL_SETS, SQUAD_DIR, read_jsonl
from bench._judge_text import find_spans, question_class, value_shape, value_type, value_unit

ROOT = Path(__file__).resolve().parent.parent
HANDBOOK_QA = ROOT / "bench" / "data" / "handbook-qa.jsonl"
HANDBOOK_DOCS = ROOT / "services" / "demo_data" / "corpus"
AUDIT = ROOT / "bench" / "data" / "gold-audit.jsonl"
GOLDS = ("audited", "evidence")  # the right answers: the audited ones, or the spans as the sets write them
DISTRACTOR_AUDIT = ROOT / "bench" / "data" / "distractor-audit.jsonl"
DISTRACTORS = ("audited", "drawn")  # the same-passage wrong answers: those the audit found wrong, or every draw
CORPORA = ("squad", "python-reference", "numpy-api", "handbook")
PASSAGE_CHARS = 1500  # a longer document is cut to the blocks around the span


@dataclass(frozen=True)
class Question:
    """One answerable question: its answer span at [start, end) of its gold document's text."""

    corpus: str
    qid: str
    question: str
    answer: str
    doc: str
    start: int
    end: int
    alternatives: tuple[str, ...] = ()  # other accepted answers (SQuAD lists several)


@dataclass(frozen=True)
class Value:
    """A value a document holds: another question's answer or a name, figure or code in its text."""

    text: str
    doc: str
    type: str
    shape: str
    unit: str
    qclass: str | None  # the asking question's class, for answers


@dataclass(frozen=True)
class Corpus:
    name: str
    docs: dict[str, str]
    titles: dict[str, str]
    questions: tuple[Question, ...]
    values: tuple[Value, ...]


def load(name: str, golds: str = "audited") -> Corpus:
    """The corpus `name` (one of CORPORA) with its answerable, located questions and its values;
    `golds` (one of GOLDS) says which spans are its right answers."""
    if name not in CORPORA:
        raise SystemExit(f"unknown corpus {name!r}; choose from {', '.join(CORPORA)}")
    if golds not in GOLDS:
        raise SystemExit(f"unknown golds {golds!r}; choose from {', '.join(GOLDS)}")
    return _load(name, golds)


@functools.cache
def _load(name: str, golds: str) -> Corpus:
    if name == "squad":
        docs, titles, raw = _squad()
    elif name == "handbook":
        docs, titles, raw = _handbook()
    else:
        docs, titles, raw = _own_set(name)
    if golds == "audited":
        raw = _audited(name, raw)
    questions = []
    for qid, question, answers, doc in raw:
        for answer in answers:
            occurrences = find_spans(docs[doc], answer)
            if occurrences:
                start, end = _best_occurrence(docs[doc], occurrences, question)
                questions.append(Question(name, qid, question, answer, doc, start, end,
                                          tuple(a for a in answers if a != answer)))
                break
    values = [Value(q.answer, q.doc, value_type(q.answer), value_shape(q.answer), value_unit(q.answer),
                    question_class(q.question)) for q in questions]
    for doc, text in docs.items():
        values += [Value(v, doc, value_type(v), value_shape(v), value_unit(v), None) for v in extract_values(text)]
    return Corpus(name, docs, titles, tuple(questions), tuple(values))


def _squad() -> tuple[dict[str, str], dict[str, str], list[tuple[str, str, list[str], str]]]:
    corpus = SQUAD_DIR / "corpus.jsonl"
    if not corpus.exists():
        raise SystemExit(f"benchmark data not found: {corpus} (set BENCH_SQUAD_DIR for SQuAD)")
    paragraphs = read_jsonl(corpus)
    docs = {p["_id"]: p["text"] for p in paragraphs}
    raw = [(q["_id"], q["text"], list(q["metadata"]["answers"]), q["metadata"]["gold_doc"])
           for q in read_jsonl(SQUAD_DIR / "queries.jsonl")
           if not q["metadata"]["is_impossible"] and q["metadata"].get("gold_doc") in docs]
    return docs, {p["_id"]: p.get("title", "") for p in paragraphs}, raw


def _own_set(name: str) -> tuple[dict[str, str], dict[str, str], list[tuple[str, str, list[str], str]]]:
    eval_set = EVAL_SETS[name]
    documents = read_jsonl(eval_set.corpus)
    docs = {d["_id"]: d["text"] for d in documents}
    with eval_set.qrels.open(encoding="utf-8") as handle:
        rows = list(csv.reader(handle, delimiter="\t"))[1:]
    relevant: dict[str, list[str]] = {}
    for qid, doc, *_ in rows:
        relevant.setdefault(qid, []).append(doc)
    raw = []
    for q in read_jsonl(eval_set.queries):
        answer = q["metadata"].get("answer")
        if not q["metadata"].get("answerable") or not answer:
            continue
        holding = [d for d in relevant.get(q["_id"], []) if d in docs and find_spans(docs[d], answer)]
        if holding:  # the passage is the judged document that holds the span; none does: skipped
            raw.append((q["_id"], q["text"], [answer], holding[0]))
    return docs, {d["_id"]: d.get("title", "") for d in documents}, raw


def _handbook() -> tuple[dict[str, str], dict[str, str], list[tuple[str, str, list[str], str]]]:
    docs = {path.name: path.read_text(encoding="utf-8") for path in sorted(HANDBOOK_DOCS.glob("*.md"))}
    titles = {name: text.splitlines()[0].lstrip("# ").strip() for name, text in docs.items()}
    raw = [(r["_id"], r["question"], [r["answer"]], r["document"]) for r in read_jsonl(HANDBOOK_QA)]
    return docs, titles, raw


def _audited(name: str, raw: list[tuple[str, str, list[str], str]]) -> list[tuple[str, str, list[str], str]]:
    """`raw` with the audit's entries for corpus `name` applied: a "replace" takes its `answer` in
    document `doc`, a "drop" (no span of the document answers) leaves the question out."""
    entries = {e["_id"]: e for e in read_jsonl(AUDIT) if e["corpus"] == name}
    out = []
    for qid, question, answers, doc in raw:
        entry = entries.get(qid)
        if entry is None:
            out.append((qid, question, answers, doc))
        elif entry["verdict"] == "replace":
            out.append((qid, question, [entry["answer"]], entry["doc"]))
    return out


@functools.cache
def also_right(name: str) -> frozenset[tuple[str, str]]:
    """(question id, drawn distractor) pairs of corpus `name` that the distractor audit found to answer
    their question after all (a "which A or B" whose other option the passage also supports, a
    docstring's second phrase for what the question asks): not wrong answers."""
    return frozenset((e["_id"], e["candidate"]) for e in read_jsonl(DISTRACTOR_AUDIT)
                     if e["corpus"] == name and e["verdict"] == "right")


def _best_occurrence(text: str, occurrences: list[tuple[int, int]], question: str) -> tuple[int, int]:
    """The occurrence whose surroundings share the most words with the question (first on ties)."""
    if len(occurrences) == 1:
        return occurrences[0]
    from services.retrieval.text import tokenize

    asked = set(tokenize(question))
    return max(occurrences, key=lambda o: (len(asked & set(tokenize(text[max(0, o[0] - 150):o[1] + 150]))), -o[0]))


# --- passages ----------------------------------------------------------------------------------

def _units(text: str) -> list[tuple[int, int]]:
    """Blocks (blank-line separated) as (start, end); a block longer than a passage, line by line."""
    units = []
    for block in re.finditer(r"\S(?:.|\n(?!\s*\n))*", text):
        if block.end() - block.start() <= PASSAGE_CHARS:
            units.append((block.start(), block.end()))
        else:
            units += [(block.start() + m.start(), block.start() + m.end()) for m in re.finditer(r"[^\n]+", block.group())]
    return units


def passage(text: str, start: int, end: int) -> tuple[str, int, int]:
    """The text around [start, end): the whole text when short, else the blocks around the span
    up to PASSAGE_CHARS (a Markdown document keeps its title line). Returns (passage, start, end)
    with the span's offsets inside the passage."""
    if len(text) <= PASSAGE_CHARS:
        return text, start, end
    units = _units(text)
    first = next(i for i, (_, e) in enumerate(units) if e > start)
    last = next((i for i, (_, e) in enumerate(units) if e >= end), len(units) - 1)
    lo, hi = first, last
    while True:
        grown = False
        for candidate in (hi + 1, lo - 1):
            if 0 <= candidate < len(units):
                new_lo, new_hi = min(lo, candidate), max(hi, candidate)
                if units[new_hi][1] - units[new_lo][0] <= PASSAGE_CHARS:
                    lo, hi, grown = new_lo, new_hi, True
        if not grown:
            break
    begin, finish = units[lo][0], units[hi][1]
    body = text[begin:finish]
    if text.startswith("# ") and begin > 0:
        title = text.splitlines()[0]
        return f"{title}\n\n{body}", start - begin + len(title) + 2, end - begin + len(title) + 2
    return body, start - begin, end - begin


# --- values a text holds ---------------------------------------------------------------------

_UNIT = (r"%|°C|°|mm/s|mm|ms|µs|kg·m²|kg|MPa|Hz|px|KB|MB|GB|ml|Ah|MΩ|Ω|N·m|V DC|V|A|W|h|s|m|km|cm|miles|"
         r"years|months|weeks|days|hours|minutes|seconds|percent|million|billion|people|levels|bytes|cycles|times")
_QUANTITY = re.compile(rf"(?<![\w$.\[\]/:-])[+−]?(?:\d{{1,3}}(?:,\d{{3}})+|\d+)(?:\.\d+)?(?:st|nd|rd|th)?(?!\d|\.\d|,\d{{3}}|-\w)"
                       rf"(?:\s?(?:{_UNIT})(?!\w))?")
_PATTERNS = (
    re.compile(r"\*\*([^*\n]{1,40})\*\*"),  # Markdown bold: the handbook's salient values
    re.compile(r"``?([^`\n]{1,40})``?"),  # code spans
    re.compile(r"(?<![\w$])((?:[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+)|\$[A-Z_]+(?:\[\w*\])?(?:\.\$[A-Z_]+(?:\[\w*\])?)*"
               r"|F\d \[[A-Z .*]+\]|__\w+__)"),
    re.compile(r"(?<![\w.])((?:January|February|March|April|May|June|July|August|September|October|November|December)"
               r"(?: \d{1,2},)? \d{4}|\d+(?:st|nd|rd|th) centur(?:y|ies))"),
    re.compile(r"(?<=[a-z,;:(] )([A-Z][a-z]+(?: (?:of |the |de |von |van |and )?[A-Z][a-z]+)*)"),  # names, not sentence starts
)


def extract_values(text: str) -> list[str]:
    """Distinct figures with their units, dates, codes, names and bold or code spans of `text`."""
    found = [m.group(0).strip() for m in _QUANTITY.finditer(text)]
    for pattern in _PATTERNS:
        found += [m.group(1).strip() for m in pattern.finditer(text)]
    return list(dict.fromkeys(v for v in found if 0 < len(v) <= 40 and not v.endswith(":")))
