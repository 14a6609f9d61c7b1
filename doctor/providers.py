"""The model side: council.toml, each provider the councils use, and the default council.

For each provider (the default one, COUNCIL_LLM_*, when a council member routes to it, and
every [providers.NAME] of council.toml) the doctor asks: GET {base}/models with the key
(does it answer, does it take the key, does it list each council member's model, how
large is a model's context when the listing says); one tiny chat completion asking for a
reply in a tiny JSON schema, as the worker asks for a client's schema (in the form the
settings pick and in the prompt), whose reply is parsed and checked against the schema;
and, where Council would send the provider several requests at once without queueing
them itself, two small streamed requests at the same time (does the second begin before
the first ends, or does the server answer one at a time). The settings, the key and the
requests are the worker's own (activities.settings, activities.llm_client); the key is
read from this process's environment, so the doctor is run where the worker runs. The
default provider's base URL is COUNCIL_LLM_BASE_URL; unset, it is the one of a `make up`
running on the simulator with this Temporal server and task queue (app.settings.councils), else
OpenRouter's; the check says which, and why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from activities.errors import status_failure
from activities.llm_client import (
    JSON_OBJECT_WITH_SCHEMA,
    make_http_client,
    refuses_form,
    request_body,
)
from activities.settings import GatewaySettings
from activities.slots import reported_slots, self_hosted
from app.settings import config as app_config
from app.settings import councils
from app.settings import environment as app_settings
from council.calls import ChatMessage, ModelCall
from council.config import (
    DEFAULT_COUNCIL,
    DEFAULT_PROVIDER,
    Config,
    ConfigProblem,
    DefaultProvider,
    route,
)
from council.prompts import format_request
from council.structured import JSON_SCHEMA, StructuredReply, conforming_json
from council.validation import InvalidRequest, validate_request
from doctor.checks import Check, failed, one_line, passed, skipped
from doctor.concurrency import answered_together

CONFIG = "council.toml"
DEFAULT_COUNCIL_CHECK = "default council"
CONCURRENT = "concurrent requests"
# The longest the doctor waits for a provider's reply (a model may be slow to load).
READ_SECONDS = 60.0
# The most of a reply the doctor reads (OpenRouter's model list is a few megabytes).
REPLY_LIMIT = 32_000_000
# Where a model listing states a context window (OpenRouter, LiteLLM, vLLM, LM Studio).
CONTEXT_KEYS = ("context_length", "context_window", "max_model_len", "max_context_length")
EXAMPLES = 5
PROBE = StructuredReply(
    name="council_doctor",
    json_schema={
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    },
)
# The probe's question, then the schema as the chairman is given a client's schema.
PROBE_QUESTION = "Is this setup check of a chat-completions API working?"
PROBE_TOKENS = 32
# The form the worker asks first, for each structured_output setting.
FIRST_FORM = {
    "auto": JSON_SCHEMA,
    "json_schema": JSON_SCHEMA,
    "json_object": JSON_OBJECT_WITH_SCHEMA,
    "off": None,
}


@dataclass
class Provider:
    """A provider as the doctor checks it: where the settings come from, and which models
    of the councils route to it."""

    name: str
    settings: GatewaySettings | None
    problem: str | None  # why the settings cannot be used
    url_setting: str  # where its base URL is set
    key_setting: str  # where a key is set: what to set to give it one
    key_missing: bool  # a key variable is named but not set
    members: list[str] = field(default_factory=list)
    # Where this base URL comes from, and why it is the one checked (None: url_setting).
    source: str | None = None

    def setting(self, variable: str, key: str) -> str:
        """Where one of its settings is set: `variable` for the default provider, else `key`
        with {name} its name (of council.toml)."""
        return variable if self.name == DEFAULT_PROVIDER else key.format(name=self.name)

    @property
    def limit_setting(self) -> str:
        """Where the most requests it is sent at once is set."""
        limit = "COUNCIL_LLM_MAX_CONCURRENT_REQUESTS"
        return self.setting(limit, "max_concurrent_requests of [providers.{name}]")

    @property
    def queued_by_council(self) -> bool:
        """A server on this machine or a private network: the worker keeps its queue
        (activities.slots), so that its members never wait in the server's."""
        return self.settings is not None and self_hosted(self.settings.base_url)


