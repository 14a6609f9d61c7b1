"""The simulator's HTTP server: OpenAI-compatible endpoints, fault injection, a request log.

    app = build_app(SimulatorConfig(...))          # a Starlette app, for any ASGI server
    with SimulatorServer() as sim:                 # in-process, on a free port
        ... sim.url, sim.log(), sim.set_faults({...}), sim.reset()

Endpoints: GET /v1/models, POST /v1/chat/completions (streamed or not; with `tools`, a
reply may be tool calls: simulator.tools), GET /props (how
many requests it answers at once, as llama.cpp's server says it; absent with
SimulatorConfig.slots, like llama-cpp-python's), and the control endpoints
GET /_sim/log[?since=N], GET|POST /_sim/faults, POST /_sim/reset.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import hmac
import json
import logging
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from typing import Any, Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from council import numbers
from council.calls import Stage
from council.refinement import parse_refinement
from council.structured import synthesis_schema
from council.tools import ToolCall
from simulator import accounts, tools, wire
from simulator.config import FaultConfigError, SimulatorConfig, parse_faults
from simulator.faults import FaultConfig, FaultInjector, Plan
from simulator.instances import instance_json
from simulator.log import LogEntry, RequestLog
from simulator.personas import ALL_PERSONAS, Script, persona_for, reply
from simulator.reading import Prompt, attachments_seen, prompt_text, read_prompt

SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    wire.SIMULATED_HEADER,
]
FILLER = " (simulated filler to make this reply large)"
# What /props reports when the simulator answers any number of requests at once.
UNLIMITED_SLOTS = 1024
_WAIT_STEP = 0.25
FIRST_TOKEN_SHARE = 0.5
# Stream chunks due closer together than this go out in one write (send_stream).
FLUSH_SECONDS = 0.01
FLUSH_BYTES = 16_384


class Authors:
    """Which simulated model wrote an answer, so that a scripted reviewer can rate the
    answers of a given member (FaultSpec.ratings_by_author). Thread-safe, bounded."""

    MAX_TEXTS = 100_000

    def __init__(self) -> None:
        self._by_text: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def _key(text: str) -> str:
        return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()

    def note(self, text: str, model: str) -> None:
        with self._lock:
            self._by_text[self._key(text)] = model
            self._by_text.move_to_end(self._key(text))
            while len(self._by_text) > self.MAX_TEXTS:
                self._by_text.popitem(last=False)

    def of(self, text: str) -> str | None:
        with self._lock:
            return self._by_text.get(self._key(text))


class Simulator:
    """The state behind one simulator app: its config, fault injector and request log."""

    def __init__(self, config: SimulatorConfig | None = None) -> None:
        self.config = config or SimulatorConfig()
        self.faults = FaultInjector(self.config.faults, seed=self.config.seed)
        self.log = RequestLog()
        self.authors = Authors()
        self.closing = False
        # At most `slots` requests answered at once (the rest wait their turn), if set.
        self.slots: contextlib.AbstractAsyncContextManager[Any] = (
            asyncio.Semaphore(self.config.slots)
            if self.config.slots is not None
            else contextlib.nullcontext()
        )

    def set_faults(self, faults: Any) -> FaultConfig:
        config = parse_faults(faults)
        self.faults.replace(config)
        return config

    def reset(self) -> None:
        self.log.clear()
        self.faults.reset()


class _DropConnection(Exception):
    """Raised to make the ASGI server close the connection mid-reply (a truncated stream)."""


def _is_drop(exc: BaseException | None) -> bool:
    if isinstance(exc, _DropConnection):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_drop(e) for e in exc.exceptions)
    return False


def _quiet_drops(record: logging.LogRecord) -> bool:
    """A log filter: keep deliberate connection drops out of the server's error log."""
    return not _is_drop(record.exc_info[1] if record.exc_info else None)


