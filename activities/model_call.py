"""The model-call activity: one activity attempt is one chat-completions request.

    gateway = ModelGateway.of(settings.llm, config.providers)
    Worker(..., activities=[gateway.call_model])
    ...
    await gateway.aclose()

The activity never retries by itself: every failure is an ApplicationError whose type
and retry rule Temporal acts on (see activities.errors). While the request is in
flight it heartbeats, so a heartbeat timeout notices a dead worker within seconds, and
a cancellation (a stop, a heartbeat timeout, worker shutdown) aborts the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Self

import httpx
from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory
from temporalio.service import RPCError

from activities.completion import Completion, token_usage
from activities.errors import CallFailure, ErrorType, application_error, one_line
from activities.llm_client import ChatClient, make_http_client
from activities.metrics import CallMetrics
from activities.outage import ModelCalls, Outages
from activities.settings import GatewaySettings
from activities.shares import DEFAULT_PRIORITY, Caller, CallShares
from activities.slots import AnswerClock, Slots
from council.attachments import Attachment, AttachmentCut, frame_chars
from council.calls import ModelCall, ModelReply
from council.config import DEFAULT_PROVIDER, DefaultProvider, ProviderConfig, route
from council.prompts import with_attachments
from council.redaction import Redactor, redact_logs

MIN_HEARTBEAT_SECONDS = 0.1
# A streaming reply shows on the web page as it arrives: a heartbeat carries the text so
# far at least this often (the worker's heartbeat throttle matches it).
PARTIAL_TEXT_SECONDS = 1.0
# The first stage calls every member at once: that many connections are opened at start.
WARM_CONNECTIONS = 4
WARM_UP_SECONDS = 5.0
# Fitting a prompt into a known context window: a cautious estimate (3 characters a token,
# and each message's chat-template tokens), and the least room a reply must have.
CAUTIOUS_CHARS_PER_TOKEN = 3
TOKENS_PER_MESSAGE = 8
MIN_REPLY_ROOM = 64
# What an image is counted as in a context window (providers count from ~85 to ~1,600).
IMAGE_TOKENS = 1_600
# The room left for the reply when attachments are cut to a context window and the call
# sets no max_tokens (at most a quarter of the window).
ATTACHMENT_REPLY_ROOM = 2_048

log = logging.getLogger("council.model_call")


def _prompt_tokens(chars: int, messages: int, images: int) -> int:
    return (
        -(-chars // CAUTIOUS_CHARS_PER_TOKEN)
        + TOKENS_PER_MESSAGE * messages
        + (IMAGE_TOKENS * images)
    )


def attach(
    call: ModelCall, sees_images: bool, window: int | None
) -> tuple[ModelCall, list[AttachmentCut]]:
    """The call with its attachments shown in its messages (council.prompts
    .with_attachments), images as parts where the model takes them; where the context
    window is known, their texts cut to what it leaves beside the prompt and a reply (each
    cut marked in the text, and returned)."""
    if not call.attachments:
        return call, []
    budget = None
    if window is not None:
        images = sum(a.is_image for a in call.attachments) if sees_images else 0
        chars = sum(len(m.text) for m in call.messages) + frame_chars(call.attachments, sees_images)
        reply = max(MIN_REPLY_ROOM, min(call.max_tokens or ATTACHMENT_REPLY_ROOM, window // 4))
        room = window - _prompt_tokens(chars, len(call.messages), images) - reply
        budget = max(0, room * CAUTIOUS_CHARS_PER_TOKEN)
    messages, cuts = with_attachments(call.messages, call.attachments, sees_images, budget)
    return call.model_copy(update={"messages": messages, "attachments": []}), cuts


def fit_context(call: ModelCall, window: int | None) -> ModelCall:
    """The call with max_tokens lowered to what `window` leaves after the prompt; a
    CallFailure (ContextTooLong, final) when the prompt alone leaves too little."""
    if window is None:
        return call
    chars = sum(len(m.text) for m in call.messages)
    images = sum(m.images for m in call.messages)
    prompt = _prompt_tokens(chars, len(call.messages), images)
    room = window - prompt
    if room < MIN_REPLY_ROOM:
        raise CallFailure(
            ErrorType.CONTEXT_TOO_LONG,
            f"the prompt (about {prompt:,} tokens, {chars:,} characters) does not fit the "
            f"context window of {window:,} tokens (COUNCIL_LLM_CONTEXT_WINDOW); not sent",
        )
    if call.max_tokens is None or call.max_tokens > room:
        return call.model_copy(update={"max_tokens": room})
    return call


def heartbeat_interval(info: activity.Info) -> float:
    """Every second, or a third of the heartbeat timeout when that is shorter (at least
    0.1 s): a dead worker is noticed within the timeout, and partial text stays fresh."""
    timeout = info.heartbeat_timeout
    if not timeout:
        return PARTIAL_TEXT_SECONDS
    return min(PARTIAL_TEXT_SECONDS, max(MIN_HEARTBEAT_SECONDS, timeout.total_seconds() / 3))


async def _heartbeat_while_running(
    completion: Completion,
    call: ModelCall,
    interval: float,
    clock: AnswerClock,
    attempt: int,
) -> None:
    # The first beat comes after one interval, not at once: the heartbeat timeout runs
    # from the start of the attempt anyway, and a call that ends sooner then costs the
    # server no heartbeat at all (every heartbeat is a write to the activity's state).
    while True:
        await asyncio.sleep(interval)
        progress = completion.progress(call)  # its text redacted, and held back (Completion)
        progress.attempt = attempt
        progress.answering = clock.answering
        progress.answer_seconds = round(call.prior_answer_ms / 1000 + clock.seconds(), 3)
        activity.heartbeat(progress)


def caller_of(info: activity.Info) -> Caller:
    """Whose call this is (activities.shares): its run's tenant, the run, its priority."""
    priority = info.priority
    return Caller(
        fairness_key=priority.fairness_key or "",
        run=f"{info.workflow_id}/{info.workflow_run_id}",
        priority=priority.priority_key or DEFAULT_PRIORITY,
    )