@dataclass
class Reply:
    """What one request got: a status and body, or no answer at all."""

    status: int | None = None
    body: bytes = b""
    error: str | None = None

    @property
    def refused_key(self) -> bool:
        return self.status in (401, 403)

    def why(self, host: str) -> str:
        if self.status is None:
            return self.error or "no answer"
        return status_failure(self.status, self.body, host=host).detail


@dataclass
class Listing:
    """GET /models: the reply, and the models it lists (None when it lists none)."""

    reply: Reply
    models: dict[str, dict[str, Any]] | None = None


def shown_url(url: str) -> str:
    """A base URL without credentials, query or fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = f"{host}:{port}" if port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _names(config: Config, env: Mapping[str, str]) -> dict[str, list[str]]:
    """Each council's members and chairman (the default council first)."""
    found: dict[str, list[str]] = {}
    for name in councils.council_names(config):
        options = councils.council_options(config, name, env)
        models = [str(m) for m in options.get("models", [])]
        chairman = options.get("chairman")
        found[name] = list(dict.fromkeys([*models, *([str(chairman)] if chairman else [])]))
    return found


def default_source(env: Mapping[str, str]) -> tuple[DefaultProvider, str]:
    """The default provider as the worker has it, and where its base URL comes from:
    COUNCIL_LLM_BASE_URL; unset, the simulator of a `make up` that runs on this Temporal
    server and task queue (its worker has no key, so none is sent); else OpenRouter.
    SettingsError when the variables cannot be used."""
    llm = app_settings.of(env).llm
    if "base_url" in llm.model_fields_set:
        return llm, "from COUNCIL_LLM_BASE_URL"
    local = councils.running_local_council(env)
    if local is not None and local.base_url:
        shared = councils.local_council_path(env)
        keyless = {"base_url": local.base_url, "api_key": None, "openrouter_api_key": None}
        return llm.model_copy(update=keyless), (
            "the simulator of the make up running on this Temporal server and task queue "
            f"(from {shared}), as COUNCIL_LLM_BASE_URL is unset"
        )
    return llm, (
        "OpenRouter, the default: COUNCIL_LLM_BASE_URL is unset and no make up on the "
        "simulator runs on this Temporal server and task queue"
    )


def providers_of(config: Config, path: str, env: Mapping[str, str]) -> list[Provider]:
    """The providers to check, each with the council members that route to it."""
    default: GatewaySettings | None = None
    problem: str | None = None
    key_variable: str | None = None
    source: str | None = None
    try:
        llm, source = default_source(env)
        default, key_variable = GatewaySettings.of(llm), llm.key_variable
    except app_settings.SettingsError as error:
        problem = str(error)
    no_variable = "providers.{name}.api_key_env in {path} (the name of the key's variable)"
    providers = [
        Provider(
            DEFAULT_PROVIDER,
            default,
            problem,
            "COUNCIL_LLM_BASE_URL",
            key_variable or "COUNCIL_LLM_API_KEY (or OPENROUTER_API_KEY)",
            False,
            source=source,
        )
    ]
    for name, provider in config.providers.items():
        variable = provider.api_key_env
        providers.append(
            Provider(
                name,
                GatewaySettings.from_provider(provider, env),
                None,
                f"providers.{name}.base_url in {path}",
                variable or no_variable.format(name=name, path=path),
                bool(variable and not (env.get(variable) or "").strip()),
            )
        )
    by_name = {p.name: p for p in providers}
    for models in _names(config, env).values():
        for model in models:
            members = by_name[route(model, config.providers)].members
            if model not in members:
                members.append(model)
    # The default provider is checked when a member routes to it (or no other exists).
    return [p for p in providers if p.name != DEFAULT_PROVIDER or p.members or len(providers) == 1]


async def _send(
    http: httpx.AsyncClient,
    settings: GatewaySettings,
    method: str,
    url: str,
    body: dict[str, Any] | None = None,
) -> Reply:
    """One request to the provider, its reply read up to REPLY_LIMIT bytes."""
    headers = settings.headers(stream=False)
    try:
        async with http.stream(method, url, json=body, headers=headers) as response:
            read = bytearray()
            async for chunk in response.aiter_bytes():
                read += chunk
                if len(read) > REPLY_LIMIT:
                    break
            return Reply(response.status_code, bytes(read))
    except httpx.HTTPError as error:
        return Reply(error=_transport(error, settings))


