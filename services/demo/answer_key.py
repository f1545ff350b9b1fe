"""The demo questions' answer key (questions.jsonl + qrels.tsv) and the verdict it gives a run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from services.corpus.stats import DEMO_DIR
from services.evaluation.beir import BeirFiles
from services.retrieval.beir_files import EvalQuery, load_qrels, load_queries

QUESTIONS_FILE = DEMO_DIR / "questions.jsonl"
QRELS_FILE = DEMO_DIR / "qrels.tsv"
CORPUS_DIR = DEMO_DIR / "corpus"
DEMO_BEIR_FILES = BeirFiles(QUESTIONS_FILE, QRELS_FILE, None)  # evaluated against the handbook already ingested


@dataclass(frozen=True)
class DemoQuestion:
    query_id: str
    text: str
    relevant: frozenset[str]  # document ids (file names) that answer it; empty: the handbook does not

    @property
    def answerable(self) -> bool:
        return bool(self.relevant)


@dataclass(frozen=True)
class KeyVerdict:
    """What the answer key says about one run, in the review queue's terms."""

    action: str  # approve or flag
    flag_reason: str | None
    comment: str


@lru_cache(maxsize=1)
def answer_key() -> tuple[DemoQuestion, ...]:
    """Every demo question with the documents its answer key names, in file order."""
    qrels = load_qrels(QRELS_FILE)
    queries: list[EvalQuery] = load_queries(QUESTIONS_FILE)
    return tuple(DemoQuestion(q.query_id, q.text, frozenset(d for d, s in qrels.get(q.query_id, {}).items() if s > 0))
                 for q in queries)


def demo_document_ids() -> frozenset[str]:
    return frozenset(path.name for path in CORPUS_DIR.glob("*.md"))


def key_verdict(question: DemoQuestion, *, answer: str, cited: Iterable[str]) -> KeyVerdict:
    """Approve an answer that cites a document the key names, or no answer to a question the
    handbook cannot answer; flag anything else.

    The key knows which documents answer a question, not the right wording, so "cites a
    relevant document" is the bar, the same one tests/services/test_demo_questions.py holds
    the pipeline to. Any answer to a question the handbook cannot answer is wrong.
    """
    cited = sorted(set(cited))
    prefix = f"answer key, demo question {question.query_id}: "
    if not question.answerable:
        if not answer.strip():
            # Declining is the right answer to a question the handbook cannot answer.
            return KeyVerdict("approve", None, prefix + "the handbook does not answer this and no answer was given")
        return KeyVerdict("flag", "question out of scope",
                          prefix + "the handbook does not answer this question, yet an answer was given")
    if not answer.strip():
        return KeyVerdict("flag", "incomplete answer", prefix + "no answer was given; the key names "
                          + ", ".join(sorted(question.relevant)))
    found = [d for d in cited if d in question.relevant]
    if found:
        return KeyVerdict("approve", None, prefix + "cites " + ", ".join(found) + ", which the key names")
    return KeyVerdict("flag", "wrong sources retrieved",
                      prefix + "cites " + (", ".join(cited) or "nothing") + "; the key names "
                      + ", ".join(sorted(question.relevant)))
