"""`workbench ask` with the loop's thresholds set per run: stored with the run, or refused."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from services.answering.runs import load_run
from services.cli import app


def _ingest(tmp_path: Path) -> None:
    (tmp_path / "grease.md").write_text("# Reducer grease\nReplace the J2 reducer grease every 20,000 hours.\n",
                                        encoding="utf-8")
    result = CliRunner().invoke(app, ["ingest", str(tmp_path)])
    assert result.exit_code == 0, result.output


def test_ask_options_set_the_thresholds_the_run_stores(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    _ingest(tmp_path)
    result = CliRunner().invoke(app, [
        "ask", "How often is the J2 grease replaced?", "--json", "--preset", "as-written",
        "--reflection-min-score", "0.65", "--max-refinements", "0", "--crag-upper", "0.6", "--crag-lower", "0.2",
        "--consensus-threshold", "0.5", "--adaptive-k", "--gaps-fused"])
    assert result.exit_code == 0, result.output
    config = load_run(json.loads(result.stdout)["run_id"]).config
    assert config["preset"] == "as-written" and config["reflection_min_score"] == 0.65
    assert config["gaps_as_context"] is False  # as-written passes gaps on as context unless told not to
    assert config["max_refinement_attempts"] == 0 and config["adaptive_k"] is True
    assert (config["crag"]["correct_threshold"], config["crag"]["incorrect_threshold"]) == (0.6, 0.2)
    assert config["consensus_threshold"] == 0.5
    assert len(json.loads(result.stdout)["route"]) == 1  # a retry cap of 0: one iteration
    balanced = CliRunner().invoke(app, ["ask", "How often is the J2 grease replaced?", "--json", "--no-cache",
                                        "--gaps-as-context"])
    assert balanced.exit_code == 0, balanced.output
    assert load_run(json.loads(balanced.stdout)["run_id"]).config["gaps_as_context"] is True


def test_a_crag_lower_threshold_above_the_upper_is_refused(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    _ingest(tmp_path)
    result = CliRunner().invoke(app, ["ask", "How often is the J2 grease replaced?", "--crag-upper", "0.3",
                                      "--crag-lower", "0.5"])
    assert result.exit_code != 0 and "CRAG lower threshold 0.5 is above the upper one 0.3" in result.output


def test_the_active_profiles_loop_applies_and_an_option_goes_over_it(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    import dataclasses

    from services.scoring.profiles import save_profile
    from services.scoring.weights import DEFAULT_PROFILE

    _ingest(tmp_path)
    save_profile(dataclasses.replace(DEFAULT_PROFILE, loop={"max_refinement_attempts": 0, "consensus_threshold": 0.3}),
                 created_by="setup", activate=True)
    result = CliRunner().invoke(app, ["ask", "How often is the J2 grease replaced?", "--json", "--no-cache",
                                      "--consensus-threshold", "0.6"])
    assert result.exit_code == 0, result.output
    config = json.loads(result.stdout)["config"]
    assert config["max_refinement_attempts"] == 0 and config["consensus_threshold"] == 0.6


def test_a_repeated_question_is_answered_from_the_cache_unless_told_not_to(clean_db, engine, tmp_path):  # type: ignore[no-untyped-def]
    from sqlalchemy import text

    _ingest(tmp_path)
    question = ["ask", "How often is the J2 grease replaced?", "--json"]
    first = json.loads(CliRunner().invoke(app, question).stdout)
    assert first["cache_hit"] is None
    with engine.begin() as conn:  # the offline judge rarely auto-accepts; set the state under test directly
        conn.execute(text("UPDATE runs SET status = 'auto_accepted' WHERE id = :id"), {"id": first["run_id"]})
    again = json.loads(CliRunner().invoke(app, question).stdout)
    assert again["run_id"] == first["run_id"] and again["cache_hit"]["run_id"] == first["run_id"]
    plain = CliRunner().invoke(app, question[:2])
    assert plain.exit_code == 0 and "Answered from the cache" in plain.stderr and f"run {first['run_id']}]" in plain.stdout
    fresh = json.loads(CliRunner().invoke(app, [*question, "--no-cache"]).stdout)
    assert fresh["run_id"] != first["run_id"] and fresh["cache_hit"] is None
