"""Ingestion into the real store: BM25 bookkeeping stays exact, re-ingest is idempotent,
changed files replace their chunks, a failed batch changes nothing, bad files are reported."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

import services.corpus.indexing as indexing_module
from services.corpus.extract import SourceDocument
from services.corpus.indexing import indexed_text
from services.corpus.ingest import ingest_documents, ingest_paths, ingest_uploads
from services.corpus.stats import DEMO_DIR, corpus_stats, delete_document, list_documents, load_demo_corpus_if_empty
from services.errors import InputError, NotFoundError
from services.retrieval import embedding
from services.retrieval.search import default_params, search
from services.retrieval.text import term_counts

# --- helpers ---------------------------------------------------------------------------

_LONG_SENTENCES = " ".join(
    f"Step {i} of the overhaul checks {topic} on the {part} before the crew signs the log."
    for i, (topic, part) in enumerate(
        (t, p) for t in ("torque", "alignment", "corrosion", "leakage", "vibration", "wear")
        for p in ("gearbox", "shaft", "bearing", "housing", "coupling")
    )
)


def _write_corpus(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "guide.md").write_text(
        "# Pump maintenance\n\nThe centrifugal pump needs its seals inspected every month.\n\n"
        "Replace worn gaskets before restarting the pump.\n", encoding="utf-8")
    (root / "notes.txt").write_text(
        "Quarterly budget notes\n\nThe marketing budget grew by twelve percent this quarter.\n", encoding="utf-8")
    (root / "page.html").write_text(
        "<html><head><title>Glacier retreat</title><script>var hidden = 1;</script></head>"
        "<body><h1>Glacier retreat</h1><p>Alpine glaciers lost a tenth of their volume.</p></body></html>",
        encoding="utf-8")
    (root / "faq.jsonl").write_text(
        json.dumps({"_id": "faq-1", "title": "Password reset", "text": "Reset a forgotten password from the login page."})
        + "\n" + json.dumps({"_id": "faq-2", "text": "Invoices are emailed on the first business day."}) + "\n",
        encoding="utf-8")
    (root / "long.md").write_text("# Overhaul checklist\n\n" + _LONG_SENTENCES + "\n", encoding="utf-8")
    return root


EXPECTED_IDS = {"guide.md", "notes.txt", "page.html", "faq-1", "faq-2", "long.md"}


def _collection_id(conn, name: str) -> int:  # type: ignore[no-untyped-def]
    return conn.execute(text("SELECT id FROM collections WHERE name = :n"), {"n": name}).scalar_one()


def assert_index_exact(engine, collection: str = "default") -> None:  # type: ignore[no-untyped-def]
    """Stats, df and every posting equal what the chunk texts in the store imply."""
    with engine.connect() as conn:
        cid = _collection_id(conn, collection)
        stats = conn.execute(text("SELECT n_chunks, total_dl FROM bm25_stats WHERE collection_id = :cid"),
                             {"cid": cid}).first()
        n_chunks, total_dl = stats if stats is not None else (0, 0)
        assert n_chunks == conn.execute(text("SELECT count(*) FROM chunks WHERE collection_id = :cid"),
                                        {"cid": cid}).scalar_one()
        assert total_dl == conn.execute(text(
            "SELECT coalesce(sum(dl), 0) FROM (SELECT DISTINCT p.chunk_id, p.dl FROM bm25_postings p "
            "JOIN chunks c ON c.id = p.chunk_id WHERE c.collection_id = :cid) lens"), {"cid": cid}).scalar_one()
        wrong_df = conn.execute(text(
            "SELECT t.term, t.df, count(DISTINCT p.chunk_id) AS actual FROM bm25_terms t "
            "LEFT JOIN bm25_postings p ON p.term_id = t.id WHERE t.collection_id = :cid "
            "GROUP BY t.id, t.term, t.df HAVING t.df <> count(DISTINCT p.chunk_id)"), {"cid": cid}).all()
        assert wrong_df == []
        # MaxScore bounds a term by its (tf, shortest chunk) pairs: each posting's tf must have a
        # pair whose chunk is no longer (after a removal a pair may be looser, never tighter).
        too_tight = conn.execute(text(
            "SELECT t.term, p.tf, p.dl FROM bm25_terms t "
            "JOIN bm25_postings p ON p.term_id = t.id WHERE t.collection_id = :cid "
            "AND NOT EXISTS (SELECT FROM unnest(t.impact_tf, t.impact_dl) AS pair(tf, dl) "
            "                WHERE pair.tf = p.tf AND pair.dl <= p.dl)"), {"cid": cid}).all()
        assert too_tight == []
        assert conn.execute(text(
            "SELECT count(*) FROM bm25_postings p JOIN bm25_terms t ON t.id = p.term_id "
            "JOIN chunks c ON c.id = p.chunk_id WHERE t.collection_id <> c.collection_id")).scalar_one() == 0
        chunks = conn.execute(text(
            "SELECT c.id, d.title, c.text FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE c.collection_id = :cid"), {"cid": cid}).all()
        postings = conn.execute(text(
            "SELECT p.chunk_id, t.term, p.tf, p.dl FROM bm25_postings p JOIN bm25_terms t ON t.id = p.term_id "
            "WHERE t.collection_id = :cid"), {"cid": cid}).all()
    expected, expected_dl = set(), 0
    for chunk_id, title, body in chunks:
        counts, dl = term_counts(indexed_text(title, body))
        expected_dl += dl
        expected |= {(chunk_id, term, tf, dl) for term, tf in counts.items()}
    assert {tuple(p) for p in postings} == expected
    assert total_dl == expected_dl


_SNAPSHOT_SQL = {
    "collections": "SELECT id, name FROM collections ORDER BY id",
    "documents": "SELECT id, collection_id, external_id, title, content_hash FROM documents ORDER BY id",
    "chunks": "SELECT id, document_id, collection_id, ordinal, text FROM chunks ORDER BY id",
    "postings": "SELECT term_id, chunk_id, tf, dl FROM bm25_postings ORDER BY term_id, chunk_id",
    "terms": "SELECT id, collection_id, term, df, impact_tf, impact_dl FROM bm25_terms ORDER BY id",
    "stats": "SELECT collection_id, n_chunks, total_dl FROM bm25_stats ORDER BY collection_id",
}


def snapshot(engine) -> dict[str, list[tuple]]:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return {name: [tuple(r) for r in conn.execute(text(sql))] for name, sql in _SNAPSHOT_SQL.items()}


def _chunks_of(engine, external_id: str, collection: str = "default") -> list[tuple[int, str]]:  # type: ignore[no-untyped-def]
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(
            "SELECT c.id, c.text FROM chunks c JOIN documents d ON d.id = c.document_id "
            "JOIN collections k ON k.id = d.collection_id WHERE k.name = :name AND d.external_id = :eid "
            "ORDER BY c.ordinal"), {"name": collection, "eid": external_id})]


def _fail_while_indexing(monkeypatch) -> list[int]:  # type: ignore[no-untyped-def]
    """Fail the batch's last write step, after its documents and chunks rows were inserted;
    returns how many of the batch's chunk rows existed (uncommitted) when it failed."""
    written: list[int] = []

    def flaky(session, collection_id, chunk_ids, texts):  # type: ignore[no-untyped-def]
        written.append(session.scalar(text("SELECT count(*) FROM chunks WHERE id = ANY(:ids)"),
                                      {"ids": list(chunk_ids)}))
        raise RuntimeError("injected failure while indexing")

    monkeypatch.setattr(indexing_module, "index_chunks", flaky)
    return written


