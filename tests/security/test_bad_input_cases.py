"""Bad input, by name: the hostile uploads, queries, reviews and filters people actually send,
each with the message it must get (or the result it must give) and proof that nothing was written."""

from __future__ import annotations

import io
import json
import os
import zipfile

import pytest
from typer.testing import CliRunner

from services.answering import pipeline
from services.answering.runs import load_run
from services.cli import app
from services.corpus.extract import parse_file
from services.corpus.ingest import ingest_uploads
from services.corpus.stats import list_documents
from services.errors import InputError
from services.retrieval.search import default_params, search
from services.review.export import ExportFilters, export_records
from services.review.queue import review_history, submit_review
from services.scoring.weights import DEFAULT_PROFILE
from tests._pdf import one_page_pdf
from tests.security._support import SQL_METACHARACTERS, save_runs, table_counts

DROP = "'; DROP TABLE runs; --"
DOCS = {
    "srvo-062.md": "# SRVO-062 Encoder backup lost\nReplace the battery pack, then remaster the axis.",
    "grease.md": "# Reducer grease\nReplace the J2 reducer grease every 20,000 hours.",
}


def pdf(content: bytes, *, compress: bool = False) -> bytes:
    """A one-page PDF whose content stream is `content` (optionally Flate-compressed)."""
    return one_page_pdf(content, compress=compress)


