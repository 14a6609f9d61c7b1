"""A provider that misbehaves on purpose against the model-call activity: the key it is
sent, echoed where a cut or a stream would leave part of it, never shows even in part;
a reply's bytes are capped as they arrive, whatever their shape; and a reply nested too
deeply to parse is a malformed reply like any other.

The provider is the tests' own (tests.hostile_provider), on 127.0.0.1. A piece of the key
is any 8 characters of it in a row: none may appear in the reply, an error, a heartbeat
or a log line at DEBUG.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.errors import FLAKY_FINAL_ATTEMPT
from activities.model_call import ModelGateway
from activities.settings import GatewaySettings
from council import prompts
from council.calls import CallProgress, ModelCall, ModelReply, Stage
from council.redaction import MIN_PIECE, REDACTED, Redactor
from doctor.checks import failed
from doctor.checks import redact as doctor_redact
from tests.hostile_provider import HostileProvider, echoed_parts, error_name
from tests.key_pieces import leaked

pytestmark = pytest.mark.fast

KEY = "sk-canary-7Qm2Xv9Lr4Tz8Wb3Nd6Hj1Kp"
QUESTION = "What are the trade-offs between SQL and NoSQL databases?"
CAP = 4_000


def pieces(text: str, key: str = KEY) -> list[str]:
    """The 8-character pieces of the key that appear in the text."""
    return sorted({key[i : i + MIN_PIECE] for i in range(len(key) - 7)} & _grams(text))


def _grams(text: str) -> set[str]:
    return {text[i : i + MIN_PIECE] for i in range(len(text) - MIN_PIECE + 1)}


def longest_piece(text: str, key: str = KEY) -> int:
    """The most characters of the key in a row that the text holds (for the failure
    message: how much of the key leaked)."""
    return max(
        (j - i for i in range(len(key)) for j in range(i + 1, len(key) + 1) if key[i:j] in text),
        default=0,
    )


def assert_clean(text: str, where: str) -> None:
    assert not pieces(text), (
        f"{longest_piece(text)} of the key's {len(KEY)} characters leaked into {where}: "
        f"{text[:200]!r}…"
    )
    assert not leaked(text, KEY), f"pieces of the key's encodings leaked into {where}"


@pytest.fixture
def provider() -> Iterator[HostileProvider]:
    with HostileProvider(cap=CAP, drip_seconds=0.03, huge_bytes=64_000_000) as server:
        yield server


def gateway(provider: HostileProvider, **settings: Any) -> ModelGateway:
    return ModelGateway(GatewaySettings(base_url=provider.url, api_key=KEY, **settings))


def make_call(model: str, **fields: Any) -> ModelCall:
    return ModelCall(
        model=model,
        messages=prompts.answer_prompt(QUESTION, 64_000),
        stage=Stage.ANSWER,
        max_response_bytes=CAP,
        **fields,
    )


@dataclasses.dataclass
class Outcome:
    reply: ModelReply | None
    error: ApplicationError | None
    beats: list[CallProgress]

    def texts(self) -> dict[str, str]:
        """Everything the call left that a person or a log could read."""
        shown = {f"heartbeat {n}": beat.text for n, beat in enumerate(self.beats)}
        if self.reply is not None:
            shown["reply"] = self.reply.model_dump_json()
        if self.error is not None:
            shown["error"] = f"{self.error.message} {self.error.details!r}"
        return shown


async def run(gw: ModelGateway, call: ModelCall, attempt: int = 1) -> Outcome:
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info, attempt=attempt, heartbeat_timeout=timedelta(seconds=0.15)
    )
    beats: list[CallProgress] = []
    env.on_heartbeat = lambda *details: beats.append(details[0])
    try:
        reply = await env.run(gw.call_model, call)
    except ApplicationError as error:
        return Outcome(None, error, beats)
    return Outcome(reply, None, beats)


# ---- the redaction rule -------------------------------------------------------------


def test_any_start_of_a_key_is_redacted_and_text_that_may_begin_one_is_held_back() -> None:
    redactor = Redactor([KEY])
    for end in range(MIN_PIECE, len(KEY) + 1):
        text = f"before {KEY[:end]} after"
        assert redactor.redact(text) == f"before {REDACTED} after", end
    short = KEY[: MIN_PIECE - 1]
    assert redactor.redact(f"a {short} b") == f"a {short} b"  # 7 characters are not a key
    assert redactor.redact(f"{KEY}{KEY[:12]}") == REDACTED
    assert redactor.redact("nothing secret") == "nothing secret"
    # A stream's text that ends as a key begins stays back until the next bytes decide.
    assert redactor.settled(f"so far {KEY[:5]}") == "so far "
    assert redactor.settled("so far s") == "so far "
    assert redactor.settled("so far ") == "so far "
    assert redactor.settled(f"so far {KEY[:5]}!") == f"so far {KEY[:5]}!"
    # A secret shorter than a piece counts only whole.
    assert Redactor(["abcd"]).redact("xabcdx abc") == f"x{REDACTED}x abc"
    assert Redactor([]).redact(KEY) == KEY


def test_a_cut_text_never_ends_in_a_key() -> None:
    redactor = Redactor([KEY])
    text = "x" * 50 + KEY + " tail"
    for limit in range(40, 100):
        cut = redactor.cut(text, limit)
        assert len(cut) <= limit and not pieces(cut), limit
        assert not cut.endswith(KEY[:1]), limit


# ---- keys, even in part (items 1 and 2) -----------------------------------------------


async def test_an_echoed_key_is_redacted_in_the_reply(provider: HostileProvider) -> None:
    async with gateway(provider) as gw:
        outcome = await run(gw, make_call("leak/echo"))
    assert provider.keys == {KEY}  # the key was sent, and echoed
    assert outcome.reply is not None and REDACTED in outcome.reply.content
    for where, text in outcome.texts().items():
        assert_clean(text, where)


async def test_a_reply_cut_by_its_cap_inside_the_key_keeps_none_of_it(
    provider: HostileProvider,
) -> None:
    async with gateway(provider) as gw:
        outcome = await run(gw, make_call("leak/pad"))
    assert outcome.reply is not None and outcome.reply.truncated
    assert len(outcome.reply.content.encode()) <= CAP
    for where, text in outcome.texts().items():
        assert_clean(text, where)


async def test_the_model_a_provider_names_keeps_no_piece_of_the_key(
    provider: HostileProvider,
) -> None:
    async with gateway(provider) as gw:
        outcome = await run(gw, make_call("leak/served"))
    assert outcome.reply is not None and outcome.reply.served_by
    assert len(outcome.reply.served_by) <= 200
    assert_clean(outcome.reply.served_by, "served_by")


async def test_a_finish_reason_that_is_the_key_keeps_none_of_it(
    provider: HostileProvider,
) -> None:
    async with gateway(provider) as gw:
        outcome = await run(gw, make_call("leak/finish"))
    assert outcome.reply is not None and outcome.reply.finish_reason
    assert len(outcome.reply.finish_reason) <= 40
    for where, text in outcome.texts().items():
        assert_clean(text, where)


@pytest.mark.parametrize("how", ["error", "errorname", "redirect"])
async def test_an_error_text_cut_inside_the_key_keeps_none_of_it(
    provider: HostileProvider, how: str
) -> None:
    model = error_name(provider.host, KEY) if how == "errorname" else f"leak/{how}"
    async with gateway(provider) as gw:
        outcome = await run(gw, make_call(model))
    assert outcome.error is not None and outcome.error.non_retryable
    assert ("400" if how.startswith("error") else "redirect") in outcome.error.message
    for where, text in outcome.texts().items():
        assert_clean(text, where)


async def test_a_key_dripped_one_character_at_a_time_never_shows(
    provider: HostileProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with gateway(provider) as gw:
        outcome = await run(gw, make_call("leak/drip"))
    assert outcome.reply is not None and REDACTED in outcome.reply.content
    texts = [beat.text for beat in outcome.beats]
    assert len(texts) >= 5 and any("Here it comes" in text for text in texts)
    for where, text in {**outcome.texts(), "log": caplog.text}.items():
        assert_clean(text, where)
    # Held back, not lost: the live text only ever grows.
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))


async def test_parts_of_an_echoed_key_from_anywhere_in_it_and_its_encodings_are_redacted(
    provider: HostileProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with gateway(provider) as gw:
        outcome = await run(gw, make_call("leak/parts"))
    assert outcome.reply is not None and "The key I was sent, in part" in outcome.reply.content
    # One REDACTED for each part echoed, where it stood.
    assert outcome.reply.content.count(REDACTED) == len(echoed_parts(KEY))
    for where, text in {**outcome.texts(), "log": caplog.text}.items():
        assert_clean(text, where)


async def test_a_key_dripped_from_its_second_character_and_reversed_never_shows(
    provider: HostileProvider,
) -> None:
    async with gateway(provider) as gw:
        outcome = await run(gw, make_call("leak/driptail"))
    assert outcome.reply is not None and outcome.reply.content.count(REDACTED) == 2
    texts = [beat.text for beat in outcome.beats]
    assert len(texts) >= 5 and any("Here it comes" in text for text in texts)
    for where, text in outcome.texts().items():
        assert_clean(text, where)
    assert all(b.startswith(a) for a, b in itertools.pairwise(texts))


def test_every_log_line_of_the_worker_is_redacted(
    provider: HostileProvider, caplog: pytest.LogCaptureFixture
) -> None:
    """Whatever logs it (the SDK, the HTTP libraries, the worker's own), at any level, a
    line that holds a piece of a configured key has it redacted, its traceback too."""
    caplog.set_level(logging.DEBUG)
    gateway(provider)  # the worker's keys, configured
    logging.getLogger("temporalio.activity").debug("details %s", KEY[:20])
    logging.getLogger("some.library").warning(f"prefix {KEY[:15]}")
    logging.getLogger("some.library").info("parts %s", list(echoed_parts(KEY).values()))
    try:
        raise RuntimeError(f"a provider said {KEY[:30]}")
    except RuntimeError:
        logging.getLogger("council.anything").exception("failed")
    assert "details" in caplog.text and "RuntimeError" in caplog.text
    assert_clean(caplog.text, "the log")


def test_the_doctor_shows_no_piece_of_a_key() -> None:
    key = "canary7Qm2Xv9Lr4Tz8W"  # no key shape: only the configured value can find it
    check = failed("provider", f"said: bad key {key[:12]}…", f"check {key[:16]}")
    shown = doctor_redact(f"{check.detail} {check.fix}", [key])
    assert not pieces(shown, key), shown


# ---- a reply's bytes capped as they arrive (item 10) --------------------------------------


async def test_an_endless_stream_line_is_not_read_past_the_body_cap(
    provider: HostileProvider,
) -> None:
    async with gateway(provider, max_body_bytes=1_000_000) as gw:
        outcome = await run(gw, make_call("leak/hugeline"))
    assert outcome.error is not None and outcome.error.type == "PayloadTooLarge"
    assert outcome.error.non_retryable and "over 1,000,000 bytes" in outcome.error.message
    # The provider had 64 MB to send; the worker stopped reading at the cap (what the
    # sockets' buffers took beside it aside).
    assert provider.sent["leak/hugeline"] < 24_000_000, provider.sent


async def test_what_follows_a_whole_stream_is_not_read_past_the_body_cap(
    provider: HostileProvider,
) -> None:
    async with gateway(provider, max_body_bytes=1_000_000) as gw:
        outcome = await run(gw, make_call("leak/hugeafter"))
    assert outcome.reply is not None and outcome.reply.content
    assert provider.sent["leak/hugeafter"] < 24_000_000, provider.sent


# ---- a reply nested too deeply (item 18) ------------------------------------------------


@pytest.mark.parametrize(
    ("how", "kind"),
    [
        ("nestedjson", "MalformedResponse"),
        ("nestedsse", "MalformedResponse"),
        ("nestederror", "ProviderUnavailable"),
    ],
)
async def test_a_deeply_nested_reply_is_one_documented_error(
    provider: HostileProvider, how: str, kind: str
) -> None:
    async with gateway(provider) as gw:
        first = await run(gw, make_call(f"leak/{how}"))
        last = await run(gw, make_call(f"leak/{how}"), attempt=FLAKY_FINAL_ATTEMPT)
    assert first.error is not None and first.error.type == kind, first.error
    assert not first.error.non_retryable and "\n" not in first.error.message
    assert len(first.error.message) <= 500
    assert last.error is not None
    if kind == "MalformedResponse":
        assert "nested" in first.error.message
        assert last.error.non_retryable  # retried a bounded number of times, as the others