def _doc(external_id: str, body: str, title: str = "") -> SourceDocument:
    return SourceDocument(external_id, title or external_id, body, f"{external_id}.txt")


# --- tests -----------------------------------------------------------------------------

def test_ingest_every_format_keeps_counts_and_bm25_statistics_exact(clean_db, engine, tmp_path, settings):  # type: ignore[no-untyped-def]
    summary = ingest_paths([_write_corpus(tmp_path / "docs")])
    assert summary.skipped == []
    assert (summary.ingested, summary.replaced, summary.unchanged) == (6, 0, 0)
    with engine.connect() as conn:
        docs = dict(conn.execute(text(
            "SELECT d.external_id, d.title FROM documents d JOIN collections k ON k.id = d.collection_id "
            "WHERE k.name = 'default'")).all())
        n_chunks = conn.execute(text(
            "SELECT count(*) FROM chunks c JOIN collections k ON k.id = c.collection_id WHERE k.name = 'default'"
        )).scalar_one()
    assert set(docs) == EXPECTED_IDS
    assert docs["guide.md"] == "Pump maintenance" and docs["page.html"] == "Glacier retreat"
    assert docs["faq-1"] == "Password reset" and docs["notes.txt"] == "Quarterly budget notes"
    assert summary.chunks_added == n_chunks
    assert len(_chunks_of(engine, "long.md")) > 1, "the long document should span several chunks"
    assert_index_exact(engine)

    # what is embedded is the title plus the chunk text
    with engine.connect() as conn:
        title, body, stored = conn.execute(text(
            "SELECT d.title, c.text, c.embedding FROM chunks c JOIN documents d ON d.id = c.document_id "
            "WHERE d.external_id = 'faq-1'")).one()
    again = embedding.encode(settings.embedding_model, [indexed_text(title, body)])[0]
    stored = np.asarray(stored.to_numpy() if hasattr(stored, "to_numpy") else stored, dtype=np.float64)
    assert float(np.dot(stored, again)) == pytest.approx(1.0, abs=1e-5)


