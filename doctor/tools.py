"""The tools of council.toml: each MCP server asked what it offers (as a run's first tool
call would), and the web search's backend asked once. Nothing is checked where no tool is
configured (fetch is built in and needs nothing)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from activities.tool_failure import ToolFailure
from app import config as app_config
from council.config import ConfigProblem
from council.tool_config import SEARCH_SETUP
from council.tools import WEB_SEARCH
from doctor.checks import Check, failed, passed

SHOWN_TOOLS = 8
PROBE_QUERY = "Temporal workflow"


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
    from activities import mcp_tools, web_tools

    checks: list[Check] = []
    secrets: list[str] = []
    for name, entry in tools.servers().items():
        if entry.token_env:
            secrets.append(env.get(entry.token_env, ""))
        check = f"tool {name}"
        try:
            specs = await mcp_tools.list_tools(name, entry, env)
        except ToolFailure as failure:
            where = "its command and cwd" if entry.command else "its url and token_env"
            checks.append(failed(check, str(failure), f"check [tools.{name}] in {path}: {where}"))
            continue
        names = ", ".join(spec.name for spec in specs[:SHOWN_TOOLS])
        more = f" and {len(specs) - SHOWN_TOOLS} more" if len(specs) > SHOWN_TOOLS else ""
        detail = f"{len(specs)} tool(s) offered: {names}{more}" if specs else "no tool offered"
        fix = f"allow, or side_effects = true, in [tools.{name}] of {path}"
        checks.append(passed(check, detail) if specs else failed(check, detail, fix))
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
