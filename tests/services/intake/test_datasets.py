"""The datasets teams already keep, imported as records: RAGAS rows (JSONL, and CSV as pandas
writes list columns), Phoenix and Langfuse dataset exports, other names by --map; the
reference answer kept with the assessed run."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import text
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from app_pages.common import REVIEWER_KEY
from services.answering.runs import load_run
from services.cli import app
from services.errors import InputError
from services.intake.assess import process_queue
from services.intake.datasets import parse_map
from services.intake.importing import import_file
from services.intake.readers import NumberedRun, iter_records
from services.store import transaction

RAGAS = {"user_input": "How do I clear alarm SRVO-062?",
         "retrieved_contexts": ["SRVO-062 BZAL: the pulsecoder battery is low.", "Remaster the axis afterwards."],
         "response": "Replace the pulsecoder battery, then remaster the axis.",
         "reference": "Replace the battery and remaster.",
         "reference_contexts": ["SRVO-062 BZAL: the pulsecoder battery is low."]}


def payloads(settings) -> list[dict]:  # type: ignore[no-untyped-def,type-arg]
    with transaction(settings) as session:
        return [r[0] for r in session.execute(text("SELECT payload FROM run_intake ORDER BY id"))]


def jsonl(*rows: dict) -> bytes:  # type: ignore[type-arg]
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def test_ragas_rows_become_records_with_their_reference_and_the_rest_kept(clean_db, settings):  # type: ignore[no-untyped-def]
    summary = import_file(jsonl(RAGAS), fmt="jsonl")
    assert (summary.accepted, summary.error_count) == (1, 0)
    [payload] = payloads(settings)
    assert (payload["question"], payload["answer"], payload["reference"]) == (
        RAGAS["user_input"], RAGAS["response"], RAGAS["reference"])
    assert [c["text"] for c in payload["contexts"]] == RAGAS["retrieved_contexts"]
    assert payload["metadata"]["extra"] == {"reference_contexts": RAGAS["reference_contexts"]}


def test_a_ragas_csv_written_by_pandas_reads_its_list_columns(tmp_path: Path):
    path = tmp_path / "ragas.csv"
    pd.DataFrame([RAGAS]).to_csv(path, index=False)  # list columns become "['a', 'b']"
    [item] = list(iter_records(path))
    assert isinstance(item, NumberedRun), item
    assert [c.text for c in item.run.contexts] == RAGAS["retrieved_contexts"] and item.run.reference == RAGAS["reference"]


def test_phoenix_and_langfuse_exports_are_mapped():
    phoenix = {"input": {"question": "What is the payload?"}, "output": {"answer": "7 kg."},
               "metadata": {"split": "test"}}
    langfuse = {"input": "What is the reach?", "expected_output": "717 mm", "output": "About 717 mm.",
                "source_trace_id": "lf-trace-9"}
    runs = [i.run for i in iter_records(jsonl(phoenix, langfuse), fmt="jsonl")]  # type: ignore[union-attr]
    assert [(r.question, r.answer, r.reference, r.trace_id) for r in runs] == [
        ("What is the payload?", "7 kg.", None, None), ("What is the reach?", "About 717 mm.", "717 mm", "lf-trace-9")]
    assert runs[0].metadata.extra == {"metadata": {"split": "test"}}


def test_a_dataset_row_without_an_answer_is_a_bad_line_not_an_abstention():
    [bad] = list(iter_records(jsonl({"input": "What is the reach?", "expected_output": "717 mm"}), fmt="jsonl"))
    assert bad.line == 1 and "answer: required field missing" in bad.reason  # type: ignore[union-attr]


def test_other_names_by_map_in_parquet_and_a_wrong_map_is_an_error(tmp_path: Path):
    path = tmp_path / "eval.parquet"
    pd.DataFrame([{"q": "Q?", "a": "A.", "docs": ["one", "two"], "gold": "A!", "id": "x-1"}]).to_parquet(path)
    mapping = parse_map("question=q, answer=a,contexts=docs,reference=gold,trace_id=id")
    [item] = list(iter_records(path, mapping=mapping))
    assert isinstance(item, NumberedRun), item
    run = item.run
    assert (run.question, run.answer, [c.text for c in run.contexts], run.reference, run.trace_id) == (
        "Q?", "A.", ["one", "two"], "A!", "x-1")
    with pytest.raises(InputError, match="--map answer=nope: no such column"):
        list(iter_records(path, mapping={"answer": "nope"}))
    with pytest.raises(InputError, match="'score' is not a record field"):
        parse_map("score=s")
    with pytest.raises(InputError, match="FIELD=COLUMN"):
        parse_map("question")


def test_our_own_records_still_refuse_unknown_fields():
    [bad] = list(iter_records(jsonl({"question": "Q?", "answer": "A.", "answr": "typo"}), fmt="jsonl"))
    assert "answr: unknown field" in bad.reason  # type: ignore[union-attr]


def test_the_reference_is_kept_with_the_assessed_run_and_map_works_from_the_cli(clean_db, settings, tmp_path: Path):  # type: ignore[no-untyped-def]
    path = tmp_path / "eval.jsonl"
    path.write_bytes(jsonl({"q": "How do I clear alarm SRVO-062?", "a": RAGAS["response"], "gold": RAGAS["reference"],
                            "docs": RAGAS["retrieved_contexts"]}))
    result = CliRunner().invoke(app, ["import", str(path), "--no-assess", "--map", "question=q,answer=a,reference=gold,contexts=docs"])
    assert result.exit_code == 0, result.output
    assert "accepted 1 new" in result.stdout
    assert process_queue(judges=False, settings=settings).assessed == 1
    with transaction(settings) as session:
        run_id = session.execute(text("SELECT run_id FROM run_intake")).scalar_one()
    assert load_run(run_id).external["reference"] == RAGAS["reference"]

    page = AppTest.from_file(str(Path(__file__).resolve().parents[3] / "app_pages" / "review.py"), default_timeout=120)
    page.session_state[REVIEWER_KEY] = "ana"
    page.run()
    page.multiselect(key="review.statuses").set_value([]).run()
    page.selectbox(key="review.pick").select(run_id).run()
    assert not page.exception, page.exception
    assert "**Reference answer** (from the imported dataset)" in [m.value for m in page.markdown]
    assert RAGAS["reference"] in [t.value for t in page.text] and RAGAS["response"] in [t.value for t in page.text]
