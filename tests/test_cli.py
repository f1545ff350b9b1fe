"""The `workbench` command line end to end: ingest files, search them, report bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli import app
from services.scoring.weights import COMPONENTS


@pytest.fixture()
def docs(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "boiler.md").write_text(
        "# Boiler safety\n\nBleed the boiler pressure valve before opening the inspection hatch.\n", encoding="utf-8")
    (root / "coffee.txt").write_text(
        "Coffee machine care\n\nDescale the coffee machine every two weeks with citric acid.\n", encoding="utf-8")
    (root / "fleet.html").write_text(
        "<html><head><title>Fleet tyres</title></head><body><p>Rotate the van tyres every ten thousand miles."
        "</p></body></html>", encoding="utf-8")
    return root


def test_ingest_then_search_json_shows_every_score(clean_db, docs):  # type: ignore[no-untyped-def]
    runner = CliRunner()
    ingested = runner.invoke(app, ["ingest", str(docs), "--json"])
    assert ingested.exit_code == 0, ingested.output
    summary = json.loads(ingested.stdout)
    assert (summary["ingested"], summary["skipped"]) == (3, [])
    assert {o["external_id"] for o in summary["outcomes"]} == {"boiler.md", "coffee.txt", "fleet.html"}

    result = runner.invoke(app, ["search", "How do I open the boiler inspection hatch?", "--json", "--k", "3"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["mode"] == "hybrid"
    hits = data["hits"]
    assert len(hits) == 3
    assert hits[0]["external_id"] == "boiler.md"
    for key in ("bm25_score", "bm25_rank", "dense_similarity", "dense_rank", "fused_score"):
        assert all(key in hit for hit in hits), key
    top = hits[0]
    assert top["bm25_rank"] == 1 and top["dense_rank"] == 1 and top["bm25_score"] > 0
    assert top["fused_score"] == pytest.approx(2 / 61)  # rank 1 in both legs, RRF k=60, weights 1/1
    assert all(h["bm25_score"] is None for h in hits if h["bm25_rank"] is None)

    confidence = data["confidence"]
    assert list(confidence["components"]) == list(COMPONENTS) and len(COMPONENTS) == 7
    assert all(0.0 <= v <= 1.0 for v in confidence["components"].values())
    assert sum(confidence["contributions"].values()) == pytest.approx(confidence["overall_confidence"])
    assert confidence["level"] in ("HIGH", "MEDIUM", "LOW", "VERY LOW")

    text_result = runner.invoke(app, ["search", "descale coffee machine", "--mode", "bm25"])
    assert text_result.exit_code == 0, text_result.output
    assert "[coffee.txt]" in text_result.stdout.splitlines()[1]


@pytest.mark.parametrize("query", ["", "   "])
def test_search_empty_query_exits_1_with_error_on_stderr(clean_db, query):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(app, ["search", query])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and "empty" in result.stderr
    assert result.stdout == ""
    assert isinstance(result.exception, SystemExit)  # a clean exit, not a traceback


def test_search_unknown_mode_exits_1(clean_db):  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(app, ["search", "boiler", "--mode", "fuzzy"])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ") and "fuzzy" in result.stderr
