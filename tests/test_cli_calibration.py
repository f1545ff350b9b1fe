"""`workbench calibrate` and the self-calibration `workbench ingest` runs after an ingest, end to
end on the real store: figures per mode, the stored active profile, errors as `error:` lines, and
a calibration that cannot be done leaving the ingest standing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from services.cli import app
from services.corpus.stats import list_documents
from services.scoring.profiles import active_profile, list_profiles
from services.settings import get_settings
from tests._calibration_corpus import write_calibration_corpus

MODES = ["bm25", "dense", "hybrid"]


@pytest.fixture()
def corpus(clean_db, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    return write_calibration_corpus(tmp_path / "corpus.jsonl")


@pytest.fixture()
def min_chunks(monkeypatch) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Automatic self-calibration from 100 chunks (the calibration corpus has 150); the CLI
    rebuilds its settings per command, and the cached ones are dropped afterwards."""
    monkeypatch.setenv("SELF_CALIBRATION_MIN_CHUNKS", "100")
    yield
    monkeypatch.delenv("SELF_CALIBRATION_MIN_CHUNKS")
    get_settings.cache_clear()


def _ingest(runner: CliRunner, path: Path, *args: str):  # type: ignore[no-untyped-def]
    result = runner.invoke(app, ["ingest", str(path), "--collection", "cal", *args])
    assert result.exit_code == 0, result.output
    return result


def test_calibrate_prints_figures_per_mode_and_stores_the_active_profile(corpus):  # type: ignore[no-untyped-def]
    runner = CliRunner()
    _ingest(runner, corpus)
    result = runner.invoke(app, ["calibrate", "--collection", "cal", "--pseudo-questions", "300", "--seed", "3"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("self-calibrated 'cal' on ") and "(seed 3, logistic)" in lines[0]
    assert lines[1].split() == ["mode", "AUROC", "AUROC*", "ECE", "ECE*", "found"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:5]}
    assert list(rows) == MODES
    for figures in rows.values():
        auroc, auroc_after, ece, ece_after = map(float, figures[:4])
        assert all(0.0 <= v <= 1.0 for v in (auroc, auroc_after, ece, ece_after))
    active, active_id = active_profile()
    assert lines[5] == f"stored profile {active.label} (id {active_id}), now active"
    assert sorted(active.mappings["cal"]) == MODES
    assert {m: str(active.mappings["cal"][m].positives) for m in MODES} == {m: rows[m][4].split("/")[0] for m in MODES}


def test_calibrate_json_matches_the_stored_profile(corpus):  # type: ignore[no-untyped-def]
    runner = CliRunner()
    _ingest(runner, corpus)
    result = runner.invoke(app, ["calibrate", "--collection", "cal", "--method", "isotonic", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    active, active_id = active_profile()
    assert (data["collection"], data["profile"], data["profile_id"]) == ("cal", active.label, active_id)
    assert list(data["modes"]) == MODES
    for mode, figures in data["modes"].items():
        assert figures["method"] == "isotonic" and active.mappings["cal"][mode].method == "isotonic"
        assert set(figures["before"]) == set(figures["after"]) == {"auroc", "ece", "brier"}
        assert all(0.0 <= v <= 1.0 for v in (*figures["before"].values(), *figures["after"].values()))


def test_calibrate_errors_exit_1_and_store_nothing(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    runner = CliRunner()
    (tmp_path / "tiny.md").write_text("# Tiny\n\nThe boiler checklist is read before every shift starts.\n")
    _ingest(runner, tmp_path / "tiny.md")
    too_small = runner.invoke(app, ["calibrate", "--collection", "cal"])
    assert too_small.exit_code == 1
    assert too_small.stderr.splitlines()[-1].startswith("error: self-calibration needs at least 50 pseudo-questions")
    empty = runner.invoke(app, ["calibrate", "--collection", "nowhere"])
    assert empty.exit_code == 1 and "collection 'nowhere' has no text to ask questions of" in empty.stderr
    method = runner.invoke(app, ["calibrate", "--collection", "cal", "--method", "spline"])
    assert method.exit_code == 1 and "unknown method 'spline' (use logistic or isotonic)" in method.stderr
    assert list_profiles() == []


def test_ingest_self_calibrates_a_big_enough_changed_collection(corpus, min_chunks):  # type: ignore[no-untyped-def]
    runner = CliRunner()
    first = _ingest(runner, corpus)
    out = first.stdout.splitlines()
    assert out[0].startswith("ingested 150, replaced 0, unchanged 0")
    assert out[1] == "self-calibrating: 'cal' holds 150 chunks and 150 documents changed"
    active, active_id = active_profile()
    assert out[2] == f"  stored {active.label} (profile id {active_id}) with 'cal' mappings fitted on " \
                     f"{out[2].split(' fitted on ')[1].split(' ')[0]} pseudo-questions (seed 0)"
    assert [line.split(":")[0].strip() for line in out[3:6]] == MODES
    assert sorted(active.mappings["cal"]) == MODES
    assert "self-calibrating" in first.stderr  # the tqdm bar, on stderr

    again = _ingest(runner, corpus, "--json")  # nothing changed: no new calibration
    assert "self_calibration" not in json.loads(again.stdout)
    assert active_profile()[1] == active_id


def test_ingest_json_reports_the_stored_calibration(corpus, min_chunks):  # type: ignore[no-untyped-def]
    data = json.loads(_ingest(CliRunner(), corpus, "--json").stdout)
    calibration = data["self_calibration"]
    assert calibration["warning"] is None
    assert calibration["stored"]["profile_id"] == active_profile()[1]
    assert list(calibration["stored"]["modes"]) == MODES


def test_a_failed_calibration_after_ingest_is_a_warning_not_a_failed_ingest(clean_db, tmp_path, min_chunks,  # type: ignore[no-untyped-def]
                                                                           monkeypatch):
    monkeypatch.setenv("SELF_CALIBRATION_MIN_CHUNKS", "1")  # a one-chunk collection qualifies, but is far too small
    (tmp_path / "tiny.md").write_text("# Tiny\n\nThe boiler checklist is read before every shift starts.\n")
    result = _ingest(CliRunner(), tmp_path / "tiny.md")
    assert result.stdout.startswith("ingested 1, ")
    assert "self-calibrating: 'cal' holds 1 chunks" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1
    assert warnings[0].startswith("warning: self-calibration of 'cal' was not stored: self-calibration needs at least 50")
    assert list_profiles() == []
    assert [d.external_id for d in list_documents("cal")] == ["tiny.md"]  # the ingest stands
