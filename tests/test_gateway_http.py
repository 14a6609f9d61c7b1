"""The model-call activity against the real simulator over HTTP (ActivityEnvironment)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import socket
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from temporalio.activity import ActivityCancellationDetails
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.model_call import ModelGateway
from activities.settings import GatewaySettings
from council import prompts
from council.calls import CallProgress, ModelCall, ModelReply, Stage
from council.redaction import REDACTED
from tests.sim_fixtures import wait_until

pytestmark = pytest.mark.fast

QUESTION = "What are the trade-offs between SQL and NoSQL databases?"
KEY = "sk-gw-KEY-7f3a9c51e2-Xq8Lm4Vb"  # (random: any 8 characters of it are redacted)


def make_call(model: str = "sim/atlas", question: str = QUESTION, **fields: Any) -> ModelCall:
    return ModelCall(
        model=model, messages=prompts.answer_prompt(question, 64_000), stage=Stage.ANSWER, **fields
    )


def gateway(sim, **settings: Any) -> ModelGateway:
    return ModelGateway(GatewaySettings(base_url=sim.url, **settings))


def environment(attempt: int = 1, heartbeat_timeout: float | None = None) -> ActivityEnvironment:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        attempt=attempt,
        heartbeat_timeout=timedelta(seconds=heartbeat_timeout) if heartbeat_timeout else None,
    )
    return env


async def call(
    gw: ModelGateway, request: ModelCall, env: ActivityEnvironment | None = None
) -> ModelReply:
    return await (env or environment()).run(gw.call_model, request)


async def failure(
    gw: ModelGateway, request: ModelCall, env: ActivityEnvironment | None = None
) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        await call(gw, request, env)
    return caught.value


@pytest.mark.parametrize("stream", [True, False])
async def test_reply_carries_content_usage_and_who_answered(sim, stream: bool) -> None:
    async with gateway(sim, stream=stream) as gw:
        reply = await call(gw, make_call())
    assert reply.model == "sim/atlas" and reply.served_by == "sim/atlas"
    assert reply.content.startswith("[simulated] A thorough answer")
    assert reply.finish_reason == "stop" and not reply.truncated
    usage = reply.usage
    assert not usage.estimated
    assert usage.completion_tokens == math.ceil(len(reply.content) / 4)
    assert (
        usage.prompt_tokens > 0
        and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    )
    assert usage.cost_usd == 0.0
    assert reply.latency_ms >= 0
    [entry] = sim.log()["entries"]
    assert entry["stream"] is stream and entry["outcome"] == "ok"


async def test_streamed_and_plain_replies_are_the_same_text(sim) -> None:
    async with gateway(sim, stream=True) as streamed, gateway(sim, stream=False) as plain:
        a = await call(streamed, make_call("sim/drift"))
        b = await call(plain, make_call("sim/drift"))
    assert a.content == b.content and a.usage == b.usage


async def test_request_options_reach_the_server(sim) -> None:
    async with gateway(sim) as gw:
        reply = await call(gw, make_call(max_tokens=10, temperature=0.2))
        whole = await call(gw, make_call(temperature=0.2))
    # Cut within 10 tokens (the simulator's 40 characters), after a whole word.
    assert reply.finish_reason == "length" and whole.finish_reason == "stop"
    assert whole.content.startswith(reply.content) and 0 < len(reply.content) <= 40


NON_RETRYABLE = {
    400: "BadRequest",
    401: "Unauthorized",
    402: "PaymentRequired",
    403: "Forbidden",
    404: "ModelNotFound",
    413: "PayloadTooLarge",
    422: "Unprocessable",
}
RETRYABLE = {
    408: "Timeout",
    409: "Conflict",
    500: "ProviderUnavailable",
    502: "ProviderUnavailable",
    503: "ProviderUnavailable",
}


@pytest.mark.parametrize("status", sorted(NON_RETRYABLE))
async def test_client_errors_are_final_and_name_model_status_and_cause(
    sim, sim_faults, status: int
) -> None:
    sim_faults({"sim/borealis": {"errors": {str(status): 1.0}}})
    async with gateway(sim) as gw:
        err = await failure(gw, make_call("sim/borealis"))
    assert err.type == NON_RETRYABLE[status]
    assert err.non_retryable and err.next_retry_delay is None
    assert err.message.startswith("sim/borealis: ")
    assert f"HTTP {status}" in err.message
    assert f"Simulated {status}" in err.message  # the provider's own words
    assert "\n" not in err.message


@pytest.mark.parametrize("status", sorted(RETRYABLE))
async def test_transient_statuses_retry_with_backoff(sim, sim_faults, status: int) -> None:
    sim_faults({"*": {"errors": {str(status): 1.0}}})
    async with gateway(sim, stream=False) as gw:
        err = await failure(gw, make_call())
    assert err.type == RETRYABLE[status]
    assert not err.non_retryable and err.next_retry_delay is None
    assert f"sim/atlas: HTTP {status}" in err.message


@pytest.mark.parametrize(
    ("retry_after", "expected"),
    [(7, 7.0), (None, 5.0), (0, 1.0), (100_000, 300.0)],
)
async def test_rate_limit_waits_for_retry_after(
    sim, sim_faults, retry_after, expected: float
) -> None:
    sim_faults({"*": {"errors": {"429": 1.0}, "retry_after": retry_after}})
    async with gateway(sim) as gw:
        err = await failure(gw, make_call())
    assert err.type == "RateLimited" and not err.non_retryable
    assert err.next_retry_delay == timedelta(seconds=expected)


async def test_rate_limit_with_an_http_date(sim, sim_faults) -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    sim_faults({"*": {"errors": {"429": 1.0}, "retry_after": when}})
    async with gateway(sim) as gw:
        err = await failure(gw, make_call())
    assert timedelta(seconds=27) <= err.next_retry_delay <= timedelta(seconds=30)


async def test_unavailable_with_retry_after_waits_as_told(sim, sim_faults) -> None:
    sim_faults({"*": {"errors": {"503": 1.0}, "retry_after": 12}})
    async with gateway(sim) as gw:
        err = await failure(gw, make_call())
    assert err.type == "ProviderUnavailable" and err.next_retry_delay == timedelta(seconds=12)


@pytest.mark.parametrize("stream", [True, False])
async def test_a_silent_server_times_out_and_the_server_sees_the_disconnect(
    sim, sim_faults, stream: bool
) -> None:
    sim_faults({"*": {"hang": 1.0}})
    async with gateway(sim, stream=stream, read_timeout=0.3) as gw:
        started = time.monotonic()
        err = await failure(gw, make_call())
        assert time.monotonic() - started < 2
    assert err.type == "Timeout" and not err.non_retryable
    await wait_until(lambda: sim.log()["entries"][0]["outcome"] == "disconnected")


async def test_connection_refused_retries() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with ModelGateway(GatewaySettings(base_url=f"http://127.0.0.1:{port}/v1")) as gw:
        err = await failure(gw, make_call())
    assert err.type == "ConnectionFailed" and not err.non_retryable
    assert err.message.startswith("sim/atlas: cannot connect to 127.0.0.1:")


@pytest.mark.parametrize("stream", [True, False])
async def test_a_reply_cut_off_mid_way_retries(sim, sim_faults, stream: bool) -> None:
    sim_faults({"*": {"truncate": 1.0}})
    async with gateway(sim, stream=stream) as gw:
        err = await failure(gw, make_call())
    assert err.type == "TruncatedStream" and not err.non_retryable
    assert sim.log()["entries"][0]["outcome"] == "truncated"


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize(
    ("fault", "error_type"), [("malformed", "MalformedResponse"), ("empty", "EmptyContent")]
)
async def test_malformed_and_empty_replies_retry_a_bounded_number_of_times(
    sim, sim_faults, stream: bool, fault: str, error_type: str
) -> None:
    sim_faults({"*": {fault: 1.0}})
    async with gateway(sim, stream=stream) as gw:
        first = await failure(gw, make_call(), environment(attempt=1))
        second = await failure(gw, make_call(), environment(attempt=2))
        third = await failure(gw, make_call(), environment(attempt=3))
    assert first.type == second.type == third.type == error_type
    assert not first.non_retryable and not second.non_retryable
    assert third.non_retryable and "attempt 3" in third.message
    assert first.message.startswith("sim/atlas: ")


async def test_a_reply_over_the_cap_is_cut_on_a_character_boundary(sim) -> None:
    question = "Qu'est-ce que le café ☕ et le thé 🍵 apportent ?"
    async with gateway(sim) as gw:
        full = (await call(gw, make_call(question=question))).content
        assert len(full.encode()) > 120
        for cap in range(40, 120, 3):
            reply = await call(gw, make_call(question=question, max_response_bytes=cap))
            assert reply.truncated
            assert len(reply.content.encode("utf-8")) <= cap
            assert len(reply.content.encode("utf-8")) > cap - 4  # at most one character dropped
            assert full.startswith(reply.content)
    assert "☕" in full


async def test_a_huge_stream_is_not_read_past_the_cap(sim, sim_faults) -> None:
    sim_faults({"*": {"pad_to_bytes": 5_000_000}})
    async with gateway(sim) as gw:
        started = time.monotonic()
        reply = await call(gw, make_call(max_response_bytes=2_000))
    assert reply.truncated and len(reply.content.encode()) <= 2_000
    assert reply.usage.estimated  # the usage chunk was never read
    assert time.monotonic() - started < 5
    await wait_until(lambda: sim.log()["entries"][0]["outcome"] == "disconnected")


async def test_a_plain_reply_over_the_body_limit_is_final(sim, sim_faults) -> None:
    sim_faults({"*": {"pad_to_bytes": 200_000}})
    async with gateway(sim, stream=False, max_body_bytes=100_000) as gw:
        err = await failure(gw, make_call())
    assert err.type == "PayloadTooLarge" and err.non_retryable
    assert "over 100,000 bytes" in err.message


async def test_a_plain_reply_over_the_content_cap_is_truncated(sim, sim_faults) -> None:
    sim_faults({"*": {"pad_to_bytes": 50_000}})
    async with gateway(sim, stream=False) as gw:
        reply = await call(gw, make_call(max_response_bytes=1_000))
    assert reply.truncated and len(reply.content.encode()) <= 1_000
    assert not reply.usage.estimated  # the provider's usage, for the whole reply


async def test_cancelling_aborts_a_hanging_call_quickly(sim, sim_faults) -> None:
    sim_faults({"*": {"hang": 1.0}})
    env = environment()
    async with gateway(sim) as gw:
        task = asyncio.ensure_future(env.run(gw.call_model, make_call()))
        await wait_until(lambda: sim.log()["in_flight"] == 1)
        cancelled_at = time.monotonic()
        env.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - cancelled_at < 0.5
    await wait_until(lambda: sim.log()["entries"][0]["outcome"] == "disconnected")
    assert sim.log()["in_flight"] == 0


async def test_worker_shutdown_fails_the_attempt_so_another_worker_retries(sim, sim_faults) -> None:
    sim_faults({"*": {"hang": 1.0}})
    env = environment()
    async with gateway(sim) as gw:
        task = asyncio.ensure_future(env.run(gw.call_model, make_call()))
        await wait_until(lambda: sim.log()["in_flight"] == 1)
        env.worker_shutdown()
        env.cancel(ActivityCancellationDetails(worker_shutdown=True))
        with pytest.raises(ApplicationError) as caught:
            await task
    assert caught.value.type == "WorkerShutdown" and not caught.value.non_retryable
    await wait_until(lambda: sim.log()["entries"][0]["outcome"] == "disconnected")


async def test_heartbeats_report_progress_while_the_call_runs(sim, sim_faults) -> None:
    sim_faults({"*": {"latency": 0.8}})
    beats: list[Any] = []
    env = environment(heartbeat_timeout=0.3)
    env.on_heartbeat = lambda *details: beats.append(details)
    async with gateway(sim) as gw:
        reply = await call(gw, make_call(), env)
    assert reply.content
    assert len(beats) >= 5  # about every 0.1 s for 0.8 s
    progress = [details[0] for details in beats]
    assert all(isinstance(p, CallProgress) and p.model == "sim/atlas" for p in progress)
    received = [p.received_bytes for p in progress]
    assert received == sorted(received) and received[-1] > received[0]  # keep-alives arrive
    # The text so far grows as the reply streams, and ends as the reply.
    texts = [p.text for p in progress]
    assert all(reply.content.startswith(text) for text in texts)
    assert any(0 < len(text) < len(reply.content) for text in texts)


async def test_the_api_key_is_sent_but_never_reported(sim, sim_faults, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []
    env = environment(heartbeat_timeout=0.3)
    env.on_heartbeat = lambda *details: seen.append(repr(details))
    async with gateway(sim, api_key=KEY, read_timeout=0.3) as gw:
        seen.append((await call(gw, make_call(), env)).model_dump_json())
        for faults in (
            {"errors": {"401": 1.0}},
            {"errors": {"500": 1.0}},
            {"errors": {"429": 1.0}, "retry_after": 2},
            {"malformed": 1.0},
            {"truncate": 1.0},
            {"hang": 1.0},
        ):
            sim_faults({"*": faults})
            err = await failure(gw, make_call(), env)
            seen += [str(err), repr(err), err.message, repr(err.details), repr(err.__cause__)]
            if faults == {"errors": {"401": 1.0}}:
                assert REDACTED in err.message  # the simulator echoed the key; it was redacted
        seen.append(repr(gw.settings))
    assert all(entry["authorized"] for entry in sim.log()["entries"])
    seen.append(caplog.text)
    assert not [text for text in seen if KEY in text]


class ConnectionCounter:
    """A TCP relay in front of the simulator that counts the connections made to it."""

    def __init__(self, target: str) -> None:
        host, _, port = target.split("//")[1].split("/")[0].partition(":")
        self.target = (host, int(port))
        self.accepted = 0
        self.url = ""

    async def __aenter__(self) -> ConnectionCounter:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))


async def test_warm_up_opens_the_connections_the_first_calls_use(sim) -> None:
    async with (
        ConnectionCounter(sim.url) as relay,
        ModelGateway(GatewaySettings(base_url=relay.url)) as gw,
    ):
        assert await gw.warm_up(connections=4) == {"default": 4}
        assert relay.accepted == 4
        models = ["sim/atlas", "sim/borealis", "sim/cirrus", "sim/drift"]
        replies = await asyncio.gather(*(call(gw, make_call(m)) for m in models))
        assert [r.model for r in replies] == models
        assert relay.accepted == 4  # the first calls found their connections open
    assert sim.log()["total"] == 4  # the warm-up itself called no model


@pytest.mark.parametrize("stream", [True, False])
async def test_one_connection_serves_one_call_after_another(sim, stream: bool) -> None:
    """A reply read to its end hands its connection back to the pool: a streamed reply too,
    whose [DONE] comes before the end of its body."""
    async with (
        ConnectionCounter(sim.url) as relay,
        ModelGateway(GatewaySettings(base_url=relay.url, stream=stream)) as gw,
    ):
        for model in ["sim/atlas", "sim/borealis", "sim/cirrus", "sim/drift", "sim/atlas"]:
            reply = await call(gw, make_call(model))
            assert reply.finish_reason == "stop"
        assert relay.accepted == 1
    assert sim.log()["total"] == 5


async def test_warm_up_with_the_provider_down_opens_none_and_raises_nothing() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with ModelGateway(GatewaySettings(base_url=f"http://127.0.0.1:{port}/v1")) as gw:
        assert await gw.warm_up() == {"default": 0}


@contextlib.contextmanager
def left_to_the_collector() -> Any:
    """The async generators of this process that were dropped unfinished (left for the
    garbage collector to close), by qualified name, while the block ran."""
    import gc
    import sys

    hooks = sys.get_asyncgen_hooks()
    dropped: list[str] = []

    def finalizer(agen: Any) -> None:
        dropped.append(f"{agen.ag_code.co_filename}:{agen.__qualname__}")
        if hooks.finalizer is not None:
            hooks.finalizer(agen)

    sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=finalizer)
    try:
        yield dropped
        gc.collect()
    finally:
        sys.set_asyncgen_hooks(*hooks)


async def test_a_reply_read_only_in_part_leaves_none_of_our_readers_open(sim, sim_faults) -> None:
    """A stream cut at the cap and a body over the limit each close the readers the call
    opened at once, never leaving them to the collector (which
    would close them later, on another task)."""
    sim_faults({"*": {"pad_to_bytes": 300_000}})
    with left_to_the_collector() as dropped:
        async with gateway(sim) as gw:
            reply = await call(gw, make_call(max_response_bytes=2_000))
        async with gateway(sim, stream=False, max_body_bytes=100_000) as gw:
            err = await failure(gw, make_call())
    assert reply.truncated and err.type == "PayloadTooLarge"
    ours = [name for name in dropped if "/activities/" in name]
    assert ours == [], ours
