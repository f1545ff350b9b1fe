"""Exports of reviewed runs against the real store: filters select the right runs, records
are complete, the three formats round-trip exactly, the CLI writes atomically, and SQL
metacharacters in names and comments stay plain text."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import event, text
from typer.testing import CliRunner

from services.answering.llm.base import Citation, Grade, LLMCall, Reflection
from services.answering.runs import Event, Iteration, Run, save_run
from services.cli import app
from services.domain import Hit, RetrievalResult
from services.errors import InputError
from services.review import export_formats
from services.review.export import FIELDS, ExportFilters, export_records, parse_when
from services.review.export_formats import export_bytes, read_export, write_export
from services.review.queue import FLAG_REASONS, submit_review
from services.scoring.crag import CragVerdict, RetrievalVerdict
from services.scoring.profiles import save_profile
from services.scoring.weights import COMPONENTS, WeightsProfile
from services.store import transaction

FORMATS = ("csv", "jsonl", "parquet")
SPEC_FIELDS = (
    "run_id", "question", "final_answer", "original_answer", "citations", "confidence_components",
    "retrieval_confidence", "final_confidence", "final_level", "weights_profile", "weights_profile_id",
    "calibrated_probability", "route", "iterations_summary", "crag_verdict", "reflection_score", "grade", "status",
    "verdict", "reviewer", "flag_reason", "review_comment", "review_history", "preset", "backend", "model",
    "created_at", "reviewed_at",
)
INJECTION = "'; DROP TABLE runs; --"
NASTY = 'Comma, "quoted", new\nline, CRLF\r\nend, tab\t, ünïcødé 日本語 🚀👩‍🔬, line sep\u2028here'
T0 = datetime(2025, 5, 1, 9, 30, tzinfo=UTC)

# --- helpers ---------------------------------------------------------------------------


def _iteration(ordinal: int, query: str, answer: str, *, decision: str, confidence: float) -> Iteration:
    hit = Hit(chunk_id=40 + ordinal, document_id=7, external_id="pump-guide.md", title="Pump maintenance",
              text="The centrifugal pump needs its seals inspected every month.", rank=1, fused_score=0.0328,
              bm25_score=7.41, bm25_rank=1, dense_similarity=0.71, dense_rank=2, rerank_score=None,
              matched_idf_share=0.82)
    return Iteration(
        ordinal=ordinal, query_used=query, sub_queries=(), components=(0.9, 0.6, 0.67, 0.8, 0.95, 0.0, 0.5),
        retrieval=RetrievalResult(query=query, mode="hybrid", hits=(hit,), reranker="none", query_entities=(),
                                  depth=50, latency_ms=21.5, params={"k": 10}),
        raw_metrics={"top_score": 0.9, "score_gap": 0.06, "n_hits": 10}, retrieval_confidence=0.74,
        confidence=confidence, level="MEDIUM",
        crag=CragVerdict(verdict=RetrievalVerdict.CORRECT, score=0.81, confidence=0.81, signals={},
                         reasoning="top hit answers it", action="use retrieved"),
        answer=answer, citations=(Citation(marker=1, chunk_id=40 + ordinal, document_id=7,
                                           external_id="pump-guide.md", quote="seals inspected every month"),),
        reflection=Reflection(answer_grounded=True, hallucination_detected=False, reflection_score=0.8 + ordinal / 100,
                              sources_cited=("pump-guide.md",), reflection_reason="every sentence supported",
                              needs_regeneration=False, sentence_support=(0.9,)),
        grade=Grade(score=3 + ordinal), gaps=(),
        decision=decision, decision_reason="confidence below target" if decision != "COMPLETE" else "grounded",
        signals={"retrieval": 0.74, "reflection": 0.8, "grade": 0.75}, latency_ms={"retrieve": 21.5, "generate": 3.2},
        llm_calls=(LLMCall("offline", "extractive-v1", "generate", "v1", 0.0, latency_ms=3.2),),
    )


def make_run(question: str = "How often are the pump seals inspected?", *, answer: str = "Every month [1].",
             status: str = "pending", profile: tuple[str, int | None] = ("default v1", None),
             collection: str = "default", preset: str = "balanced") -> Run:
    """A stored-run shape with every field filled as the pipeline would fill it."""
    first = _iteration(0, question, "Monthly, probably.", decision="REFINE_QUERY", confidence=0.61)
    best = _iteration(1, question + " maintenance schedule", answer, decision="COMPLETE", confidence=0.78)
    return Run(
        query=question, preset=preset, collection=collection, source="ask", backend="offline", model="extractive-v1",
        status=status, final_answer=answer, citations=best.citations, final_confidence=0.78, final_level="MEDIUM",
        retrieval_confidence=0.74, components=best.components, reflection_score=0.81, grade=4, crag_verdict="CORRECT",
        signals=best.signals, route=("REFINE_QUERY", "COMPLETE"), best_iteration=1, weights_profile=profile[0],
        weights_profile_id=profile[1], config={"preset": preset, "max_iterations": 3}, outcome_note="", latency_ms=88.0,
        iterations=(first, best),
        events=(Event(0, "retrieval_complete", "10 hits", T0, 21.5, {"hits": 10}),
                Event(1, "adaptive_refinement_complete", "Done after 2 iteration(s)", T0, 88.0)),
    )


def store(*runs: Run, created_at: datetime | None = None) -> list[int]:
    with transaction() as session:
        ids = [save_run(run, session=session) for run in runs]
        if created_at is not None:
            session.execute(text("UPDATE runs SET created_at = :t WHERE id = ANY(:ids)"), {"t": created_at, "ids": ids})
    return ids


def set_reviewed_at(run_id: int, when: datetime) -> None:
    with transaction() as session:
        session.execute(text("UPDATE runs SET reviewed_at = :t WHERE id = :id"), {"t": when, "id": run_id})


def ids_of(filters: ExportFilters) -> list[int]:
    return [r["run_id"] for r in export_records(filters)]


@pytest.fixture()
def profiles(clean_db) -> dict[str, tuple[str, int]]:  # type: ignore[no-untyped-def]
    default_id, default = save_profile(WeightsProfile(), activate=True)
    tuned_id, tuned = save_profile(WeightsProfile(name="tuned", high=0.8))
    return {"default": (default.label, default_id), "tuned": (tuned.label, tuned_id)}


@pytest.fixture()
def reviewed(profiles) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Five runs: approved, flagged, corrected, still pending, auto-accepted."""
    approved, flagged, corrected, pending = store(
        make_run("Q approved", profile=profiles["default"]), make_run("Q flagged", profile=profiles["default"]),
        make_run("Q corrected", profile=profiles["tuned"], collection="manuals"), make_run("Q pending"),
        created_at=T0)
    (auto,) = store(make_run("Q auto", status="auto_accepted"), created_at=T0 + timedelta(days=10))
    with transaction() as session:  # as if another system's key had sent it
        session.execute(text("UPDATE runs SET app = 'support-bot', trace_id = 'tr-1' WHERE id = :id"), {"id": auto})
    submit_review(approved, expected_version=0, action="approve", reviewer="alice", comment="looks right")
    submit_review(flagged, expected_version=0, action="flag", reviewer="bob", flag_reason=FLAG_REASONS[1],
                  comment="the quote is from another pump")
    submit_review(corrected, expected_version=0, action="flag", reviewer="alice", flag_reason=FLAG_REASONS[0])
    submit_review(corrected, expected_version=1, action="correct", reviewer="carol", comment="fixed the interval",
                  corrected_answer="Every two weeks, per the 2024 revision [1].")
    return {"approved": approved, "flagged": flagged, "corrected": corrected, "pending": pending, "auto": auto}