def _last_attempt(info: activity.Info) -> bool:
    policy = info.retry_policy
    return (
        policy is not None
        and bool(policy.maximum_attempts)
        and (info.attempt >= policy.maximum_attempts)
    )


def _shutting_down() -> bool:
    details = activity.cancellation_details()
    if details is not None:
        return details.worker_shutdown and not details.cancel_requested
    return activity.is_worker_shutdown()


@dataclass
class Provider:
    """One provider as the worker calls it: its settings, connection pool and client."""

    name: str
    settings: GatewaySettings
    http: httpx.AsyncClient
    client: ChatClient
    slots: Slots

    @classmethod
    def open(
        cls,
        name: str,
        settings: GatewaySettings,
        transport: httpx.AsyncBaseTransport | None,
        redactor: Redactor,
    ) -> Provider:
        http = make_http_client(settings, transport)
        slots = Slots(settings.max_concurrent_requests, settings.base_url)
        return cls(name, settings, http, ChatClient(settings, http, redactor), slots)

    async def warm_up(self, connections: int) -> int:
        """Open pooled connections (DNS, TCP, TLS and the HTTP client's first-use work)
        so that the first deliberation does not pay for them: a HEAD request each, never
        a model call; best effort. Returns the number of connections opened."""
        url = self.settings.base_url.rstrip("/") + "/models"

        async def one() -> bool:
            try:
                await self.http.head(url, timeout=WARM_UP_SECONDS)
            except httpx.HTTPError:
                return False
            return True

        return sum(await asyncio.gather(*(one() for _ in range(connections))))

    async def answers(self) -> bool:
        """Whether the provider answers at all (its model list, any status below 500):
        the outage probe (activities.outage)."""
        url = self.settings.base_url.rstrip("/") + "/models"
        try:
            # Only the status counts: the body (a hostile server's may never end) is not read.
            async with self.http.stream(
                "GET", url, headers=self.settings.headers(stream=False), timeout=WARM_UP_SECONDS
            ) as response:
                return response.status_code < 500
        except httpx.HTTPError:
            return False


