"""Hand-built one-page PDFs for extraction tests: exact bytes, xref offsets pypdf can read."""

from __future__ import annotations

import zlib


def one_page_pdf(content: bytes, *, compress: bool = False, title: str | None = None) -> bytes:
    """A one-page PDF whose content stream is `content` (optionally Flate-compressed), in
    Helvetica, with an /Info title when one is given."""
    stream = zlib.compress(content, 9) if compress else content
    flate = b" /Filter /FlateDecode" if compress else b""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d%s >>\nstream\n%s\nendstream" % (len(stream), flate, stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    info = b""
    if title is not None:
        objects.append(b"<< /Title (" + title.encode() + b") >>")
        info = b" /Info %d 0 R" % len(objects)
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\n" % (len(objects) + 1, info)
    out += b"startxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)