class _ClientWatch:
    """Notices when the client goes away (a cancelled call closes its connection)."""

    def __init__(self, receive: Receive) -> None:
        self.gone = asyncio.Event()
        self._task = asyncio.ensure_future(self._watch(receive))

    async def _watch(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.gone.set()
                return

    def stop(self) -> None:
        self._task.cancel()


class _Exchange:
    """One chat-completions request, from plan to reply."""

    def __init__(
        self,
        sim: Simulator,
        send: Send,
        client: _ClientWatch,
        entry: LogEntry,
        plan: Plan,
        payload: dict[str, Any],
        arrived: float,
    ) -> None:
        self.sim = sim
        # Nothing is sent before the first byte is due; the latency counts from then, the
        # simulator's own work included.
        self.first_byte_at = arrived + plan.first_byte_seconds
        self.ends_at = self.first_byte_at + plan.latency
        self.send = send
        self.client = client
        self.entry = entry
        self.plan = plan
        self.spec = plan.spec
        self.payload = payload
        self.model = payload["model"]
        self.messages = payload["messages"]
        self.stream = payload.get("stream") is True
        self.tools = tools.offered(payload)
        self.reply_id = f"chatcmpl-sim-{entry.prompt_sha256[:12]}-{entry.seq}"
        self.created = int(time.time())

    def finish(self, outcome: str, status: int | None = None) -> None:
        self.sim.log.finish(self.entry, outcome, status)

    async def wait(self, seconds: float) -> bool:
        """Sleep; True if the client left (or the server is stopping) first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while not self.client.gone.is_set() and not self.sim.closing:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.client.gone.wait(), min(remaining, _WAIT_STEP))
        return True

    async def run(self) -> None:
        plan = self.plan
        if await self.held():
            self.finish("disconnected")
            return
        if plan.fault == "hang":
            await self.wait(self.sim.config.hang_seconds)
            self.finish("disconnected" if self.client.gone.is_set() else "hang")
            return
        silent = self.first_byte_at - asyncio.get_running_loop().time()
        if silent > 0 and await self.wait(silent):
            self.finish("disconnected")
            return
        # A streamed reply waits inside the stream, with keep-alives; the rest wait here.
        waits_here = not self.stream or plan.fault == "error"
        if waits_here and plan.latency and await self.wait(self.time_left()):
            self.finish("disconnected")
            return
        if plan.fault == "error":
            await self.send_error(plan.status or 500)
            return
        if refused := self.spec.refuse_formats.get(self.format_type or ""):
            await self.send_error(
                refused, f"response_format type {self.format_type!r} is not supported"
            )
            return
        if self.tools and not self.spec.tools:
            await self.send_error(400, f"{self.model} does not support tools")
            return
        calls = self.tool_calls()
        if calls:
            self.entry.tool_calls = [call.name for call in calls]
        content, finish_reason = ("", "tool_calls") if calls else self.content()
        if self.stream:
            await self.send_stream(content, finish_reason, calls)
        else:
            await self.send_json(content, finish_reason, calls)

    async def held(self) -> bool:
        """Wait while the config holds this reply back; True if the client left first. The
        latency counts from the request's arrival: a reply held longer comes at once."""
        stage = Stage(self.entry.stage)
        while self.sim.faults.holds(self.model, stage):
            if await self.wait(_WAIT_STEP):
                return True
        return False

    async def paused(self, stage: Stage, written: int, pending: list[bytes]) -> bool:
        """Wait while the config pauses this reply after what it has streamed (the chunks
        not yet sent go first); True if the client left first."""
        while (after := self.sim.faults.pauses_after(self.model, stage)) is not None:
            if written < after:
                break
            if pending:
                await self.body(b"".join(pending))
                pending.clear()
            if await self.wait(_WAIT_STEP):
                return True
        return False

    def time_left(self) -> float:
        return max(0.0, self.ends_at - asyncio.get_running_loop().time())

    def tool_calls(self) -> list[ToolCall]:
        """The tools the member asks for instead of answering (none: it answers). An empty
        or echoing reply (a fault) stays one."""
        if not self.tools or self.plan.fault in ("empty", "echo"):
            return []
        question = read_prompt(prompt_text(self.messages)).question
        return tools.plan(self.payload, question)

    def content(self) -> tuple[str, str]:
        if self.plan.fault == "empty":
            return "", "stop"
        if self.plan.fault == "echo":
            return wire.echo(prompt_text(self.messages)), "stop"
        persona = persona_for(self.model)
        prompt = read_prompt(prompt_text(self.messages))
        seed = self.payload.get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool):
            prompt.seed = seed
        prompt.disagree = self.sim.config.disagree
        prompt.tool_note = tools.note(self.messages)
        text = (
            accounts.check_json(prompt, obey=self.spec.obey)
            if prompt.stage is Stage.CHECK
            else reply(persona, prompt, Script(self.scripted_ratings(prompt), self.spec.critiques))
        )
        if self.plan.append and prompt.stage is not Stage.CHECK:
            text = f"{text}\n\n{self.plan.append}"
        if prompt.stage is Stage.ANSWER:
            self.sim.authors.note(text, self.model)
        elif prompt.stage is Stage.REFINE:
            self.sim.authors.note(parse_refinement(text).final_answer, self.model)
        if self.spec.structured and self.format_type in ("json_schema", "json_object"):
            if prompt.stage is Stage.REVIEW:
                text = wire.review_json(text, list(prompt.answers))
            elif prompt.stage is Stage.REFINE:
                text = wire.refinement_json(text)
            elif prompt.stage is Stage.CHECK:
                pass  # already the verdict's JSON
            elif self.client_schema is not None:
                text = instance_json(self.client_schema, text)
            elif prompt.stage is Stage.SYNTHESIS:
                text = accounts.synthesis_json(text, prompt_text(self.messages))
        if self.spec.pad_to_bytes:
            need = self.spec.pad_to_bytes - len(text.encode("utf-8"))
            if need > 0:
                filler = self.spec.pad_with or FILLER
                text += (filler * (need // len(filler) + 1))[:need]
        max_tokens = None if self.spec.ignore_max_tokens else self.payload.get("max_tokens")
        if isinstance(max_tokens, int) and max_tokens > 0 and wire.tokens(text) > max_tokens:
            return wire.whole_words(text, max_tokens * 4), "length"
        return text, "stop"

    def scripted_ratings(self, prompt: Prompt) -> dict[str, int]:
        """Label -> the rating the test scripted for this reviewer (none: the quality rule)."""
        spec = self.spec
        ratings = {}
        for label, text in prompt.answers.items():
            rating = spec.ratings_by_author.get(self.sim.authors.of(text) or "", spec.rating)
            if rating is not None:
                ratings[label] = rating
        return ratings

    def usage(self, content: str, calls: list[ToolCall] | None) -> dict[str, Any]:
        counted = tools.usage_text(calls) if calls else content
        prompts = [prompt_text([m]) for m in self.messages]
        return wire.usage(prompts, counted, self.spec.cost_per_million_tokens)

    async def start(self, status: int, headers: list[tuple[bytes, bytes]]) -> None:
        await self.send({"type": "http.response.start", "status": status, "headers": headers})

    async def body(self, data: bytes, more: bool = True) -> None:
        await self.send({"type": "http.response.body", "body": data, "more_body": more})

    @property
    def format_type(self) -> str | None:
        """The type of the request's response_format, if it has one."""
        wanted = self.payload.get("response_format")
        return wanted.get("type") if isinstance(wanted, dict) else None

    @property
    def client_schema(self) -> dict[str, Any] | None:
        """The schema of the request's response_format when it is none of the council's
        own (a client's, through /v1's response_format)."""
        wanted = self.payload.get("response_format")
        if not isinstance(wanted, dict):
            return None
        named = wanted.get("json_schema")
        schema = named.get("schema") if isinstance(named, dict) else wanted.get("schema")
        if not isinstance(schema, dict) or schema == synthesis_schema().json_schema:
            return None
        return schema

    async def send_error(self, status: int, why: str | None = None) -> None:
        message = f"Simulated {status} {wire.phrase(status)} for {self.model}"
        if why:
            message += f": {why}"
        headers = [(b"content-type", b"application/json"), wire.SIMULATED_HEADER]
        retry_after = self.spec.retry_after
        if status in (429, 503) and retry_after is not None:
            value = f"{retry_after:g}" if isinstance(retry_after, int | float) else str(retry_after)
            headers.append((b"retry-after", value.encode("latin-1")))
            message += f"; retry after {value}"
        if status == 401:
            # Like a careless provider, echo the key it was given: the gateway must redact it.
            token = self.payload.get("_bearer")
            message += f": the API key {token!r} is not valid" if token else ": no API key was sent"
        body = json.dumps(wire.error(status, message)).encode()
        headers.append((b"content-length", str(len(body)).encode()))
        self.finish("error", status)
        await self.start(status, headers)
        await self.body(body, more=False)

    async def send_json(
        self, content: str, finish_reason: str, calls: list[ToolCall] | None = None
    ) -> None:
        data = wire.completion(
            self.reply_id,
            self.created,
            self.model,
            content,
            finish_reason,
            self.usage(content, calls),
            [call.openai() for call in calls] if calls else None,
        )
        raw = json.dumps(data, ensure_ascii=False).encode("utf-8")
        fault = self.plan.fault
        if fault == "malformed":
            raw = raw[: len(raw) // 2]
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(raw)).encode()),
            wire.SIMULATED_HEADER,
        ]
        if fault == "truncate":
            self.finish("truncated", 200)
            await self.start(200, headers)
            await self.body(raw[: len(raw) // 2])
            raise _DropConnection
        self.finish(self._outcome(), 200)
        await self.start(200, headers)
        await self.body(raw, more=False)

    def _outcome(self) -> str:
        return self.plan.fault if self.plan.fault in ("malformed", "empty", "echo") else "ok"

    async def send_stream(
        self, content: str, finish_reason: str, calls: list[ToolCall] | None = None
    ) -> None:
        await self.start(200, SSE_HEADERS)
        await self.body(b": SIMULATOR PROCESSING\n\n")
        # Like a real model, the reply streams over the call's latency: the first token
        # comes after a share of it, the rest are paced to end when the latency is up.
        loop = asyncio.get_running_loop()
        ends_at = self.ends_at
        if await self.keepalive(self.time_left() - self.plan.latency * (1 - FIRST_TOKEN_SHARE)):
            self.finish("disconnected", 200)
            return
        chunk_chars = self.sim.config.chunk_chars
        if calls:
            first, parts = tools.stream_deltas(calls, chunk_chars)
        else:
            first = {"role": "assistant", "content": ""}
            parts = [{"content": part} for part in wire.pieces(content, chunk_chars)]
        pace = max(0.0, ends_at - loop.time()) / max(len(parts), 1)
        fault = self.plan.fault
        if fault in ("truncate", "interrupt"):
            parts = parts[: max(1, len(parts) // 2)]
        chunk = self._chunk
        await self.body(wire.sse(chunk(first)))
        # Chunks due within FLUSH_SECONDS of each other go out in one write of at most about
        # FLUSH_BYTES, as a server's buffer sends them: with no latency, a short reply at once.
        pending: list[bytes] = []
        size = 0
        written = 0
        stage = Stage(self.entry.stage)
        for i, part in enumerate(parts):
            if self.client.gone.is_set() or await self.paused(stage, written, pending):
                self.finish("disconnected", 200)
                return
            written += len(part.get("content") or "")
            if fault == "malformed" and i == len(parts) // 2:
                self.finish("malformed", 200)
                await self.body(
                    b"".join(pending)
                    + b'data: {"id": "'
                    + self.reply_id.encode()
                    + b'", "choices": [{"delta": {"content": "\n\n'
                )
                await self.body(wire.sse("[DONE]"), more=False)
                return
            pending.append(wire.sse(chunk(part)))
            size += len(pending[-1])
            # The next chunk's time (never drifting past the end).
            wait = ends_at - pace * (len(parts) - i - 1) - loop.time()
            if wait < FLUSH_SECONDS and size < FLUSH_BYTES and i + 1 < len(parts):
                continue
            await self.body(b"".join(pending))
            pending.clear()
            size = 0
            await asyncio.sleep(max(0.0, wait))
        if fault == "truncate":
            self.finish("truncated", 200)
            raise _DropConnection
        if fault == "interrupt":
            self.finish("interrupted", 200)
            await self.body(wire.sse("[DONE]"), more=False)
            return
        await self.body(wire.sse(chunk({}, finish_reason)))
        await self.body(wire.sse(chunk(usage=self.usage(content, calls))))
        self.finish(self._outcome(), 200)
        await self.body(wire.sse("[DONE]"), more=False)

    def _chunk(
        self,
        delta: dict[str, Any] | None = None,
        finish_reason: str | None = None,
        usage: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return wire.chunk(self.reply_id, self.created, self.model, delta, finish_reason, usage)

    async def keepalive(self, seconds: float) -> bool:
        """Wait, sending keep-alive comments; True if the client left first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return self.client.gone.is_set()
            if await self.wait(min(remaining, self.sim.config.keepalive_seconds)):
                return True
            if deadline - loop.time() > 0:
                await self.body(b": SIMULATOR PROCESSING\n\n")


def _bad_request(message: str) -> JSONResponse:
    return JSONResponse(wire.error(400, message), status_code=400)


class ChatCompletions:
    """POST /v1/chat/completions, as a raw ASGI app: it must notice disconnects and be
    able to drop a connection mid-reply, which a plain response class cannot."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        arrived = asyncio.get_running_loop().time()
        request = Request(scope, receive)
        try:
            payload = json.loads(await request.body())
        except ValueError:
            await _bad_request("the request body is not JSON")(scope, receive, send)
            return
        problem = _invalid(payload)
        if problem:
            await _bad_request(problem)(scope, receive, send)
            return
        auth = request.headers.get("authorization", "")
        bearer = auth[7:].strip() if auth.lower().startswith("bearer ") else ""
        payload["_bearer"] = bearer
        messages = payload["messages"]
        prompt = read_prompt(prompt_text(messages))
        digest = hashlib.sha256(
            json.dumps(messages, sort_keys=True, ensure_ascii=False).encode("utf-8")
        ).hexdigest()
        model = payload["model"]
        entry = self.sim.log.start(
            model=model,
            stage=prompt.stage.value,
            persona=persona_for(model).name,
            stream=payload.get("stream") is True,
            prompt_sha256=digest,
            authorized=bool(bearer),
            call_id=request.headers.get("x-council-call"),
            attachments=attachments_seen(messages),
        )
        plan = self.sim.faults.plan(model, Stage(prompt.stage), digest)
        key = self.sim.config.api_key
        if key and not hmac.compare_digest(bearer.encode(), key.encode()):
            plan = dataclasses.replace(
                plan, fault="error", status=401, latency=0.0, first_byte_seconds=0.0
            )
        entry.fault = plan.fault if plan.fault != "error" else f"error {plan.status}"
        client = _ClientWatch(receive)
        try:
            async with self.sim.slots:
                if self.sim.config.slots is not None:  # the latency runs from its turn
                    arrived = asyncio.get_running_loop().time()
                await _Exchange(self.sim, send, client, entry, plan, payload, arrived).run()
        except _DropConnection:
            raise
        except (OSError, asyncio.CancelledError):
            self.sim.log.finish(entry, "disconnected")
            raise
        except Exception:
            self.sim.log.finish(entry, "server_error", 500)
            raise
        finally:
            client.stop()
            self.sim.log.finish(entry, "disconnected" if client.gone.is_set() else "server_error")


def _invalid(payload: Any) -> str | None:
    if not isinstance(payload, dict):
        return "the request body must be a JSON object"
    if not isinstance(payload.get("model"), str) or not payload["model"].strip():
        return "'model' is required"
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list"
    if not all(
        isinstance(m, dict)
        and ("content" in m or (m.get("role") == "assistant" and m.get("tool_calls")))
        for m in messages
    ):
        return "every message needs a role and content"
    return tools.invalid(payload)


def build_app(config: SimulatorConfig | Simulator | None = None) -> Starlette:
    """The simulator as a Starlette app; its state is `app.state.simulator`."""
    sim = config if isinstance(config, Simulator) else Simulator(config)
    logger = logging.getLogger("uvicorn.error")
    if _quiet_drops not in logger.filters:
        logger.addFilter(_quiet_drops)

    async def index(request: Request) -> Response:
        return JSONResponse(
            {
                "name": "Council simulator",
                "simulated": True,
                "note": "Every reply is generated by simulated personas; no real model is called.",
                "base_url": str(request.base_url).rstrip("/") + "/v1",
                "models": [p.model for p in ALL_PERSONAS],
            }
        )

    async def models(request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": p.model,
                        "object": "model",
                        "created": 0,
                        "owned_by": wire.OWNER,
                        "name": f"{p.name} (simulated)",
                        "description": f"Simulated model ({p.description})",
                    }
                    for p in ALL_PERSONAS
                ],
            }
        )

    async def props(request: Request) -> Response:
        if sim.config.slots is not None:
            return JSONResponse({"error": "not found"}, status_code=404)
        return JSONResponse({"total_slots": UNLIMITED_SLOTS, "simulated": True})

    async def get_log(request: Request) -> Response:
        since = numbers.whole(request.query_params.get("since", "0"), signed=False)
        if since is None:
            return _bad_request("'since' must be a whole number")
        return JSONResponse(sim.log.snapshot(since))

    async def faults(request: Request) -> Response:
        if request.method == "POST":
            try:
                sim.set_faults(json.loads(await request.body() or b"{}"))
            except (ValueError, FaultConfigError) as err:
                return _bad_request(str(err))
        return JSONResponse(sim.faults.config.model_dump(exclude_defaults=True))

    async def reset(request: Request) -> Response:
        sim.reset()
        return JSONResponse({"reset": True})

    app = Starlette(
        routes=[
            Route("/", index, methods=["GET"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/props", props, methods=["GET"]),
            Route("/v1/chat/completions", ChatCompletions(sim), methods=["POST"]),
            Route("/_sim/log", get_log, methods=["GET"]),
            Route("/_sim/faults", faults, methods=["GET", "POST"]),
            Route("/_sim/reset", reset, methods=["POST"]),
        ]
    )
    app.state.simulator = sim
    return app


class SimulatorServer:
    """The simulator on a background thread, for tests, the demo and benchmarks."""

    def __init__(
        self,
        config: SimulatorConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.simulator = Simulator(config)
        self.host = host
        self.port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def root_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL (set COUNCIL_LLM_BASE_URL to this)."""
        return f"{self.root_url}/v1"

    def start(self, timeout: float = 10.0) -> SimulatorServer:
        family, kind, proto, _, address = socket.getaddrinfo(
            self.host, self.port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )[0]
        # The protocol must be explicit: asyncio sets TCP_NODELAY only on sockets whose
        # proto is IPPROTO_TCP, and without it every reply waits ~40 ms for a delayed ACK.
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
        self.port = sock.getsockname()[1]
        self.simulator.closing = False
        config = uvicorn.Config(
            build_app(self.simulator),
            log_config=None,
            access_log=False,
            lifespan="off",
            loop="asyncio",
            http="h11",
            ws="none",
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [sock]},
            name=f"council-simulator-{self.port}",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the simulator did not start on {self.root_url}")
            time.sleep(0.005)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        if self._server is None or self._thread is None:
            return
        self.simulator.closing = True
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log(self, since: int = 0) -> dict[str, Any]:
        """Entries, counts per model and stage, outcomes and the in-flight count."""
        return self.simulator.log.snapshot(since)

    def reset(self) -> None:
        """Clear the log and the fault counters (the fault config stays)."""
        self.simulator.reset()

    def set_faults(self, faults: Mapping[str, Any] | FaultConfig | str | None) -> FaultConfig:
        """Replace the fault config (a mapping as in --faults; None or {} for no faults)."""
        return self.simulator.set_faults(faults)

    @contextlib.contextmanager
    def disagreeing(self, share: float | None) -> Iterator[None]:
        """The share of problems on which the members disagree (SimulatorConfig.disagree)
        for the length of the block, then the one set before."""
        config = self.simulator.config
        before = config.disagree
        config.disagree = share
        try:
            yield
        finally:
            config.disagree = before
