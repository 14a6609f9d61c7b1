"""A chat-completions provider of the tests' own that misbehaves on purpose, on 127.0.0.1.

It echoes the key it is sent (the `Authorization: Bearer ...` of the request) wherever a
provider's text can reach the council, and sends replies no provider should. A call's
behaviour is the model's name after `leak/` (and before any `:`, after which a name may be
padded to move a cut point):

    echo        every reply (every stage) opens with the key
    parts       every reply (every stage) opens with parts of the key and its encodings
                (`echoed_parts`): without its first character, from its eighth, its last
                20 characters, reversed, in base64 and in hex
    pad         the answer is padded so that a reply cap of `cap` bytes cuts 20 characters
                into the key
    served      the answer names, as the model that served it, 180 characters and the key
    finish      the answer's finish reason is the key
    error       a 400 whose message is padded so that its 400-character cut falls 20
                characters into the key
    errorname   a 400 whose message is the key after 300 characters: the caller's model
                name (padded after `:`) moves the 500-character cut of the error line into it
    redirect    a 307 whose Location is cut 20 characters into the key at 200 characters
    drip        the answer streams the key one character per event, `drip_seconds` apart
    driptail    the same with the key without its first character, then reversed
    hugeline    a stream whose one line has `huge_bytes` bytes and no end
    hugeafter   a whole streamed reply, then [DONE], then such a line
    nestedjson  a 200 whose JSON body is nested `nesting` levels deep
    nestedsse   a stream whose one event is nested that deep
    nestederror a 500 whose JSON body is nested that deep

Every other call (and every other stage than the answer, except for `echo`) is answered
as the simulator's persona of that name answers (simulator.personas), in one JSON body.
`sent` counts the bytes of each model's replies the provider could hand to its socket.
The server runs on a thread of its own, so a test that blocks its event loop does not
stall it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

from council.calls import Stage
from simulator import persona_for, wire
from simulator.personas import reply
from simulator.reading import detect_stage, prompt_text, read_prompt

KEEP = 20  # the characters of the key a cut leaves, where a behaviour aims a cut
SERVED_BY_CUT = 200
ERROR_MESSAGE_CUT = 400
ERROR_LINE_CUT = 500
LOCATION_CUT = 200
REDIRECT_BASE = "http://redirect.invalid/"
CHUNK = 64 * 1024
Writer = asyncio.StreamWriter


def behaviour(model: str) -> str:
    name = model.removeprefix("leak/")
    return name.split(":", 1)[0] if name != model else ""


def error_name(host: str, key: str, length: int = 300) -> str:
    """A model name (`leak/errorname:...`) whose error line, as the gateway writes it
    (`MODEL: HTTP 400 Bad Request from HOST: MESSAGE`, cut at 500 characters), is cut
    KEEP characters into the key of a message of `length` characters and the key."""
    fixed = len(f": HTTP 400 Bad Request from {host}: ") + length + KEEP
    return "leak/errorname:" + "n" * (ERROR_LINE_CUT - 1 - fixed - len("leak/errorname:"))


def echoed_parts(key: str) -> dict[str, str]:
    """The parts and encodings of the key that `parts` echoes, by name."""
    data = key.encode()
    return {
        "without its first character": key[1:],
        "from its eighth": key[7:],
        "its last 20 characters": key[-20:],
        "reversed": key[::-1],
        "base64": base64.b64encode(data).decode(),
        "hex": data.hex(),
    }


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


class HostileProvider:
    def __init__(
        self,
        cap: int = 64_000,
        drip_seconds: float = 0.05,
        huge_bytes: int = 64_000_000,
        nesting: int = 200_000,
    ) -> None:
        self.cap = cap
        self.drip_seconds = drip_seconds
        self.huge_bytes = huge_bytes
        self.nesting = nesting
        self.sent: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.keys: set[str] = set()
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hostile-provider", daemon=True)
        self._server: asyncio.Server | None = None

    @property
    def host(self) -> str:
        return self.url.removeprefix("http://").removesuffix("/v1")

    def __enter__(self) -> HostileProvider:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the hostile provider did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0)
        )
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._shut_down())
            self._loop.close()

    async def _shut_down(self) -> None:
        """Every connection still open is closed (a client may have opened one it never
        used), so that no socket is left for the garbage collector."""
        assert self._server is not None
        self._server.close()
        serving = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in serving:
            task.cancel()
        await asyncio.gather(*serving, return_exceptions=True)
        await self._server.wait_closed()
        await asyncio.sleep(0)  # the transports' own closing callbacks

    # ---- HTTP/1.1, one request per connection --------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            request_line, *lines = head.decode("latin-1").split("\r\n")
            method, path, _ = request_line.split(" ", 2)
            headers = {
                name.strip().lower(): value.strip()
                for name, _, value in (line.partition(":") for line in lines if line)
            }
            length = int(headers.get("content-length") or 0)
            body = await reader.readexactly(length) if length else b""
            await self._answer(method, path, headers, body, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        status: str,
        headers: dict[str, str],
        body: bytes | None = None,
    ) -> None:
        lines = [
            f"HTTP/1.1 {status}",
            "Connection: close",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        await writer.drain()

    async def _json(self, writer: asyncio.StreamWriter, status: str, data: Any) -> None:
        raw = data.encode() if isinstance(data, str) else json.dumps(data).encode()
        await self._send(writer, status, {"Content-Type": "application/json"}, raw)

    async def _answer(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes,
        writer: asyncio.StreamWriter,
    ) -> None:
        if path.endswith("/props"):
            await self._json(writer, "200 OK", {"total_slots": 64})
            return
        if not path.endswith("/chat/completions") or method != "POST":
            await self._json(writer, "404 Not Found", {"error": {"message": "not here"}})
            return
        payload = json.loads(body)
        model = payload["model"]
        key = headers.get("authorization", "").removeprefix("Bearer ")
        self.keys.add(key)
        self.calls[model] += 1
        messages = payload["messages"]
        text = prompt_text(messages)
        stage = detect_stage(text)
        persona = reply(persona_for(model), read_prompt(text))
        kind = behaviour(model)
        if kind == "echo":
            await self._reply(writer, model, f"The key I was sent is {key}.\n\n{persona}")
        elif kind == "parts":
            parts = "\n".join(f"- {name}: {text}" for name, text in echoed_parts(key).items())
            await self._reply(writer, model, f"The key I was sent, in part:\n{parts}\n\n{persona}")
        elif stage is not Stage.ANSWER or not kind:
            await self._reply(writer, model, persona)
        else:
            await getattr(self, f"_{kind}")(writer, model, key, persona)

    async def _reply(
        self, writer: asyncio.StreamWriter, model: str, content: str, served_by: str | None = None
    ) -> None:
        data = wire.completion("r-1", int(time.time()), served_by or model, content, "stop", {})
        raw = json.dumps(data).encode()
        self.sent[model] += len(raw)
        await self._send(writer, "200 OK", {"Content-Type": "application/json"}, raw)

    async def _stream(
        self, writer: asyncio.StreamWriter, model: str, parts: Iterator[bytes]
    ) -> None:
        await self._send(writer, "200 OK", {"Content-Type": "text/event-stream"})
        for part in parts:
            writer.write(part)
            self.sent[model] += len(part)
            await writer.drain()

    # ---- the behaviours --------------------------------------------------------------

    async def _pad(self, writer: Writer, model: str, key: str, persona: str) -> None:
        await self._reply(writer, model, "p" * (self.cap - KEEP) + key + " and the rest.")

    async def _served(self, writer: Writer, model: str, key: str, persona: str) -> None:
        await self._reply(writer, model, persona, "m" * (SERVED_BY_CUT - KEEP) + key)

    async def _finish(self, writer: Writer, model: str, key: str, persona: str) -> None:
        data = wire.completion("r-1", int(time.time()), model, persona, key, {})
        await self._json(writer, "200 OK", data)

    async def _error(self, writer: Writer, model: str, key: str, persona: str) -> None:
        message = "e" * (ERROR_MESSAGE_CUT - 1 - KEEP) + key
        await self._json(writer, "400 Bad Request", {"error": {"code": 400, "message": message}})

    async def _errorname(self, writer: Writer, model: str, key: str, persona: str) -> None:
        message = "e" * 300 + key
        await self._json(writer, "400 Bad Request", {"error": {"code": 400, "message": message}})

    async def _redirect(self, writer: Writer, model: str, key: str, persona: str) -> None:
        where = REDIRECT_BASE + "r" * (LOCATION_CUT - 1 - KEEP - len(REDIRECT_BASE)) + key
        await self._send(writer, "307 Temporary Redirect", {"Location": where}, b"")

    async def _drip(self, writer: Writer, model: str, key: str, persona: str) -> None:
        await self._dripped(writer, model, key, persona)

    async def _driptail(self, writer: Writer, model: str, key: str, persona: str) -> None:
        await self._dripped(writer, model, f"{key[1:]} and {key[::-1]}", persona)

    async def _dripped(self, writer: Writer, model: str, secret: str, persona: str) -> None:
        def event(delta: dict[str, Any] | None, finish: str | None = None) -> bytes:
            return wire.sse(wire.chunk("r-1", 0, model, delta, finish))

        await self._send(writer, "200 OK", {"Content-Type": "text/event-stream"})
        for piece in ["Here it comes: ", *secret, " That was the key. ", persona]:
            writer.write(event({"content": piece}))
            await writer.drain()
            await asyncio.sleep(self.drip_seconds)
        writer.write(event({}, "stop") + wire.sse("[DONE]"))
        await writer.drain()

    def _endless(self, opening: bytes) -> Iterator[bytes]:
        yield opening
        left = self.huge_bytes
        while left > 0:
            yield b"x" * min(CHUNK, left)
            left -= CHUNK

    async def _hugeline(self, writer: Writer, model: str, key: str, persona: str) -> None:
        await self._stream(writer, model, self._endless(b'data: {"choices": "'))

    async def _hugeafter(self, writer: Writer, model: str, key: str, persona: str) -> None:
        whole = wire.sse(wire.chunk("r-1", 0, model, {"content": persona}, "stop"))
        await self._stream(writer, model, self._endless(whole + wire.sse("[DONE]") + b"data: "))

    async def _nestedjson(self, writer: Writer, model: str, key: str, persona: str) -> None:
        await self._json(writer, "200 OK", nested(self.nesting))

    async def _nestedsse(self, writer: Writer, model: str, key: str, persona: str) -> None:
        await self._stream(writer, model, iter([wire.sse(nested(self.nesting))]))

    async def _nestederror(self, writer: Writer, model: str, key: str, persona: str) -> None:
        await self._json(writer, "500 Internal Server Error", nested(self.nesting))
