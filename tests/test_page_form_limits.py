"""What the page's forms take (web.pages): the body of a form is capped as it arrives, so
that an upload far over what a run may carry is refused before it is read (or spooled to
disk), and a question over its limit is refused in the question's own words however the
form is encoded. Through httpx against `python -m web`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from council import limits
from tests.temporal_fixtures import FOUR_MODELS, Council
from tests.web_fixtures import WebServer
from web.pages import FORM_MAX_BYTES

CHUNK = b"\0" * 1_000_000


def _most_buffered(setting: str, otherwise: int = 8_000_000) -> int:
    """The most a loopback TCP socket's kernel buffer grows to (its third value)."""
    try:
        return int(Path("/proc/sys/net/ipv4", setting).read_text().split()[2])
    except (OSError, IndexError, ValueError):
        return otherwise


# What a client may have handed over that the server has not read when its answer comes:
# the server's receive buffer and the client's send buffer (which the kernel grows as
# needed, up to these maxima: tens of MB on a loaded machine) and a chunk on either side.
IN_FLIGHT = _most_buffered("tcp_rmem") + _most_buffered("tcp_wmem") + 2 * len(CHUNK)
# An upload far over the cap and what may be in flight (the attack sent 500 MB; this shows
# the same): read to its end, it would be counted whole.
UPLOAD_BYTES = FORM_MAX_BYTES + 3 * IN_FLIGHT
BOUNDARY = "council-test-boundary"


def multipart_head() -> bytes:
    return (
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="question"\r\n\r\n'
        "Is this file too large?\r\n"
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="attachments"; filename="huge.pdf"\r\n'
        "Content-Type: application/pdf\r\n\r\n"
    ).encode()


async def taken_before_the_answer(web: WebServer, declared: bool) -> tuple[int, bytes]:
    """POST a start form whose file is UPLOAD_BYTES long, as a client that stops sending
    once an answer comes (httpx sends the whole body first, whatever the server says): how
    many bytes of the body the server had taken (socket buffers included) when its answer
    came, and the answer's status line. With `declared`, the body's length is in the
    headers; else it comes chunked."""
    host, port = web.url.removeprefix("http://").split(":")
    head, tail = multipart_head(), f"\r\n--{BOUNDARY}--\r\n".encode()
    chunks = UPLOAD_BYTES // len(CHUNK)
    framing = f"Content-Length: {len(head) + chunks * len(CHUNK) + len(tail)}"
    if not declared:
        framing = "Transfer-Encoding: chunked"
        head, tail = _chunk(head), _chunk(tail) + b"0\r\n\r\n"
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        f"POST /deliberations HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n{framing}\r\n\r\n".encode()
        + head
    )
    answer = asyncio.ensure_future(reader.readline())
    data = CHUNK if declared else _chunk(CHUNK)
    sent = 0
    try:
        while not answer.done() and sent < UPLOAD_BYTES:
            writer.write(data)
            sent += len(CHUNK)
            drained = asyncio.ensure_future(writer.drain())
            await asyncio.wait({drained, answer}, return_when=asyncio.FIRST_COMPLETED)
            if not drained.done():
                drained.cancel()
        if not answer.done():
            writer.write(tail)
        status = await asyncio.wait_for(answer, 120)
    finally:
        writer.close()
    return sent, status


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def test_an_upload_over_the_cap_is_refused_before_it_is_read(
    web: WebServer, council: Council
) -> None:
    """Before: the server read the whole upload (spooled to a temporary file) and only
    then said the file was too large (a 400 after all 99 MB). Now a declared length over
    the cap is refused at once, and a body without one once the cap is passed."""
    sent, status = await taken_before_the_answer(web, declared=True)
    assert status.startswith(b"HTTP/1.1 413"), status
    assert sent <= IN_FLIGHT, sent  # at once: what the buffers took meanwhile
    sent, status = await taken_before_the_answer(web, declared=False)
    assert status.startswith(b"HTTP/1.1 413"), status
    # Not before the cap was passed (the form's head counts towards it), nor long after.
    assert FORM_MAX_BYTES - len(multipart_head()) < sent <= FORM_MAX_BYTES + IN_FLIGHT, sent
    # The refusal, when the client reads it, says what the limit is in one line.
    async with httpx.AsyncClient(base_url=web.url) as http:
        refused = await http.post(
            "/deliberations",
            content=multipart_head() + b"x" * (FORM_MAX_BYTES + 1),
            headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"},
        )
    assert refused.status_code == 413
    assert refused.text.startswith("the form is too large: at most ")
    assert "\n" not in refused.text.strip()
    assert council.sim.log()["total"] == 0  # nothing started


async def test_a_question_over_its_limit_gets_its_own_message_in_either_encoding(
    web: WebServer, council: Council
) -> None:
    """Before: a non-ASCII question over its limit was refused by the form's parser ("the
    form cannot be read: Field exceeded maximum size of 3907KB."), urlencoded or not."""
    too_long = "é" * (limits.QUESTION_MAX_CHARS + 1)
    four_bytes = "𝄞" * (limits.QUESTION_MAX_CHARS + 1)
    fields = {"models": "\n".join(FOUR_MODELS)}
    said = f"question is too long: at most {limits.QUESTION_MAX_CHARS} characters"
    async with httpx.AsyncClient(base_url=web.url, timeout=120) as http:
        urlencoded = await http.post("/deliberations", data={**fields, "question": too_long})
        multipart = await http.post(
            "/deliberations",
            data={**fields, "question": four_bytes},
            files={"attachments": ("", b"", "application/octet-stream")},
        )
        within = await http.post("/deliberations", data={**fields, "question": "é" * 10})
    for answer in (urlencoded, multipart):
        assert answer.status_code == 400, answer.text[:200]
        assert "cannot be read" not in answer.text
        assert said.capitalize() in answer.text or said in answer.text, answer.text[-2000:]
    assert within.status_code == 303
