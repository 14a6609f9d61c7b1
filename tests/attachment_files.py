"""Files to attach in tests, made by real writers: a PNG and a PDF with text from
matplotlib, an encrypted PDF from pypdf, and a text of a given size; and a PDF bomb,
written by hand."""

from __future__ import annotations

import io
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType


def pyplot() -> ModuleType:
    """matplotlib's pyplot on its Agg backend, imported when a file is first drawn."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot


def png(pixels: int = 4) -> bytes:
    figure = pyplot().figure(figsize=(pixels / 100, pixels / 100), dpi=100)
    out = io.BytesIO()
    figure.savefig(out, format="png")
    pyplot().close(figure)
    return out.getvalue()


def pdf(text: str | None) -> bytes:
    """A one-page PDF that shows `text` (None: a page without text, as a scan has)."""
    figure = pyplot().figure()
    if text is not None:
        figure.text(0.1, 0.5, text)
    out = io.BytesIO()
    figure.savefig(out, format="pdf")
    pyplot().close(figure)
    return out.getvalue()


def encrypted_pdf(text: str) -> bytes:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    writer.append(PdfReader(io.BytesIO(pdf(text))))
    writer.encrypt("secret")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def notes(size: int, seed: int = 0) -> str:
    """`size` characters of numbered lines (a different text for each seed)."""
    lines, total, n = [], 0, 0
    while total < size:
        line = f"row {n} of part {seed}: the council reads every line of this file, whole.\n"
        lines.append(line)
        total += len(line)
        n += 1
    return "".join(lines)[:size]


def pdf_bomb(inflated: int, shown: bytes = b" ") -> bytes:
    """A one-page PDF of a few KB whose content stream (FlateDecode) inflates to about
    `inflated` bytes: one hex string of the character `shown`, shown as text. pypdf takes
    seconds per MB to read it, and finds no text in it unless `shown` is a letter."""
    content = b"BT /F1 12 Tf <" + shown.hex().encode() * (inflated // 2) + b"> Tj ET"
    packed = zlib.compress(content, 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> "
        b">> >> >>",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    table = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        table,
    )
    return bytes(out)