# --- records ---------------------------------------------------------------------------


def test_record_has_every_field_and_corrected_answer_replaces_final(reviewed, profiles) -> None:  # type: ignore[no-untyped-def]
    (record,) = export_records(ExportFilters(verdict="corrected"))
    assert list(record) == list(FIELDS)
    assert set(SPEC_FIELDS) <= set(record)
    assert record["run_id"] == reviewed["corrected"]
    assert record["question"] == "Q corrected"
    assert record["final_answer"] == "Every two weeks, per the 2024 revision [1]."
    assert record["original_answer"] == "Every month [1]."
    assert record["citations"] == [{"marker": 1, "chunk_id": 41, "document_id": 7, "external_id": "pump-guide.md",
                                    "quote": "seals inspected every month"}]
    assert list(record["confidence_components"]) == list(COMPONENTS)
    assert list(record["confidence_components"].values()) == [0.9, 0.6, 0.67, 0.8, 0.95, 0.0, 0.5]
    assert (record["retrieval_confidence"], record["final_confidence"], record["final_level"]) == (0.74, 0.78, "MEDIUM")
    assert (record["weights_profile"], record["weights_profile_id"]) == profiles["tuned"]
    assert record["calibrated_probability"] is None
    assert record["route"] == ["REFINE_QUERY", "COMPLETE"]
    assert record["iterations_summary"] == [
        {"ordinal": 0, "query_used": "Q corrected", "decision": "REFINE_QUERY", "confidence": 0.61,
         "reflection_score": 0.8, "grade": 3},
        {"ordinal": 1, "query_used": "Q corrected maintenance schedule", "decision": "COMPLETE", "confidence": 0.78,
         "reflection_score": 0.81, "grade": 4},
    ]
    assert (record["crag_verdict"], record["reflection_score"], record["grade"]) == ("CORRECT", 0.81, 4)
    assert (record["status"], record["verdict"], record["reviewer"]) == ("corrected", "corrected", "carol")
    assert record["flag_reason"] is None  # the correction replaced the earlier flag
    assert record["review_comment"] == "fixed the interval"
    assert record["review_version"] == 2
    history = record["review_history"]
    assert [(h["version"], h["action"], h["reviewer"], h["comment"]) for h in history] == [
        (1, "flag", "alice", ""), (2, "correct", "carol", "fixed the interval")]
    assert history[0]["flag_reason"] == FLAG_REASONS[0]
    assert history[1]["corrected_answer"] == "Every two weeks, per the 2024 revision [1]."
    assert (history[1]["previous_status"], history[1]["new_status"]) == ("flagged", "corrected")
    assert (record["preset"], record["backend"], record["model"]) == ("balanced", "offline", "extractive-v1")
    assert (record["collection"], record["source"]) == ("manuals", "ask")
    assert (record["app"], record["trace_id"]) == (None, None)  # the workbench's own run
    assert datetime.fromisoformat(record["created_at"]) == T0
    reviewed_at = datetime.fromisoformat(record["reviewed_at"])
    assert reviewed_at.tzinfo is not None and abs(datetime.now(UTC) - reviewed_at) < timedelta(minutes=5)
    assert all(isinstance(datetime.fromisoformat(h["created_at"]), datetime) for h in history)


