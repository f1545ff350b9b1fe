"""Tests for services.corpus.extract: every format, every skip reason, directory walking."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pypdf import PdfWriter

from services.corpus.extract import (
    SUPPORTED_SUFFIXES,
    ParsedFile,
    SourceDocument,
    iter_paths,
    parse_file,
    parse_paths,
)
from tests._pdf import one_page_pdf


def _minimal_pdf(text: str, *, title: str | None = None) -> bytes:
    """A one-page PDF with `text` in Helvetica."""
    return one_page_pdf(b"BT /F1 12 Tf 72 720 Td (" + text.encode() + b") Tj ET", title=title)


def _encrypted(pdf: bytes, *, user_password: str) -> bytes:
    writer = PdfWriter(clone_from=io.BytesIO(pdf))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def _only_document(parsed: ParsedFile) -> SourceDocument:
    assert parsed.skipped == ()
    assert len(parsed.documents) == 1
    return parsed.documents[0]


def _only_reason(parsed: ParsedFile) -> str:
    assert parsed.documents == ()
    assert len(parsed.skipped) == 1
    return parsed.skipped[0].reason


# --- plain text and markdown -------------------------------------------------------


def test_txt_title_is_first_short_line_and_text_is_whole_content() -> None:
    doc = _only_document(parse_file("notes/a.txt", b"\n  Quarterly report \nBody line.\r\n"))
    assert doc.title == "Quarterly report"
    assert doc.text == "\n  Quarterly report \nBody line.\n"
    assert (doc.external_id, doc.source) == ("notes/a.txt", "notes/a.txt")
    assert doc.metadata == {"format": "text"}


def test_txt_long_first_line_falls_back_to_file_stem() -> None:
    doc = _only_document(parse_file("dir/minutes.txt", ("word " * 40).encode()))
    assert doc.title == "minutes"


def test_utf8_bom_is_stripped() -> None:
    doc = _only_document(parse_file("a.txt", b"\xef\xbb\xbfHello"))
    assert doc.text == "Hello"
    assert doc.title == "Hello"


def test_markdown_title_is_first_h1_outside_code_fences() -> None:
    text = "```bash\n# not a title\n```\n## Sub\n# Real Title #\n\nBody.\n"
    doc = _only_document(parse_file("guide.md", text.encode()))
    assert doc.title == "Real Title"
    assert doc.text == text
    assert doc.metadata == {"format": "markdown"}


def test_markdown_without_h1_uses_stem() -> None:
    doc = _only_document(parse_file("docs/readme.markdown", b"## Only a subheading\ntext"))
    assert doc.title == "readme"


# --- HTML -------------------------------------------------------------------------------


def test_html_drops_scripts_styles_and_head_and_keeps_blocks_apart() -> None:
    html = b"""<!doctype html><html><head><title> The  Page </title>
    <style>.x { color: red }</style><meta name="k" content="HEADMETA"></head>
    <body><script>var secret = 1;</script><noscript>NOSCRIPT</noscript>
    <template>TEMPLATE</template><!-- a comment -->
    <h1>Heading</h1><p>Hello <b>bold</b> world &amp; more.</p><ul><li>one</li><li>two</li></ul>
    </body></html>"""
    doc = _only_document(parse_file("page.html", html))
    assert doc.title == "The Page"
    assert doc.text == "Heading\n\nHello bold world & more.\n\none\n\ntwo"
    for hidden in ("secret", "color", "NOSCRIPT", "TEMPLATE", "comment", "HEADMETA"):
        assert hidden not in doc.text


def test_html_title_falls_back_to_h1_then_stem() -> None:
    assert _only_document(parse_file("a.htm", b"<h1>Big <i>one</i></h1><p>x</p>")).title == "Big one"
    assert _only_document(parse_file("plain.html", b"<p>just text</p>")).title == "plain"


def test_html_with_only_script_has_no_text() -> None:
    assert _only_reason(parse_file("a.html", b"<script>alert(1)</script>")) == "no text found"


def test_deeply_nested_html_does_not_recurse() -> None:
    depth = 50_000
    html = "<div>" * depth + "deep text<script>hidden()</script>" + "</div>" * depth
    doc = _only_document(parse_file("deep.html", html.encode()))
    assert doc.text == "deep text"


# --- PDF --------------------------------------------------------------------------------


def test_pdf_text_pages_and_metadata_title() -> None:
    doc = _only_document(parse_file("r.pdf", _minimal_pdf("Hello PDF", title="Annual Report")))
    assert "Hello PDF" in doc.text
    assert doc.title == "Annual Report"
    assert doc.metadata == {"format": "pdf", "pages": 1}


def test_pdf_without_title_uses_stem() -> None:
    assert _only_document(parse_file("files/scan1.pdf", _minimal_pdf("Hello PDF"))).title == "scan1"


def test_pdf_encrypted_with_empty_user_password_is_read() -> None:
    doc = _only_document(parse_file("e.pdf", _encrypted(_minimal_pdf("Hello PDF"), user_password="")))
    assert "Hello PDF" in doc.text


def test_pdf_needing_a_password_is_skipped() -> None:
    data = _encrypted(_minimal_pdf("Hello PDF"), user_password="secret")
    assert _only_reason(parse_file("e.pdf", data)).startswith("encrypted PDF")


def test_corrupt_pdf_is_skipped_with_pypdf_message() -> None:
    assert _only_reason(parse_file("c.pdf", b"%PDF-1.4\nnot really")).startswith("could not read PDF: ")


def test_pdf_without_text_suggests_ocr() -> None:
    writer = PdfWriter()
    writer.add_blank_page(612, 792)
    buffer = io.BytesIO()
    writer.write(buffer)
    reason = _only_reason(parse_file("scan.pdf", buffer.getvalue()))
    assert reason == "no extractable text (scanned PDF? run OCR first)"


# --- JSONL ------------------------------------------------------------------------------


def test_jsonl_good_lines_become_documents() -> None:
    lines = [
        {"_id": "d1", "title": "First", "text": "Alpha.", "metadata": {"lang": "en"}},
        {"_id": 7, "text": "Beta."},
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    parsed = parse_file("corpus.jsonl", data)
    assert parsed.skipped == ()
    first, second = parsed.documents
    assert (first.external_id, first.title, first.text, first.source) == ("d1", "First", "Alpha.", "corpus.jsonl")
    assert first.metadata == {"format": "jsonl", "line": 1, "lang": "en"}
    assert (second.external_id, second.title) == ("7", "7")


def test_jsonl_bad_lines_are_reported_by_number_and_good_lines_kept() -> None:
    lines = [
        '{"_id": "ok1", "text": "fine"}',
        "{not json",
        "[1, 2]",
        '{"text": "no id"}',
        '{"_id": "", "text": "empty id"}',
        '{"_id": "x", "text": 5}',
        '{"_id": "y", "text": "   "}',
        '{"_id": "z", "text": "t", "metadata": [1]}',
        '{"_id": [1], "text": "t"}',
        '{"_id": "w", "text": "t", "title": 3}',
        "",
        '{"_id": "ok2", "text": "also fine"}',
    ]
    parsed = parse_file("c.jsonl", "\n".join(lines).encode())
    assert [d.external_id for d in parsed.documents] == ["ok1", "ok2"]
    reasons = {s.source: s.reason for s in parsed.skipped}
    assert list(reasons) == [f"c.jsonl:{n}" for n in range(2, 11)]
    assert reasons["c.jsonl:2"].startswith("line 2: invalid JSON (")
    assert reasons["c.jsonl:3"] == "line 3: expected a JSON object, got an array"
    assert reasons["c.jsonl:4"] == 'line 4: missing "_id"'
    assert reasons["c.jsonl:5"] == 'line 5: empty "_id"'
    assert reasons["c.jsonl:6"] == 'line 6: "text" must be a string, not a number'
    assert reasons["c.jsonl:7"] == 'line 7: empty "text"'
    assert reasons["c.jsonl:8"] == 'line 8: "metadata" must be an object, not an array'
    assert reasons["c.jsonl:9"] == 'line 9: "_id" must be a string or a whole number, not an array'
    assert reasons["c.jsonl:10"] == 'line 10: "title" must be a string, not a number'


def test_jsonl_duplicate_id_keeps_first() -> None:
    data = b'{"_id": "a", "text": "first"}\n{"_id": "b", "text": "b"}\n{"_id": "a", "text": "second"}\n'
    parsed = parse_file("c.jsonl", data)
    assert [(d.external_id, d.text) for d in parsed.documents] == [("a", "first"), ("b", "b")]
    (skip,) = parsed.skipped
    assert skip.source == "c.jsonl:3"
    assert skip.reason == "line 3: duplicate _id 'a' (first used on line 1); kept the first"


# --- whole-file skips ------------------------------------------------------------------------


def test_unsupported_suffix_lists_supported_types() -> None:
    reason = _only_reason(parse_file("photo.PNG", b"\x89PNG"))
    assert reason == ("unsupported file type '.png' (supported: .txt, .md, .markdown, .html, .htm, .pdf, .jsonl)")
    assert _only_reason(parse_file("Makefile", b"all:")).startswith("unsupported file type (no extension)")


def test_oversized_file_is_skipped_before_parsing() -> None:
    # NUL bytes would be "binary content" if the size were not checked first.
    reason = _only_reason(parse_file("big.txt", b"\x00" * 25_300_000))
    assert reason == "file is 25.3 MB, over the 20.0 MB limit"
    assert _only_reason(parse_file("a.txt", b"12345", max_bytes=4)).startswith("file is 0.0 MB, over")


def test_empty_and_whitespace_files() -> None:
    assert _only_reason(parse_file("a.md", b"")) == "empty file"
    assert _only_reason(parse_file("a.txt", b" \n\t \r\n")) == "no text found"


def test_binary_content_is_not_text() -> None:
    assert _only_reason(parse_file("a.txt", b"abc\x00def")) == "binary content, not a text file"
    utf16 = "hello".encode("utf-16")
    assert "UTF-16" in _only_reason(parse_file("a.md", utf16))


def test_invalid_utf8_reports_offset_counting_the_bom() -> None:
    assert _only_reason(parse_file("a.txt", b"caf\xe9 au lait")) == (
        "not valid UTF-8 (first bad byte at offset 3); re-save the file as UTF-8"
    )
    assert "offset 6" in _only_reason(parse_file("a.html", b"\xef\xbb\xbfcaf\xe9"))
    assert "offset 2" in _only_reason(parse_file("a.jsonl", b"{}\xff"))


# --- paths ------------------------------------------------------------------------------------


def _tree(root: Path) -> None:
    files = {
        "b.txt": "bee",
        "a.md": "# A\ntext",
        "sub/c.html": "<p>see</p>",
        "sub/deeper/d.jsonl": '{"_id": "d", "text": "dee"}',
        "sub/image.png": "png",
        ".hidden.txt": "secret",
        ".git/config.txt": "secret",
        "sub/.cache/e.txt": "secret",
    }
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)


def test_iter_paths_walks_directories_sorted_relative_and_skips_hidden(tmp_path: Path) -> None:
    _tree(tmp_path / "corpus")
    single = tmp_path / "single.txt"
    single.write_text("one")
    names = [name for name, _ in iter_paths([tmp_path / "corpus", single])]
    assert names == ["a.md", "b.txt", "sub/c.html", "sub/deeper/d.jsonl", "sub/image.png", "single.txt"]
    for name, path in iter_paths([tmp_path / "corpus"]):
        assert path == tmp_path / "corpus" / name


def test_parse_paths_reports_missing_and_unsupported_and_parses_the_rest(tmp_path: Path) -> None:
    _tree(tmp_path)
    results = list(parse_paths([tmp_path, tmp_path / "nope.txt"]))
    documents = [d for r in results for d in r.documents]
    skipped = {s.source: s.reason for r in results for s in r.skipped}
    assert [d.external_id for d in documents] == ["a.md", "b.txt", "sub/c.html", "d"]
    assert documents[3].source == "sub/deeper/d.jsonl"
    assert skipped["nope.txt"] == "no such file or directory"
    assert skipped["sub/image.png"].startswith("unsupported file type '.png'")
    assert "secret" not in " ".join(d.text for d in documents)


def test_parse_paths_checks_size_before_reading(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_bytes(b"x" * 5000)
    (result,) = parse_paths([tmp_path / "big.txt"], max_bytes=1000)
    assert result.skipped[0].reason.startswith("file is 0.0 MB, over the 0.0 MB limit")


def test_symlinked_directories_are_reported_not_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.txt").write_text("a")
    (tmp_path / "real" / "loop").symlink_to(tmp_path / "real", target_is_directory=True)
    results = list(parse_paths([tmp_path / "real"]))
    assert [d.external_id for r in results for d in r.documents] == ["a.txt"]
    (skip,) = [s for r in results for s in r.skipped]
    assert skip.source == "loop"
    assert "not followed" in skip.reason


# --- never raises --------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000), st.sampled_from(SUPPORTED_SUFFIXES + (".bin", "")))
def test_parse_file_never_raises(data: bytes, suffix: str) -> None:
    parsed = parse_file(f"input{suffix}", data)
    assert parsed.documents or parsed.skipped
    assert all(skip.reason for skip in parsed.skipped)
    assert all(doc.text.strip() for doc in parsed.documents)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300), st.sampled_from([".html", ".md", ".txt", ".jsonl"]))
def test_parse_file_never_raises_on_text(text: str, suffix: str) -> None:
    parsed = parse_file(f"input{suffix}", text.encode())
    assert parsed.documents or parsed.skipped


@pytest.mark.parametrize("suffix", [".html", ".md", ".txt", ".jsonl", ".pdf"])
def test_every_supported_suffix_is_parsed(suffix: str) -> None:
    samples = {
        ".html": b"<p>hi</p>",
        ".md": b"hi",
        ".txt": b"hi",
        ".jsonl": b'{"_id": 1, "text": "hi"}',
        ".pdf": _minimal_pdf("hi"),
    }
    assert "hi" in _only_document(parse_file(f"x{suffix.upper()}", samples[suffix])).text