def zip_bomb() -> bytes:
    """20 MB of zeros deflated to ~20 KB: harmless only if nothing ever inflates it."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("zeros.txt", b"\0" * 20_000_000)
    return buffer.getvalue()


def reasons(summary) -> dict[str, str]:  # type: ignore[no-untyped-def]
    return {s.source: s.reason for s in summary.skipped}


# --- uploads --------------------------------------------------------------------------------------------


def test_hostile_uploads_are_refused_with_a_reason_and_write_nothing(clean_db, engine):
    bomb = zip_bomb()
    files = {
        "empty.md": (b"", "empty file"),
        "blank.txt": (b"  \n\t\r\n", "no text found"),
        "huge.txt": (b"a" * 25_000_000, "file is 25.0 MB, over the 20.0 MB limit"),  # default 20 MB limit
        "blob.txt": (bytes(range(256)), "binary content, not a text file"),
        "report.docx": (b"PK\x03\x04 word", "unsupported file type '.docx'"),
        "setup.exe": (b"MZ\x90\x00", "unsupported file type '.exe'"),
        "README": (b"plain words", "unsupported file type (no extension)"),
        "latin1.txt": ("café crème".encode("latin-1"), "not valid UTF-8 (first bad byte at offset 3)"),
        "utf16.md": ("# Title".encode("utf-16"), "it looks like UTF-16; re-save the file as UTF-8"),
        "bomb.txt": (bomb, "binary content"),  # a zip bomb renamed: refused before anything inflates it
        "bomb.html": (bomb, "binary content"),
        "bomb.jsonl": (bomb, "binary content"),
        "flate-bomb.pdf": (pdf(b"BT (" + b" " * 100_000_000 + b") Tj ET", compress=True), "could not read PDF"),
        "scripts-only.html": (b"<script>alert(1)</script><style>p{}</style>", "no text found"),
        "nul\x00name.txt": (b"hello", "the file name contains a NUL character"),
        "caf\udce9.md": (b"hello", "the file name contains an unpaired surrogate"),
        f"{'x' * 2_100}.txt": (b"hello", "over the 2,000-byte limit"),
        f"{DROP}.exe": (DROP.encode(), "unsupported file type '.exe'"),
    }
    before = table_counts(engine)
    summary = ingest_uploads([(name, data) for name, (data, _) in files.items()])
    assert (summary.ingested, summary.replaced, summary.chunks_added) == (0, 0, 0)
    got = reasons(summary)
    for name, (_, expected) in files.items():
        assert expected in got[name], (name, got[name])
    assert table_counts(engine) == before


def test_an_upload_over_a_configured_small_limit_is_refused(clean_db, engine, settings):
    small = settings.model_copy(update={"max_upload_bytes": 1_000})
    before = table_counts(engine)
    summary = ingest_uploads([("notes.txt", b"word " * 400)], settings=small)
    assert summary.ingested == 0 and "over the" in reasons(summary)["notes.txt"]
    assert table_counts(engine) == before
    assert parse_file("notes.txt", b"word " * 100, max_bytes=1_000).documents  # 500 bytes: under it


@pytest.mark.slow  # builds and parses a 50,000-deep document
def test_html_nested_50000_deep_is_read_without_recursion(clean_db):
    depth = 50_000
    page = "<div>" * depth + "<p>deep text</p><script>hidden()</script>" + "</div>" * depth
    (document,) = parse_file("deep.html", page.encode()).documents
    assert document.text == "deep text"
    assert ingest_uploads([("deep.html", page.encode())]).ingested == 1


def test_jsonl_bad_lines_are_reported_by_line_number_and_good_lines_ingested(clean_db, engine):
    lines = [
        json.dumps({"_id": "good-1", "title": "Encoders", "text": "SRVO-062 means the encoder battery ran low."}),
        "{not json",
        json.dumps({"_id": "no-text"}),
        '{"_id": "nul", "text": "before\\u0000after"}',
        '{"_id": "surrogate", "text": "\\ud800 alone"}',
        '{"_id": "nan", "text": "fine", "metadata": {"score": NaN}}',
        "[" * 100_000,
        json.dumps({"_id": "x" * 3_000, "text": "id too long"}),
        json.dumps({"_id": "good-2", "text": f"grease {DROP}", "metadata": {"note": DROP}}),
        json.dumps({"_id": "good-1", "text": "a second good-1"}),
        "",
        json.dumps(["an", "array"]),
    ]
    summary = ingest_uploads([("beir.jsonl", "\r\n".join(lines).encode())])
    expected = {
        2: "invalid JSON", 3: 'missing "text"', 4: '"text" contains a NUL character', 5: "unpaired surrogate",
        6: '"metadata" contains the number nan', 7: "nested too deeply", 8: '"_id" is 3,000 bytes long',
        10: "duplicate _id 'good-1' (first used on line 1)", 12: "expected a JSON object, got an array",
    }
    got = reasons(summary)
    assert set(got) == {f"beir.jsonl:{n}" for n in expected}
    for line, says in expected.items():
        assert got[f"beir.jsonl:{line}"].startswith(f"line {line}: ") and says in got[f"beir.jsonl:{line}"]
    assert summary.ingested == 2
    assert {d.external_id for d in list_documents()} == {"good-1", "good-2"}
    with engine.connect() as conn:
        stored = conn.exec_driver_sql("SELECT metadata ->> 'note' FROM documents WHERE external_id = 'good-2'").scalar()
    assert stored == DROP


def test_pdf_text_with_nul_characters_is_stored_without_them(clean_db):
    (document,) = parse_file("nul.pdf", pdf(b"BT /F1 12 Tf 72 720 Td (battery\\000 pack) Tj ET")).documents
    assert "\x00" not in document.text and "battery" in document.text
    assert ingest_uploads([("nul.pdf", pdf(b"BT /F1 12 Tf 72 720 Td (battery\\000 pack) Tj ET"))]).ingested == 1


def test_a_10000_letter_word_does_not_fail_the_ingest(clean_db):
    word = "acgt" * 2_500  # a sequence, a hash, a base64 run: one "term" far past the index row limit
    summary = ingest_uploads([("genome.md", f"# Genome\nThe battery sequence {word} ends here.".encode())])
    assert summary.ingested == 1 and not summary.skipped
    hits = search("battery sequence", default_params(mode="bm25")).hits
    assert [h.external_id for h in hits] == ["genome.md"]


def test_the_cli_reports_a_file_name_that_is_not_utf8(clean_db, tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"undecodable name")  # Latin-1 bytes in the name
    (folder / "ok.md").write_text("# Fine\nA readable document.")
    result = CliRunner().invoke(app, ["ingest", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["ingested"] == 1
    (skipped,) = summary["skipped"]
    assert "file name contains an unpaired surrogate" in skipped["reason"]


# --- queries ------------------------------------------------------------------------------------------


@pytest.fixture()
def corpus(clean_db, engine):  # type: ignore[no-untyped-def]
    assert ingest_uploads([(name, body.encode()) for name, body in DOCS.items()]).ingested == len(DOCS)
    return table_counts(engine)


@pytest.mark.parametrize("query, says", [
    ("", "the query is empty"),
    ("   \t\n ", "the query is empty"),
    ("\x00\x01\x1b\x7f", "the query is empty"),  # control characters only
    ("battery " * 12_800, "the limit is 2,000"),  # 100 KB
])
def test_unusable_queries_are_refused_before_anything_runs(corpus, engine, query, says):
    for mode in ("bm25", "hybrid"):
        with pytest.raises(InputError, match=says):
            search(query, default_params(mode=mode))
    from tests.services.test_pipeline import ScriptedBackend

    with pytest.raises(InputError, match=says):
        pipeline.run(query, "minimal", DEFAULT_PROFILE, backend=ScriptedBackend())
    assert table_counts(engine) == corpus  # no run was stored


@pytest.mark.parametrize("query, searched", [
    ("🔋 battery pack 🤖", "🔋 battery pack 🤖"),
    ("battery\x00pack\x1b[31m", "battery pack [31m"),
    ("👩‍👩‍👧 remaster the axis", "👩‍👩‍👧 remaster the axis"),
])
def test_emoji_and_control_characters_still_search(corpus, query, searched):
    for mode in ("bm25", "hybrid"):
        result = search(query, default_params(mode=mode))
        assert result.query == searched
        assert result.hits[0].external_id == "srvo-062.md"


def test_a_question_full_of_sql_is_answered_and_stored_verbatim(corpus, engine):
    from tests.services.test_pipeline import ScriptedBackend

    query = f"battery {DROP} {SQL_METACHARACTERS[2]}"
    run = pipeline.run(query, "minimal", DEFAULT_PROFILE, backend=ScriptedBackend())
    assert load_run(run.run_id).query == query
    after = table_counts(engine)
    assert after["runs"] == corpus["runs"] + 1 and after["documents"] == corpus["documents"]


# --- reviews and export filters ----------------------------------------------------------------------------


def test_review_text_with_nul_is_refused_and_nothing_is_written(clean_db, engine):
    (run_id,) = save_runs(1)
    before = table_counts(engine)
    for fields in ({"comment": "ok\x00"}, {"reviewer": "ana\x00"}, {"comment": "\udce9"},
                   {"action": "correct", "corrected_answer": "fixed\x00"}):
        call = {"action": "approve", "reviewer": "ana", "comment": "", **fields}
        with pytest.raises(InputError, match="contains"):
            submit_review(run_id, expected_version=0, **call)
    assert table_counts(engine) == before and review_history(run_id) == []


def test_export_filters_with_sql_metacharacters_match_literally(clean_db):
    run_ids = save_runs(2)
    submit_review(run_ids[0], expected_version=0, action="approve", reviewer=DROP, comment=DROP)
    assert [r["run_id"] for r in export_records(ExportFilters(reviewer=DROP))] == [run_ids[0]]
    for hostile in SQL_METACHARACTERS:
        if hostile == DROP:
            continue
        assert export_records(ExportFilters(reviewer=hostile)) == []
        assert export_records(ExportFilters(profile=hostile, collection=hostile)) == []
    with pytest.raises(InputError, match="unknown status"):
        ExportFilters(statuses=(DROP,))
    with pytest.raises(InputError, match="unknown verdict"):
        ExportFilters(verdict=DROP)
    with pytest.raises(InputError, match="reviewer filter contains a NUL"):
        ExportFilters(reviewer="ana\x00")
    (record,) = export_records(ExportFilters(verdict="approved"))
    assert record["review_comment"] == DROP and record["review_history"][0]["reviewer"] == DROP