def _transport(error: httpx.HTTPError, settings: GatewaySettings) -> str:
    if isinstance(error, httpx.ConnectTimeout):
        return f"could not connect to {settings.host} within {settings.connect_timeout:g} s"
    if isinstance(error, httpx.TimeoutException):
        return f"{settings.host} sent nothing for {settings.read_timeout:g} s"
    if isinstance(error, httpx.ConnectError):
        return f"cannot connect to {settings.host} ({type(error).__name__}: {error})"
    return f"the request to {settings.host} failed ({type(error).__name__}: {error})"


def read_listing(reply: Reply) -> Listing:
    """The models a GET /models reply lists, by id (OpenAI's {"data": [{"id": ...}]})."""
    if reply.status is None or not 200 <= reply.status < 300:
        return Listing(reply)
    try:
        data = json.loads(reply.body)
    except ValueError:
        return Listing(reply)
    entries = data.get("data") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        return Listing(reply)
    models = {
        entry["id"]: entry
        for entry in entries
        if isinstance(entry, dict) and isinstance(entry.get("id"), str)
    }
    return Listing(reply, models)


async def _probe(
    http: httpx.AsyncClient, settings: GatewaySettings, model: str, form: str | None
) -> Reply:
    """One tiny chat completion that wants a reply in PROBE's schema, asked for in `form`
    (None: in the prompt alone)."""
    question = PROBE_QUESTION + format_request(PROBE)
    call = ModelCall(
        model=model,
        messages=[ChatMessage(role="user", content=question)],
        max_tokens=PROBE_TOKENS,
        response_format=PROBE,
    )
    body = request_body(call, settings, stream=False, form=form)
    return await _send(http, settings, "POST", settings.chat_url, body)


def probe_problem(reply: Reply) -> str | None:
    """Why a test call's reply is not a value of PROBE's schema (None: it is)."""
    try:
        data = json.loads(reply.body)
        choice = data["choices"][0]
        content = choice["message"]["content"]
    except (ValueError, LookupError, TypeError):
        return "the reply is not a chat completion"
    if not isinstance(content, str):
        return "the reply holds no text"
    _, problem = conforming_json(content, PROBE)
    if problem is None:
        return None
    shown = one_line(content, 80)
    cut = " (cut by its token limit)" if choice.get("finish_reason") == "length" else ""
    return f"{problem}; it answered {shown!r}{cut}"


def _context(provider: Provider, listing: Listing) -> str | None:
    settings = provider.settings
    assert settings is not None
    if settings.context_window:
        where = provider.setting("COUNCIL_LLM_CONTEXT_WINDOW", "providers.{name}.context_window")
        return f"{settings.context_window:,} tokens ({where})"
    sizes = []
    for model in provider.members:
        entry = (listing.models or {}).get(model, {})
        size = next((entry[k] for k in CONTEXT_KEYS if type(entry.get(k)) is int), 0)
        if size > 0:
            sizes.append(f"{model} {size:,}")
    return f"{', '.join(sizes)} tokens (as the provider lists them)" if sizes else None


