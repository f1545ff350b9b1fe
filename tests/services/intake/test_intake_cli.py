"""`workbench import` and `workbench api-key` through the CLI runner, against the real store."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import text
from typer.testing import CliRunner

from services.cli import app
from services.store import transaction
from tests.services.intake.test_intake_readers import mixed_jsonl


def _statuses(settings) -> list[tuple[str | None, str, bool]]:  # type: ignore[no-untyped-def]
    with transaction(settings) as session:
        return [tuple(r) for r in session.execute(text(  # type: ignore[misc]
            "SELECT i.trace_id, i.status, r.reflection_score IS NOT NULL FROM run_intake i "
            "LEFT JOIN runs r ON r.id = i.run_id WHERE i.source = 'import' ORDER BY i.id"))]


def test_import_lands_the_good_lines_assesses_them_lists_the_bad_ones_and_exits_1(clean_db, settings, tmp_path: Path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(mixed_jsonl())
    result = CliRunner().invoke(app, ["import", str(path)])
    assert result.exit_code == 1
    assert "accepted 3 new, 0 already imported, 6 bad\nassessed 3 (the Review page lists them)" in result.stdout
    assert "assessing: 100%" in result.stderr and "3/3" in result.stderr  # the progress bar
    assert "line 2: not valid JSON" in result.stderr and "line 4: answer: required field missing" in result.stderr
    assert _statuses(settings) == [("t-1", "assessed", True), ("t-3", "assessed", True), ("t-8", "assessed", True)]
    with transaction(settings) as session:  # t-8 came with no contexts: judged with nothing to ground it in
        assert session.execute(text("SELECT source, trace_id, outcome_note LIKE 'the record came with no contexts%' "
                                    "FROM runs ORDER BY id")).all() == [
            ("import", "t-1", False), ("import", "t-3", False), ("import", "t-8", True)]

    again = CliRunner().invoke(app, ["import", str(path), "--json"])
    summary = json.loads(again.stdout)
    assert (again.exit_code, summary["accepted"], summary["duplicates"], summary["error_count"]) == (1, 0, 3, 6)
    assert summary["assessment"] is None  # nothing new to assess


def test_import_can_only_queue_or_skip_the_judges_and_the_queue_is_drained_later(clean_db, settings, tmp_path: Path):
    runner = CliRunner()
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text(json.dumps({"question": "Queued only?", "answer": "Yes.", "trace_id": "q-1"}) + "\n", encoding="utf-8")
    second.write_text(json.dumps({"question": "Judged?", "answer": "No.", "trace_id": "q-2",
                                  "contexts": [{"text": "Judges are off for this one."}]}) + "\n", encoding="utf-8")
    queued = runner.invoke(app, ["import", str(first), "--no-assess"])
    assert queued.exit_code == 0 and "1 queued for assessment" in queued.stdout and "assessing" not in queued.stderr
    assert _statuses(settings) == [("q-1", "queued", False)]

    unjudged = runner.invoke(app, ["import", str(second), "--no-judges", "--json"])
    assert unjudged.exit_code == 0
    assert json.loads(unjudged.stdout)["assessment"] == {"assessed": 2, "failed": 0, "remaining": 0}  # q-1 too
    assert _statuses(settings) == [("q-1", "assessed", True), ("q-2", "assessed", False)]

    drained = runner.invoke(app, ["intake", "process", "--json"])
    assert drained.exit_code == 0 and json.loads(drained.stdout) == {"assessed": 0, "failed": 0, "remaining": 0}
    (tmp_path / "third.jsonl").write_text(json.dumps({"question": "Later?", "answer": "Yes."}) + "\n", encoding="utf-8")
    runner.invoke(app, ["import", str(tmp_path / "third.jsonl"), "--no-assess"])
    later = runner.invoke(app, ["intake", "process"])
    assert later.exit_code == 0 and later.stdout.strip() == "assessed 1"


def test_assess_prints_the_breakdown_of_chunks_of_the_corpus(clean_db, tmp_path: Path):
    from services.corpus.ingest import ingest_paths
    from services.retrieval.search import default_params, search
    from tests.services.test_pipeline import DOCS

    for name, body in DOCS.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    ingest_paths([tmp_path])
    question = "What does SRVO-062 mean?"
    hits = search(question, default_params(k=3)).hits
    ids = ",".join(str(h.chunk_id) for h in hits)
    runner = CliRunner()
    shown = runner.invoke(app, ["assess", "--query", question, "--chunk-ids", ids, "--no-judges"])
    assert shown.exit_code == 0, shown.output
    assert "bm25_dense_agreement" in shown.stdout and "(contributes" in shown.stdout and "CRAG" not in shown.stdout
    judged = json.loads(runner.invoke(app, ["assess", "--query", question, "--chunk-ids", ids, "--answer",
                                            "The pulsecoder backup battery is low.", "--json"]).stdout)
    assert [h["chunk_id"] for h in judged["hits"]] == [h.chunk_id for h in hits]
    assert judged["reflection"] is not None and judged["crag"] is not None and judged["status"] in ("pending", "auto_accepted")
    bad = runner.invoke(app, ["assess", "--query", question, "--chunk-ids", "1,x"])
    assert bad.exit_code == 1 and "whole numbers" in bad.stderr
    unknown = runner.invoke(app, ["assess", "--query", question, "--chunk-ids", "99999999"])
    assert unknown.exit_code == 1 and "no chunk 99999999" in unknown.stderr


def test_a_clean_import_exits_0_and_a_bad_file_names_the_problem(clean_db, tmp_path: Path):
    path = tmp_path / "runs.data"
    path.write_text(json.dumps({"question": "q", "answer": "a"}) + "\n", encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(app, ["import", str(path), "--format", "jsonl"]).exit_code == 0
    unknown = runner.invoke(app, ["import", str(path)])
    assert unknown.exit_code == 1 and "cannot tell the format" in unknown.stderr
    assert "give a FILE" in runner.invoke(app, ["import"]).stderr


def test_import_schema_prints_the_json_schema():
    result = CliRunner().invoke(app, ["import", "--schema"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["title"] == "ExternalRun" and schema["required"] == ["question", "answer"]


def test_api_keys_are_created_listed_and_revoked(clean_db, settings):
    runner = CliRunner()
    created = runner.invoke(app, ["api-key", "create", "support-bot", "--app", "support", "--created-by", "ana"])
    assert created.exit_code == 0, created.output
    key = created.stdout.strip()
    assert key.startswith("wb_") and "cannot be shown again" in created.stderr and "app support, scope push" in created.stderr
    listed = json.loads(runner.invoke(app, ["api-key", "list", "--json"]).stdout)
    assert [(k["name"], k["app"], k["scope"], k["created_by"], k["prefix"], k["revoked_at"]) for k in listed] == [
        ("support-bot", "support", "push", "ana", key[:10], None)]
    table = runner.invoke(app, ["api-key", "list"]).stdout
    assert key not in table and "app support" in table
    revoked = runner.invoke(app, ["api-key", "revoke", str(listed[0]["key_id"])])
    assert revoked.exit_code == 0 and "revoked" in revoked.stdout
    assert json.loads(runner.invoke(app, ["api-key", "list", "--json"]).stdout)[0]["revoked_at"] is not None
    missing = runner.invoke(app, ["api-key", "revoke", "999"])
    assert missing.exit_code == 1 and "no API key 999" in missing.stderr


def test_a_key_names_its_app_and_a_scope_it_can_have(clean_db):
    runner = CliRunner()
    no_app = runner.invoke(app, ["api-key", "create", "bot"])
    assert no_app.exit_code == 2 and "--app" in no_app.output
    bad_app = runner.invoke(app, ["api-key", "create", "bot", "--app", "my app"])
    assert bad_app.exit_code == 1 and "an app's name is" in bad_app.stderr
    bad_scope = runner.invoke(app, ["api-key", "create", "bot", "--app", "bot", "--scope", "root"])
    assert bad_scope.exit_code == 1 and "push, read, admin" in bad_scope.stderr
    reader = runner.invoke(app, ["api-key", "create", "dashboard", "--app", "bot", "--scope", "read"])
    assert reader.exit_code == 0 and "scope read" in reader.stderr
    listed = json.loads(runner.invoke(app, ["api-key", "list", "--json"]).stdout)
    assert [(k["name"], k["app"], k["scope"]) for k in listed] == [("dashboard", "bot", "read")]
