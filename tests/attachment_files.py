"""Files to attach in tests, made by real writers: a PNG and a PDF with text from
matplotlib, an encrypted PDF from pypdf, and a text of a given size."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
from matplotlib import pyplot


def png(pixels: int = 4) -> bytes:
    figure = pyplot.figure(figsize=(pixels / 100, pixels / 100), dpi=100)
    out = io.BytesIO()
    figure.savefig(out, format="png")
    pyplot.close(figure)
    return out.getvalue()


def pdf(text: str | None) -> bytes:
    """A one-page PDF that shows `text` (None: a page without text, as a scan has)."""
    figure = pyplot.figure()
    if text is not None:
        figure.text(0.1, 0.5, text)
    out = io.BytesIO()
    figure.savefig(out, format="pdf")
    pyplot.close(figure)
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
