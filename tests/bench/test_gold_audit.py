"""The audit of our sets' answer spans (bench/data/gold-audit.jsonl) is what the judge's
development set takes as right answers: every replacement is its judged document's own words,
each entry names a question the set holds and says why, and the spans as written stay one
argument away. Reads files only (the handbook and our two sets are in the repository)."""

from __future__ import annotations

import csv
import functools

import pytest

from bench import judge_set
from bench._common import EVAL_SETS, read_jsonl
from bench._judge_sources import AUDIT, HANDBOOK_DOCS, HANDBOOK_QA, load
from bench._judge_text import find_spans

ENTRIES = read_jsonl(AUDIT)
OURS = ("handbook", "python-reference", "numpy-api")


@functools.cache
def _judged() -> dict[tuple[str, str], tuple[str, set[str]]]:
    """(corpus, question id) -> (the span as the set writes it, the documents judged for it)."""
    out = {(("handbook", r["_id"])): (r["answer"], {r["document"]}) for r in read_jsonl(HANDBOOK_QA)}
    for name in ("python-reference", "numpy-api"):
        with EVAL_SETS[name].qrels.open(encoding="utf-8") as handle:
            rows = list(csv.reader(handle, delimiter="\t"))[1:]
        for q in read_jsonl(EVAL_SETS[name].queries):
            if q["metadata"].get("answerable"):
                out[(name, q["_id"])] = (q["metadata"]["answer"], {doc for qid, doc, *_ in rows if qid == q["_id"]})
    return out


def _text(corpus: str, doc: str) -> str:
    if corpus == "handbook":
        return (HANDBOOK_DOCS / doc).read_text(encoding="utf-8")
    return _documents(corpus)[doc]


@functools.cache
def _documents(corpus: str) -> dict[str, str]:
    return {d["_id"]: d["text"] for d in read_jsonl(EVAL_SETS[corpus].corpus)}


def test_each_entry_names_a_question_of_our_sets_once_and_says_why() -> None:
    judged = _judged()
    keys = [(e["corpus"], e["_id"]) for e in ENTRIES]
    assert len(keys) == len(set(keys))
    for entry in ENTRIES:
        assert (entry["corpus"], entry["_id"]) in judged, entry
        assert entry["verdict"] in ("replace", "drop"), entry
        assert entry["old"] == judged[(entry["corpus"], entry["_id"])][0], entry
        assert entry["why"].strip(), entry


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["verdict"] == "replace"], ids=lambda e: f"{e['corpus']}/{e['_id']}")
def test_a_replacement_is_a_span_of_a_document_judged_for_its_question(entry: dict) -> None:  # type: ignore[type-arg]
    _, docs = _judged()[(entry["corpus"], entry["_id"])]
    assert entry["doc"] in docs
    assert entry["answer"] != entry["old"]
    assert find_spans(_text(entry["corpus"], entry["doc"]), entry["answer"]), entry


@pytest.mark.parametrize("corpus", OURS)
def test_audited_golds_replace_and_drop_and_the_written_spans_stay_reachable(corpus: str) -> None:
    audited, written = load(corpus), load(corpus, "evidence")
    entries = {e["_id"]: e for e in ENTRIES if e["corpus"] == corpus}
    answers = {q.qid: q.answer for q in audited.questions}
    for qid, entry in entries.items():
        assert answers.get(qid) == (entry["answer"] if entry["verdict"] == "replace" else None)
    assert {q.qid: q.answer for q in written.questions if q.qid not in entries} == \
        {qid: a for qid, a in answers.items() if qid not in entries}
    assert {q.answer for q in written.questions if q.qid in entries} <= {e["old"] for e in entries.values()}
    assert judge_set.test_half(audited) == judge_set.test_half(written)  # the halves do not move with the audit


def test_the_development_set_takes_the_audited_answer_as_right() -> None:
    entry = next(e for e in ENTRIES if e["corpus"] == "numpy-api" and e["verdict"] == "replace")
    audited = [c for c in judge_set.build_cases(["numpy-api"], per_corpus=300, seed=0) if c.question_id == entry["_id"]]
    written = [c for c in judge_set.build_cases(["numpy-api"], per_corpus=300, seed=0, golds="evidence")
               if c.question_id == entry["_id"]]
    assert {c.value for c in audited if c.kind == "right_concise"} == {entry["answer"]}
    assert {c.value for c in written if c.kind == "right_concise"} == {entry["old"]}