def test_contexts_are_the_best_iterations_hits_with_text_document_and_scores(reviewed) -> None:  # type: ignore[no-untyped-def]
    (record,) = export_records(ExportFilters(verdict="corrected"))
    assert record["contexts"] == [{  # iteration 1 is the best: its hit, not iteration 0's
        "rank": 1, "document_id": "pump-guide.md", "title": "Pump maintenance",
        "text": "The centrifugal pump needs its seals inspected every month.",
        "scores": {"fused_score": 0.0328, "bm25_score": 7.41, "dense_similarity": 0.71, "rerank_score": None}}]
    with transaction() as session:  # an imported context that named no document has none in the export
        run = make_run("imported")
        best = run.iterations[-1]
        hit = replace(best.hits[0], document_id=-1, external_id="context 1", title="")
        best = replace(best, retrieval=replace(best.retrieval, hits=(hit,)))
        run_id = save_run(replace(run, source="import", iterations=(*run.iterations[:-1], best)), session=session)
    (imported,) = [r for r in export_records() if r["run_id"] == run_id]
    assert [(c["document_id"], c["title"]) for c in imported["contexts"]] == [(None, None)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_export_written_before_contexts_reads_with_no_contexts(reviewed, fmt) -> None:  # type: ignore[no-untyped-def]
    records = export_records()
    older = [{k: v for k, v in r.items() if k != "contexts"} for r in records]
    if fmt == "jsonl":
        data = "".join(json.dumps(r) + "\n" for r in older).encode()
    else:
        data = export_bytes(records, fmt)
        if fmt == "csv":
            rows = list(csv.reader(io.StringIO(data.decode())))
            drop = rows[0].index("contexts")
            buffer = io.StringIO()
            csv.writer(buffer).writerows([row[:drop] + row[drop + 1:] for row in rows])
            data = buffer.getvalue().encode()
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            table = pq.read_table(pa.BufferReader(data)).drop_columns(["contexts"])
            sink = pa.BufferOutputStream()
            pq.write_table(table, sink)
            data = sink.getvalue().to_pybytes()
    assert [r["contexts"] for r in read_export(data, fmt)] == [[] for _ in records]


def test_unreviewed_run_has_none_review_fields_and_blank_comment_is_none(reviewed) -> None:  # type: ignore[no-untyped-def]
    records = {r["run_id"]: r for r in export_records()}
    pending = records[reviewed["pending"]]
    assert pending["final_answer"] == pending["original_answer"] == "Every month [1]."
    for name in ("verdict", "reviewer", "flag_reason", "review_comment", "reviewed_at", "weights_profile_id"):
        assert pending[name] is None, name
    assert pending["review_history"] == [] and pending["review_version"] == 0
    submit_review(reviewed["pending"], expected_version=0, action="approve", reviewer="dave", comment="")
    (approved,) = export_records(ExportFilters(reviewer="dave"))
    assert approved["review_comment"] is None
    assert approved["review_history"][0]["comment"] == ""


def test_calibrator_maps_final_confidence(reviewed) -> None:  # type: ignore[no-untyped-def]
    seen = []

    def calibrate(raw: np.ndarray) -> np.ndarray:
        seen.append(raw)
        return raw * 0.5

    records = export_records(calibrate=calibrate)
    assert len(seen) == 1 and len(seen[0]) == len(records) == 5  # one vectorized call
    assert all(r["calibrated_probability"] == pytest.approx(r["final_confidence"] * 0.5) for r in records)
    assert all(type(r["calibrated_probability"]) is float for r in records)


def test_loading_is_three_queries_a_batch_whatever_the_number_of_runs(reviewed, engine) -> None:  # type: ignore[no-untyped-def]
    store(*(make_run(f"extra {i}") for i in range(20)))
    statements: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        records = export_records()
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(records) == 25  # one batch (BATCH_RUNS): the runs, their iterations, their history
    queries = [s for s in statements if not s.startswith("SET TRANSACTION")]  # read-only, one snapshot
    assert len(queries) == 3, statements


# --- filters ---------------------------------------------------------------------------


def test_filters_select_the_right_runs(reviewed, profiles) -> None:  # type: ignore[no-untyped-def]
    r = reviewed
    assert ids_of(ExportFilters()) == [r["approved"], r["flagged"], r["corrected"], r["pending"], r["auto"]]
    assert ids_of(ExportFilters(statuses=("approved", "corrected"))) == [r["approved"], r["corrected"]]
    assert ids_of(ExportFilters(statuses=("pending", "auto_accepted"))) == [r["pending"], r["auto"]]
    assert ids_of(ExportFilters(verdict="flagged")) == [r["flagged"]]
    assert ids_of(ExportFilters(statuses=("approved",), verdict="flagged")) == []
    assert ids_of(ExportFilters(reviewer="alice")) == [r["approved"]]  # the current reviewer, not past ones
    assert ids_of(ExportFilters(reviewer="Alice")) == []  # exact
    assert ids_of(ExportFilters(profile=profiles["tuned"][0])) == [r["corrected"]]
    assert ids_of(ExportFilters(profile="default v1")) == [r["approved"], r["flagged"], r["pending"], r["auto"]]
    assert ids_of(ExportFilters(collection="manuals")) == [r["corrected"]]
    assert ids_of(ExportFilters(app="support-bot")) == [r["auto"]]
    assert [(x["app"], x["trace_id"]) for x in export_records(ExportFilters(app="support-bot"))] == [("support-bot", "tr-1")]
    assert ids_of(ExportFilters(app="another-bot")) == []
    assert ids_of(ExportFilters(profile="default v1", verdict="approved", reviewer="alice")) == [r["approved"]]


def test_date_filters_on_created_or_reviewed(reviewed) -> None:  # type: ignore[no-untyped-def]
    r = reviewed
    assert ids_of(ExportFilters(since=T0 + timedelta(days=1))) == [r["auto"]]
    assert ids_of(ExportFilters(until=T0 + timedelta(days=1))) == [r["approved"], r["flagged"], r["corrected"], r["pending"]]
    assert ids_of(ExportFilters(since=T0, until=T0 + timedelta(seconds=1))) == ids_of(ExportFilters(until=T0 + timedelta(days=1)))
    assert ids_of(ExportFilters(until=T0)) == []  # until is exclusive
    naive = ExportFilters(since=datetime(2025, 5, 11))  # naive = UTC
    assert naive.since == datetime(2025, 5, 11, tzinfo=UTC) and ids_of(naive) == [r["auto"]]

    set_reviewed_at(r["approved"], T0 + timedelta(days=2))
    set_reviewed_at(r["flagged"], T0 + timedelta(days=5))
    set_reviewed_at(r["corrected"], T0 + timedelta(days=8))
    by_review = ExportFilters(date_field="reviewed", since=T0 + timedelta(days=3), until=T0 + timedelta(days=8))
    assert ids_of(by_review) == [r["flagged"]]
    # Never-reviewed runs have no review date, so any review-date bound leaves them out.
    assert ids_of(ExportFilters(date_field="reviewed", since=T0)) == [r["approved"], r["flagged"], r["corrected"]]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"statuses": ("approved", "aproved")}, "unknown status 'aproved'; use one of: auto_accepted, pending, approved"),
    ({"verdict": "pending"}, "unknown verdict 'pending'; use one of: approved, flagged, corrected"),
    ({"date_field": "updated"}, "use one of: created, reviewed"),
    ({"since": T0, "until": T0 - timedelta(days=1)}, "must be before until"),
    ({"since": T0, "until": T0}, "must be before until"),
])
def test_invalid_filters_say_what_is_valid(kwargs, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=message):
        ExportFilters(**kwargs)