async def check_provider(provider: Provider) -> tuple[list[Check], Listing | None]:
    """The provider's checks (reachable, key, models, context window, structured output,
    images, concurrent requests) and its model listing."""
    label = f"provider {provider.name}"
    parts = ("key", "models", "context window", "structured output", "images")
    names = [f"{label} {part}" for part in (*parts, CONCURRENT)]
    if provider.settings is None:
        fix = "correct the variable the message names"
        return [
            failed(f"{label} reachable", provider.problem or "unusable", fix),
            *(skipped(n, "its settings cannot be used") for n in names),
        ], None
    settings = dataclasses.replace(
        provider.settings, read_timeout=min(provider.settings.read_timeout, READ_SECONDS)
    )
    where = shown_url(settings.base_url)
    source = provider.source or f"from {provider.url_setting}"
    async with make_http_client(settings) as http:
        models_url = settings.base_url.rstrip("/") + "/models"
        listing = read_listing(await _send(http, settings, "GET", models_url))
        reply = listing.reply
        if reply.status is None:
            return [
                failed(
                    f"{label} reachable",
                    f"{where} does not answer: {reply.why(settings.host)} ({source})",
                    f"start the provider there, or correct {provider.url_setting}",
                ),
                *(skipped(n, "the provider does not answer") for n in names),
            ], listing
        form = FIRST_FORM[settings.structured_output]
        probed = [m for m in provider.members if listing.models is None or m in listing.models]
        asking = probed and not reply.refused_key
        probe, concurrent = await asyncio.gather(
            _probe(http, settings, probed[0], form) if asking else _nothing(),
            _concurrency(provider, settings, http, probed, listing, names[5]),
        )
    unknown = (
        "not known: set context_window in council.toml (COUNCIL_LLM_CONTEXT_WINDOW for "
        "the default provider) so that a prompt that cannot fit is refused before the call"
    )
    if probe is not None and probe.refused_key:
        concurrent = skipped(names[5], "the provider refused the key")
    return [
        passed(
            f"{label} reachable", f"{where} answers (GET /models: HTTP {reply.status}); {source}"
        ),
        _key_check(provider, settings, listing, probe, names[0]),
        _models_check(provider, settings, listing, names[1]),
        passed(names[2], _context(provider, listing) or unknown),
        _output_check(provider, settings, listing, probe, form, probed, names[3]),
        passed(names[4], _images(provider, settings)),
        concurrent,
    ], listing


async def _nothing() -> None:
    return None


async def _concurrency(
    provider: Provider,
    settings: GatewaySettings,
    http: httpx.AsyncClient,
    probed: list[str],
    listing: Listing,
    name: str,
) -> Check:
    """Whether members could wait in the provider's own queue, unseen by Council: a server
    that answers one request at a time, which Council sends several at once."""
    limit = settings.max_concurrent_requests
    if limit is not None:
        return passed(
            name,
            f"at most {limit} at once ({provider.limit_setting}): Council queues the rest "
            "itself, so no test was made",
        )
    if provider.queued_by_council:
        slots = await reported_slots(http, settings.base_url)
        told = (
            f"{slots} at once, as the server's /props says"
            if slots
            else "one at a time, as the server reports no slots (/props)"
        )
        return passed(
            name,
            f"a server on this machine or a private network: Council queues for it itself "
            f"({told}; {provider.limit_setting} sets another number)",
        )
    if listing.reply.refused_key:
        return skipped(name, "the provider refused the key")
    if len(provider.members) < 2:
        return skipped(
            name,
            "fewer than two council members route here, so a run sends it one request at a time",
        )
    if not probed:
        return skipped(name, "no council member's model is listed, so no test call was made")
    return await measured_concurrency(provider, settings, http, probed[0], name)


async def measured_concurrency(
    provider: Provider,
    settings: GatewaySettings,
    http: httpx.AsyncClient,
    model: str,
    name: str,
) -> Check:
    """Two test requests to `model` at once: answered together, or one at a time (then
    the fix names the provider's setting)."""
    seen = await answered_together(http, settings, model, READ_SECONDS)
    if seen.together is None:
        return skipped(name, f"two test requests to {model} could not tell: {seen.why_unknown}")
    if seen.together:
        return passed(name, f"two test requests to {model} were answered at the same time")
    setting = provider.setting(
        f"{provider.limit_setting}=1",
        "max_concurrent_requests = 1 in [providers.{name}] of council.toml",
    )
    return failed(
        name,
        f"the provider answers one request at a time: of two test requests to {model} sent "
        "together, the second began only after the first had ended, so members would wait "
        "behind each other and be cut as late",
        f"set {setting}, so that Council keeps the queue itself and a member's time starts "
        "when its turn comes",
    )


def _images(provider: Provider, settings: GatewaySettings) -> str:
    """Which of the provider's council members are shown attached images (council.toml's
    `images`; COUNCIL_LLM_IMAGES for the default provider); the others are told of them."""
    setting = provider.setting("COUNCIL_LLM_IMAGES", "images of [providers.{name}]")
    seeing = [m for m in provider.members if settings.sees_images(m)]
    if not provider.members:
        return f"no council member routes here ({setting} decides for those that would)"
    if not seeing:
        return (
            f"attached images are named to its members, not shown: set {setting} if its "
            "models take images"
        )
    return f"attached images are shown to {', '.join(seeing)}"


