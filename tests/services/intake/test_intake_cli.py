"""`workbench import` and `workbench api-key` through the CLI runner, against the real store."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import text
from typer.testing import CliRunner

from services.cli import app
from services.store import transaction
from tests.services.intake.test_intake_readers import mixed_jsonl


def test_import_lands_the_good_lines_lists_the_bad_ones_and_exits_1(clean_db, settings, tmp_path: Path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(mixed_jsonl())
    result = CliRunner().invoke(app, ["import", str(path)])
    assert result.exit_code == 1
    assert "accepted 3 new, 0 already imported, 6 bad; 3 queued for assessment" in result.stdout
    assert "line 2: not valid JSON" in result.stderr and "line 4: answer: required field missing" in result.stderr
    with transaction(settings) as session:
        assert session.execute(text("SELECT count(*) FROM run_intake WHERE source = 'import'")).scalar_one() == 3

    again = CliRunner().invoke(app, ["import", str(path), "--json"])
    summary = json.loads(again.stdout)
    assert (again.exit_code, summary["accepted"], summary["duplicates"], summary["error_count"]) == (1, 0, 3, 6)


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
    created = runner.invoke(app, ["api-key", "create", "support-bot", "--created-by", "ana"])
    assert created.exit_code == 0, created.output
    key = created.stdout.strip()
    assert key.startswith("wb_") and "cannot be shown again" in created.stderr
    listed = json.loads(runner.invoke(app, ["api-key", "list", "--json"]).stdout)
    assert [(k["name"], k["created_by"], k["prefix"], k["revoked_at"]) for k in listed] == [("support-bot", "ana", key[:10], None)]
    assert key not in runner.invoke(app, ["api-key", "list"]).stdout
    revoked = runner.invoke(app, ["api-key", "revoke", str(listed[0]["key_id"])])
    assert revoked.exit_code == 0 and "revoked" in revoked.stdout
    assert json.loads(runner.invoke(app, ["api-key", "list", "--json"]).stdout)[0]["revoked_at"] is not None
    missing = runner.invoke(app, ["api-key", "revoke", "999"])
    assert missing.exit_code == 1 and "no API key 999" in missing.stderr