def test_parse_when() -> None:
    assert parse_when("2025-05-31") == datetime(2025, 5, 31, tzinfo=UTC)
    assert parse_when("2025-05-31", end=True) == datetime(2025, 6, 1, tzinfo=UTC)
    assert parse_when("2025-05-31T14:00:00+02:00") == datetime(2025, 5, 31, 12, tzinfo=UTC)
    with pytest.raises(InputError, match="not an ISO date"):
        parse_when("31/05/2025")


def test_sql_metacharacters_are_plain_text(profiles, engine) -> None:  # type: ignore[no-untyped-def]
    (run_id,) = store(make_run(INJECTION, answer=f"{INJECTION} [1]", collection=INJECTION))
    (other,) = store(make_run("plain question"))
    submit_review(run_id, expected_version=0, action="flag", reviewer=INJECTION, flag_reason="other", comment=INJECTION)
    (record,) = export_records(ExportFilters(reviewer=INJECTION))
    assert record["run_id"] == run_id
    assert record["question"] == record["review_comment"] == record["reviewer"] == record["collection"] == INJECTION
    assert ids_of(ExportFilters(collection=INJECTION)) == [run_id]
    assert ids_of(ExportFilters(profile=INJECTION)) == []
    assert ids_of(ExportFilters(reviewer="x' OR '1'='1")) == []
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM runs")).scalar_one() == 2
    assert ids_of(ExportFilters()) == [run_id, other]