class ModelGateway:
    """The worker's access to models: the default provider (COUNCIL_LLM_*) and those of
    council.toml, each with its settings, its key and its own connection pool. A call goes
    to the provider its model id routes to (council.config.route)."""

    def __init__(
        self,
        settings: GatewaySettings | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        providers: Mapping[str, ProviderConfig] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings or GatewaySettings()
        self.routes: dict[str, ProviderConfig] = dict(providers or {})
        every = {
            DEFAULT_PROVIDER: self.settings,
            **{
                name: GatewaySettings.from_provider(config, env)
                for name, config in self.routes.items()
            },
        }
        # Every provider's secrets, kept out of every provider's texts and of every log
        # line of this process (council.redaction).
        secrets = [secret for each in every.values() for secret in each.secrets()]
        self.redactor = Redactor(secrets)
        redact_logs(secrets)
        self.providers = {
            name: Provider.open(name, each, transport, self.redactor)
            for name, each in every.items()
        }
        # Set by the worker (watch_outages): without it, calls retry as their policy says.
        self.outages: Outages | None = None
        # Each tenant's and run's share of the calls sent at once (set by the worker).
        self.shares = CallShares()

    def watch_outages(self, client: Client, calls: ModelCalls) -> None:
        """Pause a provider's calls while it is down (activities.outage); `calls` says
        where the namespace's model calls are."""
        if self.outages is None:
            self.outages = Outages(
                client,
                {name: provider.answers for name, provider in self.providers.items()},
                calls,
            )

    @classmethod
    def of(
        cls,
        default: DefaultProvider,
        providers: Mapping[str, ProviderConfig] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ModelGateway:
        """The gateway of the default provider's settings (`Settings.llm` of app.settings)
        and council.toml's providers, their keys from the variables they name (`env`, the
        process's by default)."""
        return cls(GatewaySettings.of(default), providers=providers, env=env)

    def provider_of(self, model: str) -> Provider:
        return self.providers[route(model, self.routes)]

    async def aclose(self) -> None:
        if self.outages is not None:
            await self.outages.aclose()
        for provider in self.providers.values():
            await provider.http.aclose()

    async def warm_up(self, connections: int = WARM_CONNECTIONS) -> dict[str, int]:
        """At worker start: each provider's connections opened (see Provider.warm_up), and
        how many requests each is sent at once decided (activities.slots)."""
        opened = await asyncio.gather(*(p.warm_up(connections) for p in self.providers.values()))
        await asyncio.gather(*(p.slots.decide(p.http) for p in self.providers.values()))
        return dict(zip(self.providers, opened, strict=True))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def redact(self, text: str) -> str:
        return self.redactor.redact(text)

    def limited(self) -> dict[str, float]:
        """The providers with a request rate limit: name -> requests per second."""
        return {
            name: provider.settings.max_requests_per_second
            for name, provider in self.providers.items()
            if provider.settings.max_requests_per_second is not None
        }

    @activity.defn
    async def limited_providers(self, models: list[str]) -> dict[str, str]:
        """Of these models, those whose provider has a request rate limit, and its name:
        their calls go to the provider's own task queue (workflows.calls.Routes). A local
        activity: this worker's configuration, kept in the run's history."""
        limited = self.limited()
        return {model: name for model in models if (name := route(model, self.routes)) in limited}

    @activity.defn
    async def call_model(
        self, call: ModelCall, attachments: list[Attachment] | None = None
    ) -> ModelReply:
        """A call; its attachments come as their own argument (workflows.calls)."""
        if attachments:
            call = call.model_copy(update={"attachments": attachments})
        metrics = CallMetrics.of(call)
        started = time.monotonic()
        provider = self.provider_of(call.model).name
        if self.outages is not None and self.outages.down(provider):
            raise await self._wait_for(provider, call.model, None)
        try:
            reply = await self._call(call)
        except ApplicationError as error:
            outages = self.outages
            if (
                outages is not None
                and outages.health[provider].failed(error.type, call.model)
                and await outages.confirmed_down(provider, error.type)
            ):
                raise await self._wait_for(provider, call.model, error) from None
            info = activity.info()
            retried = not error.non_retryable and not _last_attempt(info)
            metrics.failed(error.type or "error", retried, time.monotonic() - started)
            # One line per failed attempt; the SDK logs the error (a benign one) with its
            # traceback at DEBUG only: a model failing is expected, not a bug in the worker.
            log.warning(
                "%s failed (attempt %d, %s): %s",
                call.summary,
                info.attempt,
                "retried" if retried else "final",
                error.message,
            )
            raise
        except asyncio.CancelledError:
            metrics.cancelled(time.monotonic() - started)
            raise
        metrics.succeeded(reply)
        if self.outages is not None:
            self.outages.health[provider].succeeded()
        return reply

    async def _wait_for(
        self, provider: str, model: str, error: ApplicationError | None
    ) -> ApplicationError:
        """The call pauses itself while its provider is down: the error its attempt ends
        with (the attempt's own error when the pause cannot be made)."""
        assert self.outages is not None
        try:
            line = await self.outages.pause_this_call(provider)
        except RPCError as refused:
            log.warning(
                "could not pause a call of the down provider %s: %s", provider, refused.message
            )
            if error is not None:
                return error
            line = f"provider {provider} is down"
        log.warning("%s: %s (paused)", model, line)
        return ApplicationError(
            f"{model}: {line}",
            provider,
            type=ErrorType.PROVIDER_DOWN.value,
            category=ApplicationErrorCategory.BENIGN,
        )

    async def _call(self, call: ModelCall) -> ModelReply:
        info = activity.info()
        provider = self.provider_of(call.model)
        window = provider.settings.context_window
        try:
            call, cuts = attach(call, provider.settings.sees_images(call.model), window)
            call = fit_context(call, window)
        except CallFailure as failure:
            raise self._error(failure, call.model, info.attempt, provider.name) from None
        completion = Completion(call.max_response_bytes, self.redactor)
        clock = AnswerClock()
        beating = asyncio.create_task(
            _heartbeat_while_running(
                completion, call, heartbeat_interval(info), clock, info.attempt
            )
        )
        try:
            async with self.shares.turn(caller_of(info)), provider.slots.turn(provider.http):
                started = time.monotonic()
                structured = await provider.client.complete(
                    call, completion, f"{info.workflow_id}/{info.activity_id}", clock
                )
        except CallFailure as failure:
            raise self._error(failure, call.model, info.attempt, provider.name) from None
        except asyncio.CancelledError:
            if _shutting_down():
                # Fail this attempt so that Temporal retries it on another worker now,
                # rather than after a heartbeat timeout.
                raise ApplicationError(
                    one_line(f"{call.model}: the worker shut down during the call"),
                    type=ErrorType.WORKER_SHUTDOWN.value,
                    category=ApplicationErrorCategory.BENIGN,
                ) from None
            raise
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating
        latency_ms = int((time.monotonic() - started) * 1000)

        # A provider may echo what it was sent, a key included: the content is redacted
        # before it is cut to the cap (Completion), and so is served_by.
        content = completion.content
        tool_calls = completion.tool_calls if call.tools else []
        if not content.strip() and not tool_calls:
            reason = completion.finish_reason or "none"
            raise self._error(
                CallFailure(
                    ErrorType.EMPTY_CONTENT, f"the reply has no content (finish_reason={reason})"
                ),
                call.model,
                info.attempt,
                provider.name,
            )
        return ModelReply(
            model=call.model,
            content=content,
            served_by=completion.served_by,
            finish_reason=completion.finish_reason,
            usage=token_usage(completion.usage, [m.text for m in call.messages], content),
            latency_ms=latency_ms,
            answer_ms=int(clock.seconds() * 1000),
            truncated=completion.truncated,
            structured=structured,
            provider=provider.name,
            attachment_cuts=cuts,
            tool_calls=tool_calls,
            tools_refused=completion.tools_refused,
        )

    def _error(
        self, failure: CallFailure, model: str, attempt: int, provider: str
    ) -> ApplicationError:
        """The error Temporal sees (application_error), the key redacted (the provider's
        texts in it were redacted before any cut: this catches any other); its details
        name the provider (by its config name) for the record."""
        error = application_error(failure, model, attempt)
        return ApplicationError(
            self.redact(error.message),
            provider,
            type=error.type,
            non_retryable=error.non_retryable,
            next_retry_delay=error.next_retry_delay,
            category=error.category,
        )
