"""The committed numpy-api evaluation set (bench/data/numpy-api) is well formed: the files
read with the loaders `workbench eval` uses, every judgement points at a real document, and
every answer span is found in a document judged to answer it. Reads files only, no database."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from services.retrieval.beir_files import load_qrels, load_queries

SET_DIR = Path(__file__).resolve().parents[2] / "bench" / "data" / "numpy-api"


def _jsonl(name: str) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in (SET_DIR / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def _build_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("numpy_api_build", SET_DIR / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _normalised(text: str) -> str:
    # Answer spans may cross the docstrings' line breaks.
    return re.sub(r"\s+", " ", text).strip().lower()


CORPUS = _jsonl("corpus.jsonl")
DOCUMENTS = {doc["_id"]: doc for doc in CORPUS}
QUERIES = _jsonl("queries.jsonl")
QRELS = load_qrels(SET_DIR / "qrels.tsv")
ANSWERABLE = [q for q in QUERIES if q["metadata"]["answerable"]]
UNANSWERABLE = [q for q in QUERIES if not q["metadata"]["answerable"]]


def test_corpus_ids_are_unique_qualified_names_in_sorted_order() -> None:
    ids = [doc["_id"] for doc in CORPUS]
    assert len(ids) == len(set(ids))
    assert ids == sorted(ids)
    assert all(doc["title"] == doc["_id"] and doc["_id"].startswith("numpy.") for doc in CORPUS)


def test_documents_are_within_the_size_bounds_build_py_promises() -> None:
    build = _build_module()
    lengths = [len(doc["text"]) for doc in CORPUS]
    assert min(lengths) >= build.MIN_CHARS
    assert max(lengths) <= build.MAX_CHARS
    dropped_sections = {"Examples", "See Also", "References"}
    assert not any(dropped_sections & set(doc["text"].splitlines()) for doc in CORPUS)


def test_query_ids_are_unique_and_the_classes_have_the_documented_sizes() -> None:
    ids = [q["_id"] for q in QUERIES]
    assert len(ids) == len(set(ids))
    assert [q.query_id for q in load_queries(SET_DIR / "queries.jsonl")] == ids
    assert len(ANSWERABLE) == 200
    assert len(UNANSWERABLE) == 80


def test_answerable_questions_are_judged_and_unanswerable_ones_are_not() -> None:
    assert all(QRELS.get(q["_id"]) for q in ANSWERABLE)
    assert not any(q["_id"] in QRELS for q in UNANSWERABLE)
    assert all("answer" not in q["metadata"] for q in UNANSWERABLE)
    assert set(QRELS) <= {q["_id"] for q in QUERIES}


def test_every_judged_document_exists_with_score_one() -> None:
    for query_id, judged in QRELS.items():
        for doc_id, score in judged.items():
            assert doc_id in DOCUMENTS, f"{query_id} judges unknown document {doc_id}"
            assert score == 1


@pytest.mark.parametrize("query", ANSWERABLE, ids=lambda q: q["_id"])
def test_answer_span_occurs_in_a_judged_document(query: dict) -> None:  # type: ignore[type-arg]
    answer = _normalised(query["metadata"]["answer"])
    assert answer
    judged_texts = [_normalised(DOCUMENTS[doc_id]["text"]) for doc_id in QRELS[query["_id"]]]
    assert any(answer in text for text in judged_texts), f"{query['_id']}: {answer!r} is in none of {list(QRELS[query['_id']])}"


def test_answerable_questions_cover_the_whole_corpus() -> None:
    position = {doc["_id"]: i for i, doc in enumerate(CORPUS)}
    tenths = {position[doc_id] * 10 // len(CORPUS) for q in ANSWERABLE for doc_id in QRELS[q["_id"]]}
    assert tenths == set(range(10))


def test_build_py_reproduces_the_committed_corpus(tmp_path: Path) -> None:
    build = _build_module()
    if np.__version__ != build.NUMPY_VERSION:
        pytest.skip(f"corpus.jsonl was built from numpy {build.NUMPY_VERSION}; this is {np.__version__}")
    # In its own interpreter: scipy, loaded here by the services, rewrites numpy.sinc's docstring.
    subprocess.run([sys.executable, str(SET_DIR / "build.py"), "--out", str(tmp_path / "corpus.jsonl")],
                   check=True, capture_output=True)
    assert (tmp_path / "corpus.jsonl").read_bytes() == (SET_DIR / "corpus.jsonl").read_bytes()