# --- formats ---------------------------------------------------------------------------


@pytest.fixture()
def awkward_records(profiles) -> list[dict]:  # type: ignore[no-untyped-def]
    """Unicode, emoji, newlines, commas, quotes, empty and None values, nested lists."""
    corrected_id, flagged_id, empty_id, _pending = store(
        make_run(f"Q1 {NASTY}", answer=f"A1 {NASTY} [1]", profile=profiles["tuned"]),
        make_run('Wie "oft"; wird, geprüft?', answer="Monatlich\n\n– siehe [1]"),
        make_run("", answer=""),
        make_run("What about 💥, \"quotes\" and\r\nCRLF?", answer="null"),
    )
    submit_review(corrected_id, expected_version=0, action="correct", reviewer="Zoë 🧪", comment=NASTY,
                  corrected_answer=f"Corrected: {NASTY}")
    submit_review(flagged_id, expected_version=0, action="flag", reviewer="O'Brien, \"Pat\"",
                  flag_reason=FLAG_REASONS[2], comment="None")
    submit_review(empty_id, expected_version=0, action="approve", reviewer="ann", comment="")
    with transaction() as session:  # a run with no iterations, citations or profile at all
        bare = replace(make_run("bare"), iterations=(), citations=(), route=(), reflection_score=None, grade=None,
                       crag_verdict=None, events=())
        save_run(bare, session=session)
    records = export_records(calibrate=lambda raw: raw ** 2)
    assert len(records) == 5
    return records


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_round_trips(awkward_records, fmt, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert read_export(export_bytes(awkward_records, fmt), fmt) == awkward_records
    path = tmp_path / f"export.{fmt}"
    write_export(awkward_records, fmt, path)
    assert read_export(path, fmt) == awkward_records
    buffer = io.BytesIO()
    write_export(awkward_records, fmt, buffer)
    assert read_export(buffer.getvalue(), fmt) == awkward_records
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary left behind


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_export_round_trips(fmt) -> None:  # type: ignore[no-untyped-def]
    assert read_export(export_bytes([], fmt), fmt) == []


def test_csv_cells_a_spreadsheet_would_run_as_formulas_are_quoted_and_round_trip(profiles) -> None:  # type: ignore[no-untyped-def]
    formulas = ['=HYPERLINK("http://evil","x")', "+1+1", "-2+3", "@SUM(A1)", "\tTAB", "'quoted", "''=x"]
    store(*(make_run(text, answer=text) for text in formulas))
    records = export_records()
    data = export_bytes(records, "csv")
    cells = [cell for row in csv.reader(io.StringIO(data.decode("utf-8"), newline="")) for cell in row]
    assert not [cell for cell in cells if cell.startswith(("=", "+", "@", "\t"))]
    assert '\'=HYPERLINK("http://evil","x")' in cells and "'''=x" in cells
    assert read_export(data, "csv") == records
    assert sorted(r["question"] for r in records) == sorted(formulas)


def test_csv_formulas_behind_leading_spaces_and_control_characters_are_quoted_and_round_trip(profiles) -> None:  # type: ignore[no-untyped-def]
    # OWASP: a spreadsheet skips these before it looks for = + - @ (issue 28 found all three passing).
    formulas = [" =1+1", "\n=1+1", "\u00a0=1+1", "\u200b@SUM(A1)", "\r\n-2+3", "   +1", "\x1b=cmd", "\ntext on a new line"]
    harmless = ["a = b", "two - one", "x@example.com", " leading space"]
    store(*(make_run(value, answer=value) for value in formulas + harmless))
    records = export_records()
    data = export_bytes(records, "csv")
    rows = list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))
    written = {row["question"] for row in rows}
    assert written == {"'" + value for value in formulas} | set(harmless)
    assert read_export(data, "csv") == records


