"""The committed python-reference evaluation set (bench/data/python-reference) is consistent:
every judged document exists, every answer is in a document judged to answer it, and the
answerable/unanswerable split matches the qrels. Reads the files only; no database."""

from __future__ import annotations

import importlib.util
import json
import platform
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

from services.retrieval.beir_files import load_qrels, load_queries

SET_DIR = Path(__file__).resolve().parents[2] / "bench" / "data" / "python-reference"


def _read_jsonl(name: str) -> list[dict]:
    return [json.loads(line) for line in (SET_DIR / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def _squeezed(text: str) -> str:
    """Lower case with runs of whitespace as one space: the documents keep the source's line wrapping."""
    return re.sub(r"\s+", " ", text).strip().lower()


CORPUS = _read_jsonl("corpus.jsonl")
QUERIES = _read_jsonl("queries.jsonl")
DOCS = {doc["_id"]: doc for doc in CORPUS}
QRELS = load_qrels(SET_DIR / "qrels.tsv")
ANSWERABLE = [q for q in QUERIES if q["metadata"]["answerable"]]
UNANSWERABLE = [q for q in QUERIES if not q["metadata"]["answerable"]]


def test_ids_are_unique() -> None:
    assert [d for d, n in Counter(doc["_id"] for doc in CORPUS).items() if n > 1] == []
    assert [q for q, n in Counter(query["_id"] for query in QUERIES).items() if n > 1] == []


def test_documents_are_beir_records_of_a_sensible_size() -> None:
    for doc in CORPUS:
        assert set(doc) == {"_id", "title", "text"}, doc["_id"]
        assert doc["title"].strip() and doc["text"].strip(), doc["_id"]
        assert len(doc["text"]) <= 2500, doc["_id"]
    sizes = sorted(len(doc["text"]) for doc in CORPUS)
    assert sizes[len(sizes) // 10] >= 400  # only a few whole, genuinely short topics fall below


def test_the_set_has_the_promised_shape() -> None:
    assert len(ANSWERABLE) >= 200
    assert len(UNANSWERABLE) >= 80
    assert len({q["text"].strip().lower() for q in QUERIES}) == len(QUERIES)  # no question asked twice
    topics = {doc_id.rsplit("-", 1)[0] for q in ANSWERABLE for doc_id in QRELS[q["_id"]]}
    assert len(topics) >= 60  # spread over the corpus, not only its first documents


def test_every_judged_document_exists() -> None:
    missing = sorted({doc for judged in QRELS.values() for doc in judged} - DOCS.keys())
    assert missing == []


def test_qrels_judge_exactly_the_answerable_questions() -> None:
    assert set(QRELS) == {q["_id"] for q in ANSWERABLE}
    assert all(score == 1 for judged in QRELS.values() for score in judged.values())


@pytest.mark.parametrize("query", ANSWERABLE, ids=lambda q: q["_id"])
def test_the_answer_occurs_in_a_document_judged_to_answer(query: dict) -> None:
    answer = _squeezed(query["metadata"]["answer"])
    assert answer
    judged = QRELS[query["_id"]]
    assert any(answer in _squeezed(DOCS[doc]["text"]) for doc in judged), (query["text"], sorted(judged))


def test_unanswerable_questions_carry_no_answer() -> None:
    assert all("answer" not in q["metadata"] for q in UNANSWERABLE)


def test_the_evaluation_loader_reads_every_query() -> None:
    loaded = load_queries(SET_DIR / "queries.jsonl")
    assert [q.query_id for q in loaded] == [q["_id"] for q in QUERIES]


def _build_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("python_reference_build", SET_DIR / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass resolves annotations through sys.modules
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_build_reproduces_the_committed_corpus() -> None:
    build = _build_module()
    if platform.python_version() != build.PYTHON_VERSION:
        pytest.skip(f"the corpus was built from Python {build.PYTHON_VERSION}'s topics, this is {platform.python_version()}")
    import pydoc_data.topics

    assert build.build_documents(pydoc_data.topics.topics) == CORPUS


def test_build_keeps_a_shared_paragraph_only_in_the_more_specific_topic() -> None:
    build = _build_module()
    shared = ("A paragraph that both topics print, long enough to be compared and to make a topic of its own.\n"
              "It wraps onto a second line, as the reference text does, and says nothing else of note.")
    topics = {
        "big": "Big topic\n*********\n\nIntroduction of the big topic, which only it has to say.\n\n"
               "The small one\n=============\n\n" + shared + "\n",
        "small": "Small topic\n***********\n\n" + shared + "\n",
    }
    documents = {doc["_id"]: doc for doc in build.build_documents(topics)}
    assert set(documents) == {"big-0", "small-0"}
    assert shared in documents["small-0"]["text"]
    assert "The small one" not in documents["big-0"]["text"]  # its section lost its body, so its heading went too
    assert documents["big-0"]["title"] == "Big topic"
