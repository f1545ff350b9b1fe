"""The command line used carelessly: missing paths, links out of the folder, overlong names,
unknown collections, unwritable outputs, escape codes in names, bad lines among good questions,
a database lost mid-ingest, one document too large for the progress bar to move. Each gets
`error: ...` (exit 1) or a report, and loses nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

import services.corpus.ingest as ingest_module
import services.store as store
from services.cli import app
from services.corpus.batching import BATCH_DOCUMENTS, ENCODE_CHUNKS
from services.corpus.ingest import ingest_paths
from services.corpus.stats import list_documents


def _cli(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, list(args))


def _errors(stderr: str) -> list[str]:
    """The error lines (a progress bar may have drawn before them, on a line of its own)."""
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def _doc(path: Path, title: str, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {title}\n{body}\n", encoding="utf-8")
    return path


def test_ingest_of_a_missing_path_exits_1_and_ingests_nothing(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    good = _doc(tmp_path / "boiler.md", "Boiler", "Bleed the valve first.")
    result = _cli("ingest", str(tmp_path / "nowhere" / "report.md"), str(good))
    assert result.exit_code == 1
    [error] = _errors(result.stderr)
    assert "report.md" in error and "no such file or directory" in error
    assert list_documents("default") == []


def test_file_links_out_of_the_ingested_folder_are_not_followed_unless_asked(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    secret = _doc(tmp_path / "outside" / "passwd.txt", "root", "root:x:0:0:root:/root:/bin/bash")
    folder = tmp_path / "docs"
    _doc(folder / "guide.md", "Guide", "Check the seals monthly.")
    (folder / "passwd.txt").symlink_to(secret)

    result = _cli("ingest", str(folder), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["ingested"] == 1
    assert summary["skipped"] == [{"source": "passwd.txt",
                                   "reason": "a symbolic link; links are not followed (--follow-links follows them)"}]

    followed = _cli("ingest", str(folder), "--follow-links", "--json")
    assert followed.exit_code == 0 and json.loads(followed.stdout)["ingested"] == 1


def test_an_overlong_collection_name_is_an_error_not_a_traceback(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    good = _doc(tmp_path / "boiler.md", "Boiler", "Bleed the valve first.")
    result = _cli("ingest", str(good), "--collection", "c" * 201)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert _errors(result.stderr) == ["error: the collection name is 201 characters long; the limit is 200"]


def test_searching_or_asking_an_unknown_collection_exits_1_naming_the_known_ones(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    _cli("ingest", str(_doc(tmp_path / "boiler.md", "Boiler", "Bleed the valve first.")))
    for command in (["search", "boiler valve"], ["ask", "How do I bleed the boiler?"]):
        result = _cli(*command, "--collection", "nope")
        assert result.exit_code == 1, result.output
        assert result.stderr.startswith("error: no collection named 'nope'") and "default" in result.stderr


@pytest.mark.parametrize("target", ["missing-folder/runs.jsonl", "a-folder"])
def test_ask_out_to_an_unwritable_place_fails_before_any_question(clean_db, tmp_path, target):  # type: ignore[no-untyped-def]
    _cli("ingest", str(_doc(tmp_path / "boiler.md", "Boiler", "Bleed the valve first.")))
    (tmp_path / "a-folder").mkdir()
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"_id": "q1", "text": "How do I bleed the boiler?"}) + "\n")
    result = _cli("ask", "--queries", str(queries), "--out", str(tmp_path / target))
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.stderr.startswith("error: cannot write")


def test_ask_queries_reports_bad_lines_goes_on_and_replaces_out_only_when_done(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    _cli("ingest", str(_doc(tmp_path / "boiler.md", "Boiler", "Bleed the valve before opening the hatch.")))
    queries = tmp_path / "q.jsonl"
    queries.write_text("\n".join([json.dumps({"_id": "q1", "text": "How do I bleed the boiler?"}),
                                  json.dumps({"_id": "q2", "text": "   "}), "{not json",
                                  json.dumps({"_id": "q3", "text": "When do I open the hatch?"})]) + "\n")
    out = tmp_path / "runs.jsonl"
    out.write_text("earlier runs\n")

    result = _cli("ask", "--queries", str(queries), "--out", str(out))

    assert [json.loads(line)["query_id"] for line in out.read_text().splitlines()] == ["q1", "q3"]
    assert result.exit_code == 1
    assert "line 2" in result.stderr and "line 3" in result.stderr
    assert "error: 2 of 4 lines of" in result.stderr


def test_escape_codes_in_file_names_are_shown_escaped(clean_db, tmp_path):  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    _doc(folder / "red\x1b[31m.md", "Red", "Paint it red.")
    (folder / "bell\x07.exe").write_text("ring")
    result = _cli("ingest", str(folder))
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "bell\\x07.exe" in result.stdout
    search = _cli("search", "paint red")
    assert search.exit_code == 0 and "\x1b" not in search.output and "red\\x1b[31m.md" in search.stdout


def test_a_database_lost_mid_ingest_says_how_many_documents_were_saved(clean_db, engine, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    for i in range(BATCH_DOCUMENTS + 3):
        _doc(folder / f"doc-{i:03}.md", f"Document {i}", f"Paragraph number {i} about pumps.")
    writes = 0
    real_insert = ingest_module.insert_documents

    def insert_then_lose_the_connection(session, collection_id, preps):  # type: ignore[no-untyped-def]
        nonlocal writes
        writes += 1
        if writes == 2:  # the server ends this connection, as it does when it shuts down
            session.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))
        real_insert(session, collection_id, preps)

    monkeypatch.setattr(ingest_module, "insert_documents", insert_then_lose_the_connection)
    # The lost connection makes the store drop its engine; the session's own one comes back after.
    monkeypatch.setattr(store, "_ENGINES", dict(store._ENGINES))
    result = _cli("ingest", str(folder))

    assert result.exit_code == 1
    assert f"{BATCH_DOCUMENTS} documents from earlier batches of this ingest were saved" in result.stderr
    assert len(list_documents("default")) == BATCH_DOCUMENTS


@pytest.mark.slow  # embeds some 300 chunks
def test_progress_moves_while_one_large_document_is_embedded(clean_db, settings, tmp_path):  # type: ignore[no-untyped-def]
    small_chunks = settings.model_copy(update={"chunk_tokens": 24, "chunk_overlap_tokens": 0})
    words = " ".join(f"Step {i} checks the pump seal number {i} before the valve opens." for i in range(600))
    big = _doc(tmp_path / "manual.md", "Pump manual", words)
    seen: list[tuple[int, int]] = []

    summary = ingest_paths([big], on_progress=lambda p: seen.append((p.documents_done, p.chunks_embedded)),
                           settings=small_chunks)

    assert summary.ingested == 1 and summary.chunks_added > 2 * ENCODE_CHUNKS
    during = [embedded for done, embedded in seen if done == 0 and embedded > 0]
    assert len(during) >= 3 and during == sorted(during), seen  # slice by slice, before the document is written
    assert seen[-1] == (1, summary.chunks_added)