def test_text_formats_are_readable_utf8(awkward_records) -> None:  # type: ignore[no-untyped-def]
    lines = export_bytes(awkward_records, "jsonl").decode("utf-8").split("\n")
    assert len(lines) == 6 and lines[-1] == ""  # one object per line, U+2028 kept inside its string
    assert "🧪" in lines[0] + lines[1] + lines[2] and "\\ud83e" not in "".join(lines)
    csv_text = export_bytes(awkward_records, "csv").decode("utf-8")
    assert csv_text.startswith("run_id,created_at,") and "Zoë 🧪" in csv_text


def test_unknown_format_is_an_input_error(tmp_path: Path) -> None:
    for call in (lambda: export_bytes([], "xlsx"), lambda: write_export([], "xlsx", tmp_path / "x"),
                 lambda: read_export(b"", "xlsx")):
        with pytest.raises(InputError, match="unknown export format 'xlsx'; use one of: csv, jsonl, parquet"):
            call()
    assert list(tmp_path.iterdir()) == []


def test_reading_something_else_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="missing columns"):
        read_export(b"a,b\n1,2\n", "csv")
    with pytest.raises(InputError, match="not a readable jsonl export"):
        read_export(b"{not json\n", "jsonl")
    with pytest.raises(InputError, match="not a readable parquet export"):
        read_export(b"PAR1 but not really", "parquet")
    with pytest.raises(InputError, match="cannot read"):
        read_export(tmp_path / "missing.csv", "csv")


