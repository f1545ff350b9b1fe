"""The Corpus page: uploads (page helper and AppTest), statistics, the documents list, deletion
by admins only; on the real store and model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from services.auth import CurrentUser
from services.corpus.ingest import ingest_paths
from services.corpus.progress import ProgressMeter
from services.corpus.stats import corpus_stats, list_documents
from services.errors import PermissionDeniedError
from tests.pages._support import frame_by_first_column, open_page

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
OIDC_SECRETS = {"auth": {"client_id": "workbench-test"}, "workbench": {"admins": ["alice@x.org"]}}


@pytest.fixture()
def corpus_page(load_page):  # type: ignore[no-untyped-def]
    return load_page("corpus")


@pytest.fixture()
def two_documents(clean_db, tmp_path: Path) -> list[str]:  # type: ignore[no-untyped-def]
    (tmp_path / "alarm.md").write_text("# SRVO-062 Encoder backup lost\nReplace the battery pack, then remaster J2.")
    (tmp_path / "grease.md").write_text("# Reducer grease\nReplace J2 reducer grease every 20,000 hours.")
    assert ingest_paths([tmp_path]).ingested == 2
    return ["alarm.md", "grease.md"]


def _open_page(at: AppTest) -> AppTest:
    return open_page(at, "corpus", "Corpus")


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_upload_helper_reports_every_good_and_bad_file(clean_db, corpus_page, settings):  # type: ignore[no-untyped-def]
    from services.retrieval import embedding
    embedding.encode(settings.embedding_model, ["warm up"])  # so the ingest below ends well inside the cache TTL
    assert corpus_page.cached_corpus_stats().documents == 0  # primes the cache the helper must clear
    jsonl = (json.dumps({"_id": "j1", "title": "Tides", "text": "The moon pulls the sea."}) + "\n{not json\n").encode()
    files = [
        ("good.md", b"# Encoder alarms\nSRVO-062 means the encoder backup battery ran low."),
        ("notes.txt", b"Grease the J2 reducer every 20,000 hours."),
        ("blob.txt", bytes(range(256))),
        ("empty.md", b""),
        ("latin1.txt", "café crème".encode("latin-1")),
        ("report.docx", b"PK\x03\x04 a zip container"),
        ("beir.jsonl", jsonl),
    ]
    seen = []
    summary = corpus_page.ingest_files(files, on_progress=seen.append)

    rows = {r["file"]: r for r in corpus_page.outcomes_frame(summary).to_dict("records")}
    assert set(rows) == {"good.md", "notes.txt", "blob.txt", "empty.md", "latin1.txt", "report.docx",
                         "beir.jsonl", "beir.jsonl:2"}
    assert {f: rows[f]["status"] for f in ("good.md", "notes.txt", "beir.jsonl")} == dict.fromkeys(
        ("good.md", "notes.txt", "beir.jsonl"), "ingested")
    assert rows["beir.jsonl"]["document"] == "j1" and rows["good.md"]["chunks"] >= 1
    assert "binary content" in rows["blob.txt"]["reason"]
    assert rows["empty.md"]["reason"] == "empty file"
    assert "not valid UTF-8" in rows["latin1.txt"]["reason"]
    assert "unsupported file type '.docx'" in rows["report.docx"]["reason"]
    assert rows["beir.jsonl:2"]["reason"].startswith("line 2: invalid JSON")
    for skipped in ("blob.txt", "empty.md", "latin1.txt", "report.docx", "beir.jsonl:2"):
        assert rows[skipped]["status"] == "skipped" and rows[skipped]["document"] == ""
    assert corpus_page.summary_line(summary) == "3 ingested, 0 replaced, 0 unchanged, 5 skipped; 3 chunks added"
    assert seen and seen[-1].documents_total == 3 and seen[-1].chunks_done == 3
    assert seen[-1].documents_expected == 8  # 6 files and a JSONL file of two lines, counted before reading
    fraction, text = corpus_page.progress_state(seen[-1], ProgressMeter())
    assert fraction == 1.0 and text.startswith("3 of ~3 documents · 3 chunks embedded · … chunks/s · ETA 0s")
    assert {d.external_id: d.chunks for d in list_documents()} == {"good.md": 1, "notes.txt": 1, "j1": 1}
    assert corpus_page.cached_corpus_stats().documents == 3  # the stale cached count was cleared

    again = corpus_page.ingest_files([("notes.txt", b"Grease the J2 reducer every 20,000 hours."),
                                      ("good.md", b"# Encoder alarms\nSRVO-062: replace the battery, remaster.")])
    statuses = {r["file"]: r["status"] for r in corpus_page.outcomes_frame(again).to_dict("records")}
    assert statuses == {"notes.txt": "unchanged", "good.md": "replaced"}


def test_progress_before_the_total_is_known_never_shows_done(corpus_page):  # type: ignore[no-untyped-def]
    from services.corpus.ingest import IngestProgress

    clock = iter([0.0, 2.0])
    meter = ProgressMeter(clock=lambda: next(clock))
    corpus_page.progress_state(IngestProgress(0, None, 0, "", 0, 32, 0), meter)
    fraction, text = corpus_page.progress_state(IngestProgress(40, None, 90, "big.jsonl", 100, 32, 8), meter)
    assert fraction == 0.99  # more documents than expected, and not done yet
    assert text == ("40 of ~32 documents · 100 chunks embedded · 50.0 chunks/s · ETA 0s · "
                    "8 skipped (already ingested)")
    assert corpus_page.progress_state(IngestProgress(0, 0, 0, ""), ProgressMeter())[0] == 0.0


def test_page_caption_counts_the_page_not_the_matches(corpus_page):  # type: ignore[no-untyped-def]
    assert corpus_page.page_caption(page=0, shown=100, more=True, total=1234, filtered=False) == "documents 1–100 of 1,234"
    assert corpus_page.page_caption(page=2, shown=7, more=False, total=207, filtered=False) == "documents 201–207 of 207"
    assert corpus_page.page_caption(page=0, shown=100, more=True, total=9, filtered=True) == (
        "documents 1–100 matching the filter (more on the next page)")
    assert corpus_page.page_caption(page=0, shown=0, more=False, total=9, filtered=True) == "no documents match the filter"


def test_uploading_through_the_page_shows_outcomes_stats_and_the_document(clean_db):  # type: ignore[no-untyped-def]
    at = _open_page(AppTest.from_file(APP, default_timeout=180))
    assert at.button(key="corpus.ingest").disabled  # nothing uploaded yet
    assert _metrics(at)["Documents"] == "0"
    at.file_uploader(key="corpus.uploads").set_value([
        ("alarm.md", b"# SRVO-062 Encoder backup lost\nReplace the battery pack, then remaster J2.", "text/markdown"),
        ("empty.txt", b"", "text/plain"),
    ])
    at.run()
    at.button(key="corpus.ingest").click().run()
    assert not at.exception, at.exception

    outcomes = frame_by_first_column(at, "file")
    assert dict(zip(outcomes["file"], outcomes["status"])) == {"alarm.md": "ingested", "empty.txt": "skipped"}
    assert outcomes.set_index("file").loc["empty.txt", "reason"] == "empty file"
    assert at.get("progress")[0].proto.value == 100
    assert any(t.value.startswith("Last ingest: 1 ingested, 0 replaced, 0 unchanged, 1 skipped") for t in at.text)
    stats = corpus_stats()
    assert _metrics(at) == {"Documents": "1", "Chunks": str(stats.chunks), "Terms": f"{stats.terms:,}",
                            "Avg chunk tokens": f"{stats.avg_chunk_tokens:.1f}"}
    documents = frame_by_first_column(at, "external id")
    assert documents["external id"].tolist() == ["alarm.md"]
    assert documents["title"].tolist() == ["SRVO-062 Encoder backup lost"] and documents["chunks"].tolist() == [1]
    histogram = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert histogram["data"][0]["type"] == "histogram" and histogram["data"][0]["x"] == [1]


def test_documents_list_shows_chunk_counts_and_filters(two_documents):  # type: ignore[no-untyped-def]
    at = _open_page(AppTest.from_file(APP, default_timeout=180))
    frame = frame_by_first_column(at, "external id")
    expected = {d.external_id: (d.chunks, d.tokens) for d in list_documents()}
    assert sorted(frame["external id"]) == two_documents
    assert {r["external id"]: (r["chunks"], r["tokens"]) for r in frame.to_dict("records")} == expected
    assert all(chunks >= 1 for chunks, _ in expected.values())
    assert "documents 1–2 of 2" in [c.value for c in at.caption]
    at.text_input(key="corpus.filter").input("GREASE").run()  # filtered by the store: id or title, any case
    assert frame_by_first_column(at, "external id")["external id"].tolist() == ["grease.md"]
    assert "documents 1–1 matching the filter" in [c.value for c in at.caption]


def test_admin_deletes_a_document_after_confirming(two_documents):  # type: ignore[no-untyped-def]
    at = _open_page(AppTest.from_file(APP, default_timeout=180))  # local mode: everyone is admin
    assert _metrics(at)["Documents"] == "2"
    at.selectbox(key="corpus.delete_target").select("alarm.md")
    at.button(key="corpus.delete").click().run()  # not confirmed yet: nothing happens
    assert [w.value for w in at.warning] == ["Tick the box to confirm the deletion first."]
    assert [d.external_id for d in list_documents()] == two_documents

    at.checkbox(key="corpus.delete_confirm").check()
    at.button(key="corpus.delete").click().run()
    assert not at.exception and not at.error
    assert [d.external_id for d in list_documents()] == ["grease.md"]
    assert at.success[0].value == "Deleted this document:" and "alarm.md" in [t.value for t in at.text]
    assert frame_by_first_column(at, "external id")["external id"].tolist() == ["grease.md"]
    assert _metrics(at)["Documents"] == "1"  # the cached statistics were cleared
    assert at.checkbox(key="corpus.delete_confirm").value is False  # the next deletion needs a new confirmation


def test_non_admin_cannot_delete(two_documents, corpus_page):  # type: ignore[no-untyped-def]
    at = AppTest.from_file(APP, default_timeout=180)
    at.secrets.update(OIDC_SECRETS)
    at.user = {"is_logged_in": True, "email": "bob@x.org"}
    _open_page(at)
    assert at.button(key="corpus.delete").disabled and at.checkbox(key="corpus.delete_confirm").disabled
    assert "Only administrators can delete documents; ask an admin to add you to the admin list." in [
        c.value for c in at.caption]

    bob = CurrentUser(name="bob@x.org", email="bob@x.org", signed_in=True, may_review=True, is_admin=False)
    with pytest.raises(PermissionDeniedError, match="only administrators may delete documents"):
        corpus_page.delete_as(bob, "alarm.md")
    assert [d.external_id for d in list_documents()] == two_documents


def test_delete_is_checked_against_the_user_at_click_time(two_documents):  # type: ignore[no-untyped-def]
    """A page rendered while the user was an admin must not delete once they no longer are."""
    at = _open_page(AppTest.from_file(APP, default_timeout=180))
    at.checkbox(key="corpus.delete_confirm").check()
    at.secrets.update(OIDC_SECRETS)
    at.user = {"is_logged_in": True, "email": "bob@x.org"}
    at.button(key="corpus.delete").click().run()
    assert not at.exception
    assert [e.value for e in at.error] == ["only administrators may delete documents; ask an admin (signed in as bob@x.org)"]
    assert [d.external_id for d in list_documents()] == two_documents


def test_admin_signed_in_with_oidc_may_delete(two_documents):  # type: ignore[no-untyped-def]
    at = AppTest.from_file(APP, default_timeout=180)
    at.secrets.update(OIDC_SECRETS)
    at.user = {"is_logged_in": True, "email": "alice@x.org"}
    _open_page(at)
    assert not at.button(key="corpus.delete").disabled
    at.selectbox(key="corpus.delete_target").select("grease.md")
    at.checkbox(key="corpus.delete_confirm").check()
    at.button(key="corpus.delete").click().run()
    assert not at.error and [d.external_id for d in list_documents()] == ["alarm.md"]


def test_the_documents_list_pages_through_the_store(clean_db, tmp_path: Path):  # type: ignore[no-untyped-def]
    lines = [json.dumps({"_id": f"doc{i:03d}", "title": f"Valve {i}", "text": f"Valve {i} is checked weekly."})
             for i in range(105)]
    (tmp_path / "valves.jsonl").write_text("\n".join(lines) + "\n")
    assert ingest_paths([tmp_path]).ingested == 105
    at = _open_page(AppTest.from_file(APP, default_timeout=180))
    ids = lambda: frame_by_first_column(at, "external id")["external id"].tolist()  # noqa: E731
    assert len(ids()) == 100 and ids()[0] == "doc000" and at.button(key="corpus.previous").disabled
    assert "documents 1–100 of 105" in [c.value for c in at.caption]
    at.button(key="corpus.next").click().run()
    assert ids() == [f"doc{i}" for i in range(100, 105)] and at.button(key="corpus.next").disabled
    assert "documents 101–105 of 105" in [c.value for c in at.caption]
    assert list(at.selectbox(key="corpus.delete_target").options) == ids()  # this page's documents
    at.text_input(key="corpus.filter").input("doc01").run()  # a new filter starts at its first page
    assert ids() == [f"doc01{i}" for i in range(10)] and at.button(key="corpus.previous").disabled


def test_a_re_uploaded_file_shows_as_skipped(clean_db):  # type: ignore[no-untyped-def]
    at = _open_page(AppTest.from_file(APP, default_timeout=180))
    files = [("alarm.md", b"# SRVO-062 Encoder backup lost\nReplace the battery pack.", "text/markdown")]
    for _ in range(2):
        at.file_uploader(key="corpus.uploads").set_value(files)
        at.run()
        at.button(key="corpus.ingest").click().run()
    assert "1 skipped: already ingested with the same content, not embedded again." in [c.value for c in at.caption]
