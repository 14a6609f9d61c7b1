"""The configuration file (`council.toml`): model providers and named councils.

    [providers.local]
    base_url = "http://127.0.0.1:11434/v1"
    api_key_env = "LOCAL_KEY"        # the NAME of the variable: keys never go in the file
    models = ["llama*", "qwen*"]     # fnmatch patterns of the model ids it serves

    [councils.quick]
    models = ["a", "b", "c"]
    chairman = "a"
    max_rounds = 1                   # any start option

A model id goes to the first provider (in the file's order) with a pattern that matches
it, else to the default provider (COUNCIL_LLM_BASE_URL). A council is a set of start
options; `[councils.default]` is the council used when none is named.

This module parses text and answers questions about it (no file, no environment):
app.settings.config reads the file and the variables.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Json,
    SecretStr,
    ValidationError,
    field_validator,
)

from council.numbers import Number, WholeNumber
from council.tool_config import Tools
from council.validation import InvalidRequest, validate_request
from council.variables import variable_name

DEFAULT_COUNCIL = "default"
DEFAULT_PROVIDER = "default"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}")
# What a council may not set: each request's own question, and a thread's fields.
NOT_COUNCIL_OPTIONS = frozenset(
    {
        "question",
        "follow_up_of",
        "thread_id",
        "history",
        "dropped_turns",
        "unnamed_dropped",
        "instructions",
        "attachments",
    }
)


# How a reply's JSON schema is sent: auto tries json_schema, then json_object (with the
# schema, as llama.cpp's server takes it), then json_object alone, then nothing, keeping
# for each model the first form the provider accepts; the others send that form or nothing.
StructuredOutput = Literal["auto", "json_schema", "json_object", "off"]
# The most requests per second a provider may be given.
MAX_REQUESTS_PER_SECOND = 10_000
OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"


class ConfigProblem(ValueError):
    """The file cannot be used: one line naming the file and the key."""


def _pattern_problem(pattern: str) -> str | None:
    if not pattern or pattern != pattern.strip() or any(ch.isspace() for ch in pattern):
        return "is empty or holds white space"
    depth = 0
    for ch in pattern:
        depth += ch == "["
        depth -= ch == "]" and depth > 0
        if depth > 1:
            return "nests brackets"
    if depth:
        return "opens a bracket it does not close"
    return None


class ProviderConfig(BaseModel):
    """One provider: where, with which key (the variable's name), for which models, and
    the same settings as the default provider's COUNCIL_LLM_* variables."""

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(pattern=r"^https?://[^\s/?#]+(/[^\s?#]*)?$")
    api_key_env: str | None = None
    models: list[str] = Field(min_length=1)
    stream: bool = True
    extra_headers: dict[str, str] = Field(default_factory=dict)
    connect_timeout: float = Field(default=10.0, gt=0, le=600)
    read_timeout: float = Field(default=300.0, gt=0, le=3600)
    structured_output: StructuredOutput = "auto"
    context_window: int | None = Field(default=None, ge=256, le=10_000_000)
    # Whether its models take images (OpenAI's image_url parts): true for all of them, or
    # the patterns of those that do. The others are told of an image they could not see.
    images: bool | list[str] = False
    # Whether its models take tools (function calling): true for all of them (the
    # default), false for none, or the patterns of those that do. The others answer
    # without tools, and the record says so.
    tools: bool | list[str] = True
    # Requests this provider is sent at once, by all worker processes together: each takes
    # its share (activities.slots).
    max_concurrent_requests: int | None = Field(default=None, ge=1, le=1024)
    # Requests started per second, by all workers together: the provider's calls go to a
    # task queue of their own whose rate the Temporal server enforces (workflows.routes).
    max_requests_per_second: float | None = Field(default=None, gt=0, le=MAX_REQUESTS_PER_SECOND)

    @field_validator("api_key_env")
    @classmethod
    def _variable(cls, name: str | None) -> str | None:
        return variable_name(name)

    @field_validator("images", "tools")
    @classmethod
    def _image_patterns(cls, images: bool | list[str]) -> bool | list[str]:
        return images if isinstance(images, bool) else cls._patterns(images)

    @field_validator("models")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            problem = _pattern_problem(pattern)
            if problem:
                raise ValueError(f"the pattern {pattern!r} {problem}")
        return patterns


SECONDS = "a number of seconds"


def variable(name: str, default: Any = None, what: str | None = None, **rules: Any) -> Any:
    """The field read from the variable `name`: its default, what a value must be (the
    description, left to the type's own where None) and Field's other rules (ge, gt, le,
    repr) in one call."""
    if what is not None:
        rules["description"] = what
    return Field(default, validation_alias=name, **rules)


class DefaultProvider(BaseModel):
    """The default provider (COUNCIL_LLM_*, OPENROUTER_API_KEY): the one a model goes to
    when no provider of the file claims it. Read with the other variables, as `Settings.llm`
    (app.settings); each field names its variable and what its value must be."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    base_url: str = variable("COUNCIL_LLM_BASE_URL", OPENROUTER_BASE_URL, "a URL")
    api_key: SecretStr | None = variable("COUNCIL_LLM_API_KEY", None, "an API key", repr=False)
    # The key when COUNCIL_LLM_API_KEY is unset.
    openrouter_api_key: SecretStr | None = variable(
        "OPENROUTER_API_KEY", None, "an API key", repr=False
    )
    stream: bool = variable("COUNCIL_LLM_STREAM", True)
    # May hold credentials: never shown.
    extra_headers: Json[dict[str, str]] = Field(
        default_factory=dict,
        validation_alias="COUNCIL_LLM_EXTRA_HEADERS",
        description='a JSON object of string header values, such as {"X-Header": "value"}',
        repr=False,
    )
    connect_timeout: Number = variable("COUNCIL_LLM_CONNECT_TIMEOUT", 10.0, SECONDS, gt=0)
    read_timeout: Number = variable("COUNCIL_LLM_READ_TIMEOUT", 300.0, SECONDS, gt=0)
    structured_output: StructuredOutput = variable("COUNCIL_LLM_STRUCTURED_OUTPUT", "auto")
    context_window: WholeNumber | None = variable(
        "COUNCIL_LLM_CONTEXT_WINDOW", None, "a number of tokens", ge=256, le=10_000_000
    )
    max_concurrent_requests: WholeNumber | None = variable(
        "COUNCIL_LLM_MAX_CONCURRENT_REQUESTS", None, "a whole number", ge=1, le=1024
    )
    max_requests_per_second: Number | None = variable(
        "COUNCIL_LLM_MAX_REQUESTS_PER_SECOND",
        None,
        "a number of requests per second",
        gt=0,
        le=MAX_REQUESTS_PER_SECOND,
    )
    images: bool = variable("COUNCIL_LLM_IMAGES", False)
    # Whether its models take tools (function calling).
    tools: bool = variable("COUNCIL_LLM_TOOLS", True)

    @field_validator("structured_output", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @property
    def key(self) -> str | None:
        """The API key: COUNCIL_LLM_API_KEY, else OPENROUTER_API_KEY."""
        value = self.api_key or self.openrouter_api_key
        return value.get_secret_value() if value is not None else None

    @property
    def key_variable(self) -> str | None:
        """The variable the key comes from; None without a key."""
        if self.api_key is not None:
            return "COUNCIL_LLM_API_KEY"
        return "OPENROUTER_API_KEY" if self.openrouter_api_key is not None else None

    @classmethod
    def variables(cls) -> tuple[str, ...]:
        return tuple(str(field.validation_alias) for field in cls.model_fields.values())

    @classmethod
    def read(cls, variables: Mapping[str, str]) -> DefaultProvider:
        """The default provider of these variables (its own, stripped; an empty one is
        unset); ValidationError. app.settings reads it with every other variable."""
        mine = {name: variables[name].strip() for name in cls.variables() if name in variables}
        return cls.model_validate({name: value for name, value in mine.items() if value})


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")

    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    # Council name -> start options (checked against the request when the file is read).
    councils: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Tool name -> its entry (council.tool_config), checked when the file is read.
    tools: dict[str, dict[str, Any]] = Field(default_factory=dict)

    def tool_set(self) -> Tools:
        """The tools a council can be given (council.tool_config)."""
        return Tools.of(self.tools)

    def council(self, name: str) -> dict[str, Any]:
        """The start options of a named council; KeyError if there is none."""
        return dict(self.councils[name])

    def council_names(self) -> list[str]:
        """Named councils, the default (if the file has one) first."""
        return sorted(self.councils, key=lambda n: (n != DEFAULT_COUNCIL, n))


def _where(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _problem(source: str, within: tuple[str, ...], error: ValidationError) -> ConfigProblem:
    """The first thing wrong, in one line naming the key (never the value)."""
    first = error.errors()[0]
    where = _where((*within, *tuple(first["loc"])))
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "is not a known key"
    elif first["type"] == "string_pattern_mismatch":
        message = "must be an http:// or https:// URL"
    joint = " " if message.startswith(("is ", "must ")) else ": "
    return ConfigProblem(f"{source}: {where}{joint}{message}")


def parse_config(text: str, source: str = "council.toml") -> Config:
    """The configuration in `text`; ConfigProblem with one line otherwise."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigProblem(f"{source}: not valid TOML ({error})") from None
    try:
        config = Config.model_validate(data)
    except ValidationError as error:
        raise _problem(source, (), error) from None
    for name, entry in config.tools.items():  # each on its own: a problem names its entry
        try:
            Tools.of({name: entry})
        except ValidationError as error:
            raise _problem(source, ("tools", name), error) from None
    tools = config.tool_set()
    for name in [*config.providers, *config.councils, *config.tools]:
        if not _NAME.fullmatch(name):
            raise ConfigProblem(
                f"{source}: {name!r} is not a name (letters, digits and _ . -, up to 64)"
            )
    if DEFAULT_PROVIDER in config.providers:
        raise ConfigProblem(
            f"{source}: providers.{DEFAULT_PROVIDER} is reserved: the default provider is "
            "COUNCIL_LLM_BASE_URL's"
        )
    for name, options in config.councils.items():
        council_problem(options, f"{source}: councils.{name}")
        problem = tools.problem(list(options.get("tools") or []))
        if problem:
            raise ConfigProblem(f"{source}: councils.{name}.{problem}")
    return config


def council_problem(options: Mapping[str, Any], where: str) -> None:
    """Raise ConfigProblem when a council's options cannot start a deliberation."""
    wrong = sorted(set(options) & NOT_COUNCIL_OPTIONS)
    if wrong:
        raise ConfigProblem(f"{where}.{wrong[0]} is not a council option")
    if "models" not in options:
        raise ConfigProblem(f"{where}.models is required")
    try:
        validate_request({"question": "?", **options})
    except InvalidRequest as error:
        raise ConfigProblem(f"{where}.{error}") from None


def route(model: str, providers: Mapping[str, ProviderConfig]) -> str:
    """The provider of a model id: the first whose patterns match it, else the default."""
    for name, provider in providers.items():
        if any(fnmatchcase(model, pattern) for pattern in provider.models):
            return name
    return DEFAULT_PROVIDER


def with_overrides(options: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """A council's options with what a user gave for this deliberation on top: a value
    replaces the council's, a table (policy, max_tokens) is merged key by key, and given
    models without a given chairman drop a council chairman that is not among them."""
    merged = dict(options)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    given_models = "models" in overrides and "chairman" not in overrides
    if given_models and merged.get("chairman") not in overrides["models"]:
        merged.pop("chairman", None)
    return merged