def test_failed_write_keeps_the_previous_file(awkward_records, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "export.jsonl"
    path.write_text("previous export\n", encoding="utf-8")

    def fail(src, dst) -> None:  # type: ignore[no-untyped-def]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_formats.os, "replace", fail)
    with pytest.raises(InputError, match="No space left on device"):
        write_export(awkward_records, "jsonl", path)
    assert path.read_text(encoding="utf-8") == "previous export\n"
    assert [p.name for p in tmp_path.iterdir()] == ["export.jsonl"]
    with pytest.raises(InputError, match="does not exist"):
        write_export(awkward_records, "jsonl", tmp_path / "nowhere" / "export.jsonl")


# --- CLI -------------------------------------------------------------------------------


def _invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["export", *args])


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_writes_what_export_records_returns(reviewed, fmt, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / f"approved.{fmt}"
    result = _invoke("--format", fmt, "--status", "approved", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == f"exported 1 records to {out}"
    assert read_export(out, fmt) == export_records(ExportFilters(statuses=("approved",)))
    assert [r["run_id"] for r in read_export(out, fmt)] == [reviewed["approved"]]


def test_cli_options_map_to_filters(reviewed, profiles, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out.jsonl"

    def exported(*args: str) -> list[int]:
        result = _invoke("-o", str(out), *args)
        assert result.exit_code == 0, result.output
        return [json.loads(line)["run_id"] for line in out.read_text(encoding="utf-8").splitlines()]

    r = reviewed
    assert exported("--status", "approved,flagged", "--status", "pending") == [r["approved"], r["flagged"], r["pending"]]
    assert exported("--verdict", "corrected") == [r["corrected"]]
    assert exported("--reviewer", "bob") == [r["flagged"]]
    assert exported("--profile", profiles["tuned"][0]) == [r["corrected"]]
    assert exported("--collection", "manuals") == [r["corrected"]]
    assert exported("--app", "support-bot") == [r["auto"]]
    assert exported("--since", "2025-05-02") == [r["auto"]]
    assert exported("--until", "2025-05-01") == [r["approved"], r["flagged"], r["corrected"], r["pending"]]  # whole day
    assert exported("--since", "2025-05-01", "--until", "2025-05-01T09:00:00Z") == []
    assert exported("--date-field", "reviewed", "--until", "2000-01-01") == []
    assert exported("--status", "auto_accepted", "--format", "jsonl") == [r["auto"]]


@pytest.mark.parametrize(("args", "message"), [
    (("--status", "approved,done"), "unknown status 'done'"),
    (("--verdict", "rejected"), "unknown verdict 'rejected'; use one of: approved, flagged, corrected"),
    (("--since", "2025-06-01", "--until", "2025-05-01"), "must be before until"),
    (("--since", "yesterday"), "not an ISO date"),
    (("--format", "xlsx"), "unknown export format 'xlsx'"),
    (("--date-field", "updated"), "unknown date field"),
])
def test_cli_invalid_filter_fails_and_writes_nothing(reviewed, args, message, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out.jsonl"
    result = _invoke(*args, "-o", str(out))
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and message in result.stderr
    assert list(tmp_path.iterdir()) == []

    out.write_text("earlier export\n", encoding="utf-8")
    assert _invoke(*args, "-o", str(out)).exit_code == 1
    assert out.read_text(encoding="utf-8") == "earlier export\n"


def test_cli_requires_an_output(clean_db) -> None:  # type: ignore[no-untyped-def]
    result = _invoke("--format", "csv")
    assert result.exit_code == 2 and "--output" in result.output
