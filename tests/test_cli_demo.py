"""`workbench demo`: refuses a corpus that is not the handbook, and --remove empties the store
of demo runs (the whole 75-run load is driven by tests/e2e/test_browser.py on a fresh data dir)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from services.cli import app
from services.demo import answer_key, demo_status, load_demo


def test_demo_on_a_store_of_other_documents_says_why_and_exits_1(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    (tmp_path / "pumps.md").write_text("# Pumps\nPrime the pump before starting it.", encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(tmp_path)]).exit_code == 0
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == 1
    assert "error:" in result.stderr and "none of the demo handbook's" in result.stderr
    assert demo_status().runs == 0


def test_demo_remove_reports_what_it_deleted_as_json(clean_db):  # type: ignore[no-untyped-def]
    load_demo(presets=("minimal", "balanced"), questions=answer_key()[:1])
    result = CliRunner().invoke(app, ["demo", "--remove", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"removed_runs": 2, "removed_reviews": 1}  # one answer-key verdict
    assert demo_status().store_empty


def test_the_progress_shows_a_bar_per_phase_and_finishes_each(capsys):  # type: ignore[no-untyped-def]
    from services.cli.demo import _ProgressBars
    from services.demo import DemoProgress

    bars = _ProgressBars(disable=False)
    events = [DemoProgress("start", 0, 1, "the store and the embedding model"),
              DemoProgress("start", 1, 1, "the store and the embedding model"),
              *(DemoProgress("handbook", n, 46, f"doc{n}.md") for n in (0, 20, 46, 46)),  # the last one repeats
              *(DemoProgress("runs", n, 75, f"minimal: q{n:02d}") for n in range(1, 76))]
    for event in events:
        bars(event)
    err = capsys.readouterr().err
    assert "starting the store and the embedding model: 100%" in err
    assert "loading the demo handbook: 100%" in err and "46/46" in err
    assert "answering demo questions: 100%" in err and "75/75" in err and "minimal: q75" in err
    assert bars.bar is None  # every bar closed


def test_json_output_draws_no_bar(capsys):  # type: ignore[no-untyped-def]
    from services.cli.demo import _ProgressBars
    from services.demo import DemoProgress

    bars = _ProgressBars(disable=True)
    bars(DemoProgress("runs", 1, 2, "minimal: q01"))
    assert capsys.readouterr().err == ""