def _key_check(
    provider: Provider,
    settings: GatewaySettings,
    listing: Listing,
    probe: Reply | None,
    name: str,
) -> Check:
    replies = {"GET /models": listing.reply, "the test call": probe}
    refused = next(((w, r) for w, r in replies.items() if r is not None and r.refused_key), None)
    if provider.key_missing:
        return failed(
            name,
            f"no key: {provider.key_setting} is not set",
            f"export the provider's key as {provider.key_setting} where the worker (and the "
            "doctor) run",
        )
    if refused is not None:
        where, reply = refused
        said = f"HTTP {reply.status} on {where}"
        if settings.api_key:
            return failed(
                name,
                f"the provider refused the key from {provider.key_setting} ({said})",
                f"set {provider.key_setting} to a valid key for {settings.host}",
            )
        return failed(name, f"the provider wants a key ({said})", f"set {provider.key_setting}")
    if provider.name == DEFAULT_PROVIDER and settings.is_openrouter and not settings.api_key:
        return failed(
            name,
            "no key is set for OpenRouter",
            "export OPENROUTER_API_KEY (or COUNCIL_LLM_API_KEY), or point COUNCIL_LLM_BASE_URL "
            "at another provider (make up runs the simulator without a key)",
        )
    given = f"the key from {provider.key_setting}" if settings.api_key else "no key (none set)"
    if probe is not None and probe.status is not None and 200 <= probe.status < 300:
        return passed(name, f"{given}: accepted by a test call")
    answers = ", ".join(
        f"{where}: HTTP {reply.status}"
        for where, reply in replies.items()
        if reply is not None and reply.status is not None
    )
    return passed(name, f"{given}: not refused ({answers})")


def _models_check(
    provider: Provider, settings: GatewaySettings, listing: Listing, name: str
) -> Check:
    reply = listing.reply
    if reply.refused_key:
        return skipped(name, "the provider refused the key")
    if listing.models is None:
        return failed(
            name,
            f"GET /models gave no model list ({reply.why(settings.host)})",
            f"check {provider.url_setting}: it is the API's root, where /models and "
            "/chat/completions are (often ending in /v1)",
        )
    if not provider.members:
        return passed(name, f"{len(listing.models)} listed; no council member routes here")
    missing = [m for m in provider.members if m not in listing.models]
    if missing:
        examples = ", ".join(sorted(listing.models)[:EXAMPLES]) or "none"
        return failed(
            name,
            f"not listed by the provider: {', '.join(missing)} ({len(listing.models)} listed, "
            f"such as {examples})",
            "use model ids the provider lists (COUNCIL_MODELS, or models in council.toml's "
            "councils), or send these to another provider with [providers.NAME] models",
        )
    return passed(name, f"each council member's model is listed: {', '.join(provider.members)}")


def _output_check(
    provider: Provider,
    settings: GatewaySettings,
    listing: Listing,
    probe: Reply | None,
    form: str | None,
    probed: list[str],
    name: str,
) -> Check:
    where = provider.setting("COUNCIL_LLM_STRUCTURED_OUTPUT", "providers.{name}.structured_output")
    named = {JSON_OBJECT_WITH_SCHEMA: "json_object"}.get(form or "", form)
    asked = f"as {named}" if form else "in the prompt alone"
    # No test call is made when GET /models refused the key.
    if listing.reply.refused_key or (probe is not None and probe.refused_key):
        return skipped(name, "the provider refused the key")
    if probe is None:
        if not provider.members:
            return skipped(name, "no council member routes here, so no test call was made")
        return skipped(name, "no council member's model is listed, so no test call was made")
    model = probed[0]
    if probe.status is not None and 200 <= probe.status < 300:
        problem = probe_problem(probe)
        if problem is None:
            return passed(
                name,
                f"{model} answered a test call asked for {asked} ({where}: "
                f"{settings.structured_output}) in the JSON schema it was given",
            )
        if form is None:
            fix = (
                f"{where} is off, so only the prompt asks for the schema: reviews are read "
                "from their text, but a client's response_format (/v1, MCP) gets an error; "
                f"set {where} to auto if the provider takes a schema"
            )
        else:
            fix = (
                "the provider ignores response_format for this model: reviews are then read "
                "from their text, but a client's response_format (/v1, MCP) gets an error; "
                f"use a model and provider with structured outputs, or set {where} to "
                "json_object if it takes the schema that way (llama.cpp's server)"
            )
        return failed(
            name,
            f"{model} was asked for a reply in a JSON schema ({asked}, {where}: "
            f"{settings.structured_output}) and answered otherwise: {problem}",
            fix,
        )
    why = probe.why(settings.host)
    if probe.status is not None and form is not None:
        failure = status_failure(probe.status, probe.body, host=settings.host)
        if refuses_form(failure):
            return failed(
                name,
                f"{model} refused a reply asked for {asked}: {why}",
                f"reviews then fall back to a plainer form or free text; set {where} to "
                "json_object (or off) to skip the refused form",
            )
    return failed(
        name,
        f"a test call to {model} failed: {why}",
        "the worker's calls would fail the same way: see the provider's message",
    )


