"""A document is known by its id and where it came from: a same-named file from elsewhere is a
second document, never a silent replacement; a real replacement says what it replaced; documents
stored before locations were kept are still matched, and re-ingesting stays idempotent."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import text
from typer.testing import CliRunner

from services.cli import app
from services.corpus.ingest import ingest_paths
from services.corpus.stats import list_documents


def _write(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


def _stored(engine) -> dict[str, str]:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return dict(conn.execute(text("SELECT external_id, source FROM documents d JOIN collections c "
                                      "ON c.id = d.collection_id WHERE c.name = 'default'")).all())


def test_two_files_of_one_name_from_two_folders_are_two_documents(clean_db, engine, tmp_path):  # type: ignore[no-untyped-def]
    first = _write(tmp_path / "p1" / "README.md", "# Pumps\nBleed the pump before opening it.\n")
    second = _write(tmp_path / "p2" / "README.md", "# Fans\nClean the fan blades every week.\n")

    assert ingest_paths([first]).ingested == 1
    summary = ingest_paths([second])

    assert (summary.ingested, summary.replaced) == (1, 0)
    assert _stored(engine) == {"README.md": str(first), str(second): str(second)}
    for path in (first, second):  # and each is found again by where it came from
        again = ingest_paths([path])
        assert (again.unchanged, again.ingested, again.replaced) == (1, 0, 0)


def test_two_folders_sharing_relative_paths_keep_both_in_one_ingest(clean_db, engine, tmp_path):  # type: ignore[no-untyped-def]
    a = _write(tmp_path / "a" / "guide.md", "# Pump guide\nSeals are checked monthly.\n").parent
    b = _write(tmp_path / "b" / "guide.md", "# Fan guide\nBlades are cleaned weekly.\n").parent

    summary = ingest_paths([a, b])

    assert (summary.ingested, summary.skipped) == (2, [])
    assert sorted(d.title for d in list_documents("default")) == ["Fan guide", "Pump guide"]
    assert ingest_paths([a, b]).unchanged == 2


def test_a_jsonl_id_equal_to_a_file_name_does_not_replace_the_file(clean_db, engine, tmp_path):  # type: ignore[no-untyped-def]
    readme = _write(tmp_path / "README.md", "# Pumps\nBleed the pump before opening it.\n")
    corpus = _write(tmp_path / "corpus" / "c.jsonl", json.dumps({"_id": "README.md", "text": "Something else."}) + "\n")

    ingest_paths([readme])
    summary = ingest_paths([corpus])

    assert (summary.ingested, summary.replaced) == (1, 0)
    assert _stored(engine)["README.md"] == str(readme)
    assert len(_stored(engine)) == 2


def test_a_real_replacement_says_what_it_replaced(clean_db, engine, tmp_path):  # type: ignore[no-untyped-def]
    readme = _write(tmp_path / "p1" / "README.md", "# Pumps\nBleed the pump before opening it.\n")
    ingest_paths([readme])
    readme.write_text("# Pumps\nBleed the pump, then wait a minute before opening it.\n", encoding="utf-8")

    result = CliRunner().invoke(app, ["ingest", str(readme)])

    assert result.exit_code == 0, result.output
    assert "replaced 1" in result.stdout
    assert f"replaced README.md: the version ingested from {readme} on " in result.stdout


def test_documents_stored_before_locations_were_kept_still_match(clean_db, engine, tmp_path):  # type: ignore[no-untyped-def]
    readme = _write(tmp_path / "p1" / "README.md", "# Pumps\nBleed the pump before opening it.\n")
    ingest_paths([readme])
    with engine.begin() as conn:  # what an older version stored: the bare name, no location
        conn.execute(text("UPDATE documents SET source = external_id"))

    again = ingest_paths([readme])

    assert (again.unchanged, again.ingested, again.replaced) == (1, 0, 0)
    assert _stored(engine) == {"README.md": str(readme)}  # the location is learnt
    other = _write(tmp_path / "p2" / "README.md", "# Fans\nClean the fan blades every week.\n")
    assert ingest_paths([other]).ingested == 1 and len(_stored(engine)) == 2


def test_an_upload_of_a_stored_name_still_replaces_it(clean_db, engine, tmp_path):  # type: ignore[no-untyped-def]
    from services.corpus.ingest import ingest_uploads

    readme = _write(tmp_path / "README.md", "# Pumps\nBleed the pump before opening it.\n")
    ingest_paths([readme])
    summary = ingest_uploads([("README.md", b"# Pumps\nNew text for the pump.\n")])
    assert (summary.replaced, summary.ingested) == (1, 0)  # an upload has no location: same name, same document
    assert _stored(engine) == {"README.md": "README.md"}  # and the upload is what is stored now
