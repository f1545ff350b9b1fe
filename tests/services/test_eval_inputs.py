"""Eval inputs a careless hand produces: a byte-order mark, repeated ids, a negative limit,
judgements naming documents the corpus lacks, an empty question. Each is counted right or
named in a warning, before anything is ingested; none gives wrong numbers with exit 0."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from services.cli import app
from services.cli.corpus import default_eval_collection
from services.corpus.stats import list_documents
from services.evaluation.beir import BeirFiles, evaluate_beir
from services.retrieval.beir_files import load_qrels
from services.scoring.weights import DEFAULT_PROFILE
from tests.services.test_evaluation import TINY_DOCS

QUERIES = [{"_id": "q1", "text": "How do plants turn sunlight into glucose?"},
           {"_id": "q2", "text": "What makes a volcano erupt?"},
           {"_id": "q3", "text": "Why does the sea have tides?"}]


def _files(tmp_path: Path, queries: list[dict[str, str]], qrels: str) -> BeirFiles:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in TINY_DOCS), encoding="utf-8")
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (tmp_path / "qrels.tsv").write_text(qrels, encoding="utf-8")
    return BeirFiles(tmp_path / "queries.jsonl", tmp_path / "qrels.tsv", corpus)


def _eval(files: BeirFiles, collection: str = "eval-inputs"):  # type: ignore[no-untyped-def]
    return evaluate_beir(files, collection=collection, profile=DEFAULT_PROFILE, modes=["bm25"])


def test_a_headerless_qrels_file_with_a_byte_order_mark_keeps_its_first_query(tmp_path: Path) -> None:
    qrels = tmp_path / "qrels.tsv"
    qrels.write_bytes("\ufeffq1\td1\t1\nq2\td2\t1\n".encode())
    assert load_qrels(qrels) == {"q1": {"d1": 1}, "q2": {"d2": 1}}


def test_a_repeated_query_id_is_evaluated_once_and_named(clean_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    files = _files(tmp_path, [*QUERIES, {"_id": "q1", "text": "Something else entirely"}], "q1\td1\t1\nq2\td2\t1\nq3\td3\t1\n")
    outcome = _eval(files)
    assert [q.query_id for q in outcome.queries] == ["q1", "q2", "q3"]
    assert any("line 4" in w and "'q1'" in w and "repeats line 1" in w for w in outcome.warnings), outcome.warnings


def test_judgements_naming_documents_the_collection_lacks_are_warned_about(clean_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outcome = _eval(_files(tmp_path, QUERIES, "q1\td1\t1\nq2\td2\t1\nq3\td9\t1\nq3\td8\t1\n"))
    assert any("2 judged documents are not in the collection 'eval-inputs'" in w and "'d8', 'd9'" in w
               for w in outcome.warnings), outcome.warnings


def test_an_empty_question_is_left_out_by_line_before_the_ingest_and_the_rest_evaluated(clean_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    files = _files(tmp_path, [QUERIES[0], {"_id": "q2", "text": "   "}, QUERIES[2]], "q1\td1\t1\nq2\td2\t1\nq3\td3\t1\n")
    outcome = _eval(files)
    assert [q.query_id for q in outcome.queries] == ["q1", "q3"]
    assert any("line 2" in w and "'q2'" in w and "empty" in w for w in outcome.warnings), outcome.warnings

    result = CliRunner().invoke(app, ["eval", "--corpus", str(files.corpus), "--queries", str(files.queries),
                                      "--qrels", str(files.qrels), "--modes", "bm25", "--self-calibration", "0", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["queries"] == 2
    assert any(line.startswith("warning: ") and "line 2" in line for line in result.stderr.splitlines())


def test_a_negative_limit_is_refused_before_the_ingest(clean_db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    files = _files(tmp_path, QUERIES, "q1\td1\t1\nq2\td2\t1\nq3\td3\t1\n")
    result = CliRunner().invoke(app, ["eval", "--corpus", str(files.corpus), "--queries", str(files.queries),
                                      "--qrels", str(files.qrels), "--limit", "-1", "--collection", "eval-limit"])
    assert result.exit_code == 1 and "error: the query limit must be at least 1" in result.stderr
    assert list_documents("eval-limit") == []


def test_default_eval_collections_of_two_folders_with_one_name_differ(tmp_path: Path) -> None:
    first, second = tmp_path / "a" / "data" / "corpus.jsonl", tmp_path / "b" / "data" / "corpus.jsonl"
    assert default_eval_collection(first) != default_eval_collection(second)
    assert default_eval_collection(first).startswith("eval-data-")
    assert default_eval_collection(first) == default_eval_collection(first)