def test_reingesting_identical_content_changes_nothing(clean_db, engine, tmp_path):  # type: ignore[no-untyped-def]
    root = _write_corpus(tmp_path / "docs")
    ingest_paths([root])
    before = snapshot(engine)
    summary = ingest_paths([root])
    assert (summary.ingested, summary.replaced, summary.unchanged, summary.chunks_added) == (0, 0, 6, 0)
    assert {o["status"] for o in summary.outcomes} == {"unchanged"}
    assert snapshot(engine) == before


def test_changed_file_replaces_its_old_chunks(clean_db, engine, tmp_path):  # type: ignore[no-untyped-def]
    root = _write_corpus(tmp_path / "docs")
    ingest_paths([root])
    old_guide = {cid for cid, _ in _chunks_of(engine, "guide.md")}
    old_long = {cid for cid, _ in _chunks_of(engine, "long.md")}
    untouched = _chunks_of(engine, "notes.txt")

    (root / "guide.md").write_text("# Pump maintenance\n\nImpeller cavitation erodes the vanes quickly.\n")
    (root / "long.md").write_text("# Overhaul checklist\n\nOnly the gearbox torque is checked now.\n")
    summary = ingest_paths([root])

    assert (summary.ingested, summary.replaced, summary.unchanged) == (0, 2, 4)
    new_guide = _chunks_of(engine, "guide.md")
    new_long = _chunks_of(engine, "long.md")
    assert len(new_guide) == 1 and "Impeller cavitation erodes the vanes" in new_guide[0][1]
    assert "centrifugal" not in new_guide[0][1]
    assert len(new_long) == 1 and "Only the gearbox torque" in new_long[0][1]
    assert not ({cid for cid, _ in new_guide} | {cid for cid, _ in new_long}) & (old_guide | old_long)
    with engine.connect() as conn:
        leftovers = conn.execute(text("SELECT count(*) FROM chunks WHERE id = ANY(:ids)"),
                                 {"ids": sorted(old_guide | old_long)}).scalar_one()
    assert leftovers == 0
    assert _chunks_of(engine, "notes.txt") == untouched
    assert_index_exact(engine)
    assert [h.external_id for h in search("centrifugal", default_params(mode="bm25")).hits] == []
    assert search("cavitation", default_params(mode="bm25")).hits[0].external_id == "guide.md"


@pytest.mark.parametrize("collection", ["default", "fresh-collection"])
def test_failure_mid_batch_leaves_the_corpus_as_it_was(clean_db, engine, monkeypatch, collection):  # type: ignore[no-untyped-def]
    ingest_documents([_doc("kept", "A document that was here before the failing ingest.")])
    before = snapshot(engine)
    written = _fail_while_indexing(monkeypatch)
    batch = [_doc("first", "Solar panels convert light."), _doc("second", "Wind turbines convert motion."),
             _doc("third", "Dams convert falling water.")]
    with pytest.raises(RuntimeError, match="injected failure"):
        ingest_documents(batch, collection=collection)
    assert written == [3], "the batch's chunk rows should have been written before the failure"
    assert snapshot(engine) == before
    assert_index_exact(engine)


