"""The tools of council.toml: each MCP server asked what it offers (as a run's first tool
call would), and the web search's backend asked once. Nothing is checked where no tool is
configured (fetch is built in and needs nothing). A check names the tools an entry
withholds, and why.

Before a run starts, its surface asks the same of the MCP servers it names
(`offer_problem`, through app.requests.front_door.check_tools): a run given an entry that offers
none of its tools is refused, and so is one given two entries that offer one function
name. What a server offers is kept OFFER_SECONDS by the process.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from activities.confinement import Confinement
from activities.tool_failure import ToolFailure
from app.installation.secret_paths import kept_from_tools
from app.settings import config as app_config
from council.config import ConfigProblem
from council.tool_config import SEARCH_SETUP, McpEntry, Tools, clashing, nothing_offered
from council.tools import WEB_SEARCH, offered_name
from doctor.checks import Check, failed, passed

if TYPE_CHECKING:
    from activities.mcp_tools import Listing

SHOWN_TOOLS = 8
PROBE_QUERY = "Temporal workflow"
# How long a process that starts runs keeps what an MCP server offers (a burst of starts
# asks it once; a change to the server is seen within this).
OFFER_SECONDS = 30.0
# What a server offered, by entry: (when it was asked, what it said; None: it could not say).
_offers: dict[str, tuple[float, Listing | None]] = {}


async def offer_problem(
    tools: Tools, names: Sequence[str], env: Mapping[str, str] | None = None
) -> str | None:
    """Why a run given the tools `names` must not start: an MCP entry among them offers
    none of its tools (council.tool_config.nothing_offered), or two offer one function name
    (council.tool_config.clashing), one line; None when neither, or a server cannot say now
    (the run goes on and its record says why)."""
    env = os.environ if env is None else env
    servers = tools.servers()
    named = [name for name in names if name in servers]
    listings = await asyncio.gather(*(_listing(name, servers[name], env) for name in named))
    path = str(app_config.config_path(env) or app_config.DEFAULT_FILE)
    for name, listing in zip(named, listings, strict=True):
        if listing is not None and not listing.specs and listing.withheld:
            return nothing_offered(name, listing.withheld, path)
    offers = {
        name: [spec.name for spec in listing.specs]
        for name, listing in zip(named, listings, strict=True)
        if listing is not None
    }
    return clashing(offers, path)


async def read_confined(name: str, entry: McpEntry, env: Mapping[str, str]) -> Listing:
    """What the server of `entry` offers, asked as a worker asks it: a stdio server confined
    and kept from this installation's files of keys (activities.confinement)."""
    from activities import mcp_tools  # (the MCP SDK takes a second to import)

    sessions = mcp_tools.Sessions(confinement=Confinement.hiding(kept_from_tools(env)))
    try:
        return await mcp_tools.read_tools(
            name, entry.model_copy(update={"keep_open": False}), env, sessions
        )
    finally:
        await sessions.aclose()


async def _listing(name: str, entry: McpEntry, env: Mapping[str, str]) -> Listing | None:
    """What the server of `entry` offers, asked at most once in OFFER_SECONDS."""
    key = name + "\n" + entry.model_dump_json()
    now = time.monotonic()
    kept = _offers.get(key)
    if kept is not None and now - kept[0] < OFFER_SECONDS:
        return kept[1]
    try:
        listing: Listing | None = await read_confined(name, entry, env)
    except ToolFailure:
        listing = None
    _offers[key] = (time.monotonic(), listing)
    return listing


def withheld_detail(name: str, withheld: Mapping[str, str]) -> str:
    """ "withheld: calc__a, calc__b (why); calc__c (why)": an entry's withheld tools,
    grouped by why ("" when none)."""
    reasons: dict[str, list[str]] = {}
    for tool, why in withheld.items():
        reasons.setdefault(why, []).append(offered_name(name, tool))
    groups = []
    for why, functions in reasons.items():
        more = len(functions) - SHOWN_TOOLS
        shown = ", ".join(functions[:SHOWN_TOOLS]) + (f" and {more} more" if more > 0 else "")
        groups.append(f"{shown} ({why})")
    return "withheld: " + "; ".join(groups) if groups else ""


async def tool_checks(env: Mapping[str, str] | None = None) -> tuple[list[Check], list[str]]:
    """A check per configured tool server and for the search backend; and the secrets
    (their tokens and keys) the checks must not show."""
    env = os.environ if env is None else env
    try:
        path = app_config.config_path(env) or app_config.DEFAULT_FILE
        tools = app_config.load(env).tool_set()
    except ConfigProblem:
        return [], []  # the council.toml check says why
    if not (tools.servers() or WEB_SEARCH in tools.entries):
        return [], []
    # Loaded only where there is something to ask (the MCP SDK takes a second to import).
    from activities import web_tools

    checks: list[Check] = []
    secrets: list[str] = []
    for name, entry in tools.servers().items():
        if entry.token_env:
            secrets.append(env.get(entry.token_env, ""))
        check = f"tool {name}"
        where = "its command and cwd" if entry.command else "its url and token_env"
        try:
            listing = await read_confined(name, entry, env)
        except ToolFailure as failure:
            checks.append(failed(check, str(failure), f"check [tools.{name}] in {path}: {where}"))
            continue
        specs = listing.specs
        names = ", ".join(spec.name for spec in specs[:SHOWN_TOOLS])
        more = f" and {len(specs) - SHOWN_TOOLS} more" if len(specs) > SHOWN_TOOLS else ""
        detail = f"{len(specs)} tool(s) offered: {names}{more}" if specs else "no tool offered"
        withheld = withheld_detail(name, listing.withheld)
        detail += f"; {withheld}" if withheld else ""
        if specs:
            checks.append(passed(check, detail))
        elif listing.withheld:
            fix = nothing_offered(name, listing.withheld, str(path)).partition(": ")[2]
            checks.append(failed(check, detail, fix))
        else:
            fix = f"check [tools.{name}] in {path}: {where}"
            checks.append(failed(check, "the server lists no tools", fix))
    if WEB_SEARCH in tools.entries:
        search = tools.search()
        if search.brave_key_env:
            secrets.append(env.get(search.brave_key_env, ""))
        check = f"tool {WEB_SEARCH}"
        if not search.configured:
            checks.append(failed(check, "no search backend", SEARCH_SETUP))
        else:
            try:
                found = await web_tools.web_search({"query": PROBE_QUERY}, search, env)
            except ToolFailure as failure:
                fix = f"check [tools.{WEB_SEARCH}] in {path}"
                checks.append(failed(check, str(failure), fix))
            else:
                listed = sum(line[:1].isdigit() for line in found.splitlines())
                checks.append(passed(check, f"the backend answers ({listed} result(s))"))
    return checks, [s for s in secrets if len(s) >= 4]
