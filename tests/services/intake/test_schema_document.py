"""The JSON Schema the README links to is the one the importer validates with."""

from __future__ import annotations

import json
from pathlib import Path

from services.intake.schema import record_json_schema

SCHEMA_FILE = Path(__file__).resolve().parents[3] / "docs" / "run-record.schema.json"


def test_committed_schema_matches_the_models() -> None:
    committed = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert committed == record_json_schema(), (
        "docs/run-record.schema.json is stale: regenerate it with `workbench import --schema > docs/run-record.schema.json`")