def test_failed_replacement_keeps_the_old_version(clean_db, engine, monkeypatch):  # type: ignore[no-untyped-def]
    ingest_documents([_doc("manual", "Version one says to open valve A first."), _doc("other", "Unrelated text.")])
    old_manual = _chunks_of(engine, "manual")
    before = snapshot(engine)
    written = _fail_while_indexing(monkeypatch)
    with pytest.raises(RuntimeError, match="injected failure"):
        ingest_documents([_doc("manual", "Version two says to open valve B first."),
                          _doc("extra", "A new document."), _doc("extra-2", "Another new document.")])
    assert written == [3]
    assert _chunks_of(engine, "manual") == old_manual
    assert snapshot(engine) == before
    assert_index_exact(engine)
    monkeypatch.undo()
    assert search("valve", default_params(mode="bm25")).hits[0].text == "Version one says to open valve A first."


def test_each_terms_bound_is_its_shortest_chunk_for_every_tf_across_batches(clean_db, engine):  # type: ignore[no-untyped-def]
    # A second batch's pairs are merged into the first's: a tf seen again in a shorter chunk
    # takes that chunk's length, a new tf is added, a longer chunk changes nothing.
    ingest_documents([_doc("long", "Pump pump pump: the pump manual covers valves, seals, bearings and the impeller."),
                      _doc("short", "The pump hums.")])
    ingest_documents([_doc("shorter", "Pump pump pump pump."), _doc("longer", "A pump, and " + "filler words " * 20)])
    with engine.connect() as conn:
        stored = {term: dict(zip(tfs, dls, strict=True)) for term, tfs, dls in conn.execute(text(
            "SELECT t.term, t.impact_tf, t.impact_dl FROM bm25_terms t JOIN collections k ON k.id = t.collection_id "
            "WHERE k.name = 'default'")).all()}
        cid = _collection_id(conn, "default")
        postings = conn.execute(text("SELECT t.term, p.tf, p.dl FROM bm25_postings p JOIN bm25_terms t ON t.id = p.term_id "
                                     "WHERE p.collection_id = :cid"), {"cid": cid}).all()
        lengths = dict(conn.execute(text(
            "SELECT DISTINCT d.external_id, p.dl FROM bm25_postings p JOIN chunks c ON c.id = p.chunk_id "
            "JOIN documents d ON d.id = c.document_id WHERE p.collection_id = :cid"), {"cid": cid}).all())
    expected: dict[str, dict[int, int]] = {}
    for term, tf, dl in postings:
        expected.setdefault(term, {})[tf] = min(dl, expected.get(term, {}).get(tf, dl))
    assert stored == expected
    assert stored["pump"] == {1: lengths["short"], 4: lengths["shorter"]} and lengths["shorter"] < lengths["long"]


def test_concurrent_ingests_into_one_collection_keep_df_exact(clean_db, engine):  # type: ignore[no-untyped-def]
    batches = [[_doc(f"{side}-{i}", f"Shared words about pumps and valves, plus {side} detail number {i}.")
                for i in range(4)] for side in ("left", "right")]
    errors: list[BaseException] = []

    def run(batch: list[SourceDocument]) -> None:
        try:
            ingest_documents(batch, collection="concurrent")
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(batch,)) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert corpus_stats("concurrent").documents == 8
    assert_index_exact(engine, "concurrent")
    with engine.connect() as conn:
        assert conn.execute(text(
            "SELECT t.df FROM bm25_terms t JOIN collections k ON k.id = t.collection_id "
            "WHERE k.name = 'concurrent' AND t.term = 'pump'")).scalar_one() == 8


def test_uploads_are_ingested_and_progress_is_reported(clean_db):  # type: ignore[no-untyped-def]
    events = []
    summary = ingest_uploads(
        [("a.md", b"# Alpha\n\nFirst upload."), ("b.txt", b"Second upload."), ("c.exe", b"MZ")],
        on_progress=events.append,
    )
    assert summary.ingested == 2 and [s.source for s in summary.skipped] == ["c.exe"]
    assert events and events[-1].documents_done == events[-1].documents_total == 2
    assert events[-1].chunks_done == summary.chunks_added == 2
    assert [d.external_id for d in list_documents()] == ["a.md", "b.txt"]


