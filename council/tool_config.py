"""council.toml's `[tools]`: the tools a council can be given.

    [tools.calc]                      # an MCP server over stdio
    command = ["python", "examples/calculator_mcp.py"]
    env = { UNITS = "si" }            # optional; cwd = "..." optional
    # trusted = true                  # start it unconfined (activities.confinement)
    allow = ["evaluate", "convert"]   # optional: only these of its tools are offered (naming
                                      # one offers it, read-only or not)

    [tools.docs]                      # an MCP server over streamable HTTP
    url = "https://tools.example.com/mcp"
    token_env = "DOCS_TOKEN"          # the NAME of the variable that holds the token
    side_effects = true               # offer tools that do not declare themselves read-only

    [tools.fetch]                     # the built-in fetch (optional: it works without)
    allow_addresses = ["127.0.0.1"]   # private or loopback addresses it may reach

    [tools.web_search]                # the built-in web search needs a backend:
    searxng_url = "http://127.0.0.1:8888/search"   # a SearXNG-compatible JSON endpoint
    # or: brave_key_env = "BRAVE_API_KEY"          # Brave's Search API, by key variable

Every entry may set `timeout` (seconds a call may take) and `max_attempts`. Pure: parsing
and checks only; the worker runs the tools (activities.tools).

Which of an MCP server's tools are offered (McpEntry.withholds): with `allow`, the tools it
names (naming one is consent, whatever it declares) and no other; without, the tools that
declare themselves read-only (`readOnlyHint`), and the others only with `side_effects =
true`. A tool not offered is withheld, and said so: in `doctor`, in the record of a run
(`tools_withheld`, withheld_lines), and, where an entry a run names offers none of its
tools, in the refusal of its start (nothing_offered).

Each tool is offered to the models under one function name, its entry's and its own
(council.tools.offered_name): two entries a run names that would offer the same name
(`[tools."calc.v2"]` and `[tools.calc_v2]`, whose names read the same once cleaned) refuse
its start, naming both (clashing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from council.tools import (
    BUILTINS,
    DEFAULT_TOOL_ATTEMPTS,
    DEFAULT_TOOL_TIMEOUT,
    FETCH,
    MAX_TOOL_ATTEMPTS,
    MAX_TOOL_TIMEOUT,
    WEB_SEARCH,
    offered_name,
)
from council.variables import variable_name

_URL = r"^https?://[^\s/?#]+(/[^\s?#]*)?$"
SEARCH_SETUP = (
    "set a search backend under [tools.web_search] in council.toml: searxng_url = "
    '"http://host/search" (a SearXNG-compatible JSON endpoint), or brave_key_env = '
    '"BRAVE_API_KEY" (the name of the variable holding a Brave Search API key)'
)
# Why an MCP server's tool is withheld (McpEntry.withholds).
OFFERED_BY = "offered with side_effects = true or by naming it in allow"
NOT_READ_ONLY = f"does not declare readOnlyHint; {OFFERED_BY}"
WRITES = f"declares itself not read-only (readOnlyHint false); {OFFERED_BY}"
NOT_ALLOWED = "not named in allow"
# The most withheld tools of one entry a run's record names one by one (then a count).
MAX_WITHHELD_LINES = 20
# The most tool names one line of a refusal names (then a count).
NAMED_IN_A_LINE = 5


class ToolLimits(BaseModel):
    """What every entry may set: how long a call may take and how often it is tried."""

    model_config = ConfigDict(extra="forbid")

    timeout: float = Field(DEFAULT_TOOL_TIMEOUT, gt=0, le=MAX_TOOL_TIMEOUT)
    max_attempts: int = Field(DEFAULT_TOOL_ATTEMPTS, ge=1, le=MAX_TOOL_ATTEMPTS)


class McpEntry(ToolLimits):
    """An MCP server: over stdio (`command`) or streamable HTTP (`url`), one of the two."""

    command: list[str] | None = Field(None, min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = Field(None, pattern=_URL)
    token_env: str | None = None
    allow: list[str] | None = None
    side_effects: bool = False
    # A stdio server started unconfined, as the worker's user (activities.confinement):
    # only where the machine cannot confine one, for a server one trusts with the keys.
    trusted: bool = False
    # Keep the session (a stdio server's process) open for the next call of any run
    # (activities.mcp_tools.Sessions); false: a session, and a server, for each call.
    keep_open: bool = True

    @field_validator("token_env")
    @classmethod
    def _token(cls, name: str | None) -> str | None:
        return variable_name(name)

    def withholds(self, tool: str, read_only: bool | None) -> str | None:
        """Why the server's `tool` is not offered to a council (None: it is); `read_only`:
        its readOnlyHint (None: it declares none, the SDK's default). With `allow`, the
        tools it names are offered, read-only or not (naming one is consent); without, a
        tool that does not declare itself read-only is offered only with side_effects."""
        if self.allow is not None:
            return None if tool in self.allow else NOT_ALLOWED
        if read_only or self.side_effects:
            return None
        return NOT_READ_ONLY if read_only is None else WRITES

    @model_validator(mode="after")
    def _one_transport(self) -> McpEntry:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (stdio) or url (streamable HTTP)")
        if self.url is None and self.token_env is not None:
            raise ValueError("token_env goes with url")
        if self.command is None and (self.env or self.cwd or self.trusted):
            raise ValueError("env, cwd and trusted go with command")
        return self


class FetchEntry(ToolLimits):
    """The built-in fetch: a URL's readable text."""

    # Addresses or networks (CIDR) fetch may reach although they are loopback, private,
    # link-local or a cloud's metadata address (refused otherwise).
    allow_addresses: list[str] = Field(default_factory=list)
    max_bytes: int = Field(2_000_000, ge=1_000, le=50_000_000)
    max_redirects: int = Field(5, ge=0, le=20)

    @field_validator("allow_addresses")
    @classmethod
    def _addresses(cls, values: list[str]) -> list[str]:
        import ipaddress

        for value in values:
            try:
                ipaddress.ip_network(value, strict=False)
            except ValueError:
                raise ValueError(f"{value!r} is not an IP address or network") from None
        return values


class SearchEntry(ToolLimits):
    """The built-in web search: a SearXNG-compatible JSON endpoint, or Brave's API."""

    searxng_url: str | None = Field(None, pattern=_URL)
    brave_key_env: str | None = None
    brave_url: str = Field("https://api.search.brave.com/res/v1/web/search", pattern=_URL)
    results: int = Field(5, ge=1, le=20)

    @field_validator("brave_key_env")
    @classmethod
    def _key(cls, name: str | None) -> str | None:
        return variable_name(name)

    @model_validator(mode="after")
    def _one_backend(self) -> SearchEntry:
        if self.searxng_url is not None and self.brave_key_env is not None:
            raise ValueError("give searxng_url or brave_key_env, not both")
        return self

    @property
    def configured(self) -> bool:
        return self.searxng_url is not None or self.brave_key_env is not None


ToolEntry = McpEntry | FetchEntry | SearchEntry


class Tools(BaseModel):
    """The `[tools]` table, each entry read as what its name makes it."""

    entries: dict[str, ToolEntry] = Field(default_factory=dict)

    @classmethod
    def of(cls, table: Mapping[str, Any]) -> Tools:
        entries: dict[str, ToolEntry] = {}
        for name, value in table.items():
            kind: type[ToolEntry] = (
                FetchEntry if name == FETCH else SearchEntry if name == WEB_SEARCH else McpEntry
            )
            entries[name] = kind.model_validate(value)
        return cls(entries=entries)

    def fetch(self) -> FetchEntry:
        entry = self.entries.get(FETCH)
        return entry if isinstance(entry, FetchEntry) else FetchEntry()

    def search(self) -> SearchEntry:
        entry = self.entries.get(WEB_SEARCH)
        return entry if isinstance(entry, SearchEntry) else SearchEntry()

    def servers(self) -> dict[str, McpEntry]:
        return {n: e for n, e in self.entries.items() if isinstance(e, McpEntry)}

    def names(self) -> list[str]:
        """Every tool name a council may list: the servers, then the built-ins."""
        return [*self.servers(), *BUILTINS]

    def available(self) -> list[str]:
        """The names a council can be given now (web_search only with a backend)."""
        return [name for name in self.names() if not self.problem([name])]

    def problem(self, wanted: list[str]) -> str | None:
        """Why these tool names cannot be given to a council (one line), or None."""
        for name in wanted:
            if name not in self.names():
                return (
                    f"tools: {name!r} is not a configured tool (configured: "
                    f"{', '.join(self.names())}; MCP servers are [tools.NAME] entries of "
                    "council.toml)"
                )
            if name == WEB_SEARCH and not self.search().configured:
                return f"tools: web_search has no search backend: {SEARCH_SETUP}"
        return None


def withheld_lines(
    name: str, withheld: Mapping[str, str], limit: int = MAX_WITHHELD_LINES
) -> list[str]:
    """What a run's record says of the tools of entry `name` that were withheld (each tool
    at its server: why): "calc__delete: why", one a tool, the last of `limit` lines a count
    of the rest."""
    lines = [f"{offered_name(name, tool)}: {why}" for tool, why in withheld.items()]
    if len(lines) <= limit:
        return lines
    rest = len(lines) - (limit - 1)
    return [*lines[: limit - 1], f"{name}: {rest} more tools withheld"]


def nothing_offered(name: str, withheld: Mapping[str, str], path: str = "council.toml") -> str:
    """The refusal of a start that names entry `name` when none of its tools is offered
    (`withheld`: each of its tools: why): one line naming the entry and the setting that
    offers them."""
    where = f"[tools.{name}] of {path}"
    unmarked = [tool for tool, why in withheld.items() if why != NOT_ALLOWED]
    if unmarked:
        one = len(unmarked) == 1
        return (
            f"tools: {name} offers none of its tools: {_names(unmarked)} "
            f"{'is' if one else 'are'} not declared read-only (readOnlyHint); offer "
            f"{'it' if one else 'them'} with side_effects = true in {where}, or name "
            f"{'it' if one else 'them'} in its allow"
        )
    return (
        f"tools: {name} offers none of its tools: its allow names none of them (it has "
        f"{_names(list(withheld))}); name them in the allow of {where}, or leave allow out"
    )


def clashing(offers: Mapping[str, Sequence[str]], path: str = "council.toml") -> str | None:
    """The refusal of a start whose MCP entries (name -> the functions each offers, as
    council.tools.offered_name makes them) offer one function name twice: a model could
    not tell the two apart, nor the worker where to send its call. One line naming both
    entries and the name; None when every name is offered once."""
    first: dict[str, str] = {}
    for name, functions in offers.items():
        for function in functions:
            other = first.setdefault(function, name)
            if other != name:
                return (
                    f"tools: [tools.{other}] and [tools.{name}] of {path} both offer "
                    f"{function} (an offered name is the entry's and the tool's, joined by "
                    "__, in letters, digits, _ and -, at most 64 characters): rename one "
                    "of the two entries"
                )
    return None


def _names(tools: Sequence[str]) -> str:
    shown = ", ".join(tools[:NAMED_IN_A_LINE])
    more = len(tools) - NAMED_IN_A_LINE
    return shown + (f" and {more} more" if more > 0 else "")