def default_council_check(
    config: Config, env: Mapping[str, str], listings: Mapping[str, Listing | None]
) -> Check:
    """The members and chairman a plain `starter.py start` uses, each listed by its
    provider."""
    if app_settings.of(env).default_models:
        source = "COUNCIL_MODELS"
    elif councils.running_local_council(env) is not None:
        source = "the make up running on this Temporal server and task queue"
    elif DEFAULT_COUNCIL in config.councils:
        source = "[councils.default] of council.toml"
    else:
        source = "the built-in members"
    try:
        request = validate_request({"question": "?", **councils.council_options(config, None, env)})
    except InvalidRequest as error:
        return failed(
            DEFAULT_COUNCIL_CHECK,
            f"cannot start from {source}: {error}",
            "correct COUNCIL_MODELS, COUNCIL_CHAIRMAN or [councils.default] in council.toml",
        )
    chairman = request.chairman or request.models[0]
    detail = f"{', '.join(request.models)}; chairman {chairman} (from {source})"
    unlisted: list[str] = []
    unknown: dict[str, None] = {}
    for model in dict.fromkeys([*request.models, chairman]):
        provider = route(model, config.providers)
        listing = listings.get(provider)
        if listing is None or listing.models is None:
            unknown[provider] = None
        elif model not in listing.models:
            unlisted.append(f"{model} (provider {provider})")
    if unlisted:
        return failed(
            DEFAULT_COUNCIL_CHECK,
            f"{detail}; not listed by its provider: {', '.join(unlisted)}",
            "set COUNCIL_MODELS (or models in [councils.default]) to ids the providers list",
        )
    if unknown:
        return skipped(
            DEFAULT_COUNCIL_CHECK,
            f"{detail}; no model list from provider {', '.join(unknown)}",
        )
    return passed(DEFAULT_COUNCIL_CHECK, f"{detail}; each listed by its provider")


async def provider_checks(env: Mapping[str, str] | None = None) -> tuple[list[Check], list[str]]:
    """council.toml, each provider's checks, the default council; and the secrets the
    checks must not show."""
    env = os.environ if env is None else env
    try:
        path = app_config.config_path(env)
        config = app_config.load(env)
    except ConfigProblem as problem:
        why = "council.toml cannot be used"
        return [
            failed(CONFIG, str(problem), "correct the key it names (docs/providers.md)"),
            skipped("providers", why),
            skipped(DEFAULT_COUNCIL_CHECK, why),
        ], []
    found = passed(
        CONFIG,
        f"{path}: {len(config.providers)} provider(s), {len(config.councils)} council(s)"
        if path
        else "none (COUNCIL_CONFIG unset, no ./council.toml): every model goes to the "
        "default provider",
    )
    providers = providers_of(config, str(path or CONFIG), env)
    results = await asyncio.gather(*(check_provider(p) for p in providers))
    checks = [found, *(check for result, _ in results for check in result)]
    listings = {p.name: listing for p, (_, listing) in zip(providers, results, strict=True)}
    checks.append(default_council_check(config, env, listings))
    secrets = [s for p in providers if p.settings for s in p.settings.secrets()]
    return checks, secrets