def test_bad_files_are_reported_and_good_ones_ingested(clean_db, engine, tmp_path):  # type: ignore[no-untyped-def]
    root = tmp_path / "mixed"
    root.mkdir()
    (root / "blob.txt").write_bytes(b"\x00\x01\x02binary\xff\xfe")
    (root / "latin1.txt").write_bytes("Café crème brûlée".encode("latin-1"))
    (root / "empty.md").write_bytes(b"")
    (root / "report.docx").write_bytes(b"PK\x03\x04 a word document")
    (root / "good.md").write_text("# Good\n\nThis file is fine.\n", encoding="utf-8")
    (root / "records.jsonl").write_text(
        json.dumps({"_id": "r1", "text": "First record."}) + "\n"
        + '{"_id": "r2", "text": "broken\n'
        + json.dumps({"_id": "r3", "text": "Third record."}) + "\n"
        + json.dumps({"_id": "r4"}) + "\n", encoding="utf-8")

    with pytest.raises(InputError, match="no such file or directory: .*missing.md; nothing was ingested"):
        ingest_paths([root, tmp_path / "missing.md"])  # a path given by name must exist
    summary = ingest_paths([root])

    reasons = {s.source: s.reason for s in summary.skipped}
    assert set(reasons) == {"blob.txt", "latin1.txt", "empty.md", "report.docx", "records.jsonl:2",
                            "records.jsonl:4"}
    assert "binary" in reasons["blob.txt"]
    assert "not valid UTF-8" in reasons["latin1.txt"]
    assert reasons["empty.md"] == "empty file"
    assert "unsupported file type '.docx'" in reasons["report.docx"]
    assert reasons["records.jsonl:2"].startswith("line 2: invalid JSON")
    assert reasons["records.jsonl:4"].startswith("line 4:") and '"text"' in reasons["records.jsonl:4"]
    assert summary.ingested == 3
    assert {o["external_id"] for o in summary.outcomes if o["status"] == "ingested"} == {"good.md", "r1", "r3"}
    assert corpus_stats().documents == 3
    assert_index_exact(engine)


def test_delete_document_keeps_statistics_exact(clean_db, engine, tmp_path):  # type: ignore[no-untyped-def]
    ingest_paths([_write_corpus(tmp_path / "docs")])
    long_chunks = {cid for cid, _ in _chunks_of(engine, "long.md")}
    before = corpus_stats()

    delete_document("long.md")

    after = corpus_stats()
    assert (after.documents, after.chunks) == (before.documents - 1, before.chunks - len(long_chunks))
    assert after.terms < before.terms  # terms only the long document had no longer count
    assert _chunks_of(engine, "long.md") == []
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM bm25_postings WHERE chunk_id = ANY(:ids)"),
                            {"ids": sorted(long_chunks)}).scalar_one() == 0
    assert_index_exact(engine)
    assert search("overhaul", default_params(mode="bm25")).hits == ()

    for external_id in EXPECTED_IDS - {"long.md"}:
        delete_document(external_id)
    assert_index_exact(engine)
    with engine.connect() as conn:
        assert conn.execute(text(
            "SELECT n_chunks, total_dl FROM bm25_stats s JOIN collections k ON k.id = s.collection_id "
            "WHERE k.name = 'default'")).one() == (0, 0)


def test_delete_missing_document_raises_not_found(clean_db):  # type: ignore[no-untyped-def]
    ingest_documents([_doc("present", "Some text.")])
    with pytest.raises(NotFoundError, match="no document 'absent' in collection 'default'"):
        delete_document("absent")
    with pytest.raises(NotFoundError, match="collection 'nowhere'"):
        delete_document("present", collection="nowhere")
    assert corpus_stats().documents == 1


@pytest.mark.slow  # embeds and writes the whole demo handbook
def test_demo_corpus_loads_only_into_an_empty_store(clean_db, engine):  # type: ignore[no-untyped-def]
    demo_files = sorted(p.name for p in (DEMO_DIR / "corpus").iterdir() if not p.name.startswith("."))
    summary = load_demo_corpus_if_empty()
    assert summary is not None
    assert summary.skipped == []
    assert summary.ingested == len(demo_files) == corpus_stats().documents
    assert summary.chunks_added == corpus_stats().chunks
    assert_index_exact(engine)
    before = snapshot(engine)
    assert load_demo_corpus_if_empty() is None
    assert snapshot(engine) == before
