"""`workbench ingest` shows a progress bar with chunks/s, an ETA and the skipped count, and after
a re-run says how many documents it skipped as already ingested."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from services.cli import app


def test_ingest_progress_names_rate_eta_and_skipped_and_a_re_run_reports_the_skipped(clean_db, tmp_path: Path):  # type: ignore[no-untyped-def]
    for name in ("boiler", "coffee", "fleet"):
        (tmp_path / f"{name}.md").write_text(f"# {name}\n\nThe {name} checklist is read before every shift.\n")
    first = CliRunner().invoke(app, ["ingest", str(tmp_path), "--collection", "cli-progress"])
    assert first.exit_code == 0, first.output
    bar = first.stderr.replace("\r", "\n").splitlines()
    final = [line for line in bar if line.startswith("ingesting: 100%")]
    assert final, first.stderr
    assert "3 of ~3 documents" in final[-1] and "chunks/s" in final[-1] and "ETA" in final[-1]
    assert "0 skipped (already ingested)" in final[-1]
    assert "already ingested with the same content" not in first.stdout

    again = CliRunner().invoke(app, ["ingest", str(tmp_path), "--collection", "cli-progress"])
    assert again.exit_code == 0, again.output
    assert "3 skipped (already ingested)" in again.stderr
    assert "unchanged 3" in again.stdout
    assert "skipped 3 already ingested with the same content (not embedded again)" in again.stdout
