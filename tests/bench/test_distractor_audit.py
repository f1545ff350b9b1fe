"""The audit of the development set's same-passage wrong answers (bench/data/distractor-audit.jsonl):
it reads every distractor the set draws, each once and with a reason, and a distractor it found to
answer its question is not scored as a wrong answer unless the draws are asked for as they are.
Reads files only: the handbook and our two sets from the repository, SQuAD from ../shared when it
is there."""

from __future__ import annotations

import pytest

from bench import judge_set
from bench._common import SQUAD_DIR, read_jsonl
from bench._judge_sources import DISTRACTOR_AUDIT, also_right, load

ENTRIES = read_jsonl(DISTRACTOR_AUDIT)
TIED_TO_THE_DISTRACTOR = {"same_passage_name", "same_passage_restated", "wrong_option", "right_option"}
CORPORA = [pytest.param(name, marks=pytest.mark.skipif(
    name == "squad" and not (SQUAD_DIR / "corpus.jsonl").exists(), reason=f"SQuAD 2.0 half-dev not found at {SQUAD_DIR}"))
    for name in ("squad", "python-reference", "numpy-api", "handbook")]


@pytest.mark.parametrize("corpus", CORPORA)
def test_the_audit_reads_every_drawn_distractor_once_and_says_why(corpus: str) -> None:
    entries = [e for e in ENTRIES if e["corpus"] == corpus]
    assert {e["_id"]: e["candidate"] for e in entries} == judge_set.distractor_draws(corpus)
    assert len(entries) == len({e["_id"] for e in entries})
    for entry in entries:
        assert entry["verdict"] in ("right", "wrong") and entry["why"].strip(), entry


def _both_ways(corpus: str, qid: str) -> tuple[list[judge_set.JudgeCase], list[judge_set.JudgeCase]]:
    """A question's cases before the balance, with the audit and with every draw kept."""
    source = load(corpus)
    q = next(q for q in source.questions if q.qid == qid)
    return (judge_set._cases(source, q, "test", judge_set.question_rng(0, q), also_right(corpus)),
            judge_set._cases(source, q, "test", judge_set.question_rng(0, q)))


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e["verdict"] == "right" and e["corpus"] != "squad"],
                         ids=lambda e: f"{e['corpus']}/{e['_id']}")
def test_a_distractor_that_answers_is_left_out_and_nothing_else_moves(entry: dict) -> None:  # type: ignore[type-arg]
    audited, drawn = _both_ways(entry["corpus"], entry["_id"])
    assert {c.value for c in drawn if c.kind == "wrong_option"} == {entry["candidate"]}
    assert not {c.kind for c in audited} & TIED_TO_THE_DISTRACTOR
    assert audited == [c for c in drawn if c.kind not in TIED_TO_THE_DISTRACTOR]


def test_a_distractor_found_wrong_stays_and_the_set_without_the_audit_keeps_every_draw() -> None:
    entry = next(e for e in ENTRIES if e["verdict"] == "wrong" and e["corpus"] == "numpy-api")
    audited, drawn = _both_ways(entry["corpus"], entry["_id"])
    assert audited == drawn
    answering = {e["_id"] for e in ENTRIES if e["verdict"] == "right" and e["corpus"] == "numpy-api"}
    kept = judge_set.build_cases(["numpy-api"], per_corpus=300, seed=0, distractors="drawn")
    assert answering & {c.question_id for c in kept if c.kind == "wrong_option"}
    assert not answering & {c.question_id for c in judge_set.build_cases(["numpy-api"], per_corpus=300, seed=0)
                            if c.kind == "wrong_option"}
