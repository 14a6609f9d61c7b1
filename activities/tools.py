"""The tool activities: what a run's tools offer, and one tool call.

    toolbox = ToolBox(config.tools)
    Worker(..., activities=[toolbox.list_tools, toolbox.call_tool])
    await toolbox.aclose()  # once the worker has stopped: the MCP servers' sessions

A tool is a built-in (activities.web_tools: fetch, web_search) or an MCP server of
council.toml's [tools] (activities.mcp_tools). Keys for tool servers are read here, from
the worker's environment, and never leave it: the workflow sees names, arguments and
results. A tool that fails, hangs or lies costs that call: what the tool or the member got
wrong is returned as the call's error (not retried: it would go wrong again); a failure
that may pass (a timeout, a connection lost, a server that crashed) fails the attempt, and
Temporal tries again as the tool's entry says (`max_attempts`), the last attempt's failure
returned as the call's error.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.confinement import Confinement
from activities.errors import one_line
from activities.tool_failure import ToolFailure
from council.redaction import Redactor
from council.tool_config import McpEntry, Tools, withheld_lines
from council.tools import FETCH, WEB_SEARCH, ToolOffer, ToolResult, ToolRun, cut_result

if TYPE_CHECKING:
    from activities.mcp_tools import Sessions

log = logging.getLogger("council.tools")
ERROR_CHARS = 300
# A tool call's heartbeats (the workflow's heartbeat timeout is a few times this).
BEAT_SECONDS = 1.0


async def _heartbeats() -> None:
    while True:
        activity.heartbeat()
        await asyncio.sleep(BEAT_SECONDS)


class ToolBox:
    """The worker's tools: council.toml's [tools], their keys from the environment."""

    def __init__(
        self,
        tools: Tools | None = None,
        env: Mapping[str, str] | None = None,
        secrets: Iterable[str] = (),
        confinement: Confinement | None = None,
    ) -> None:
        """`secrets`: others kept out of every result and error (the providers' keys);
        `confinement`: how its stdio servers start (activities.confinement; default:
        confined, hiding nothing more)."""
        self.tools = tools or Tools()
        self.confinement = confinement or Confinement()
        self.env = dict(os.environ if env is None else env)
        keys = [
            self.env.get(variable, "")
            for variable in self._key_variables()
            if len(self.env.get(variable, "")) >= 4
        ]
        self.redactor = Redactor([*keys, *secrets])
        # The MCP servers' sessions, kept open between calls (activities.mcp_tools.Sessions;
        # made at the first call, as the module is loaded then).
        self._sessions: Sessions | None = None

    async def aclose(self) -> None:
        """Close the MCP servers' sessions (the worker has stopped)."""
        if self._sessions is not None:
            await self._sessions.aclose()

    def _mcp_sessions(self) -> Sessions:
        from activities import mcp_tools  # (see list_tools)

        if self._sessions is None:
            self._sessions = mcp_tools.Sessions(confinement=self.confinement)
        return self._sessions

    def _key_variables(self) -> list[str]:
        names = [e.token_env for e in self.tools.servers().values() if e.token_env]
        search = self.tools.search().brave_key_env
        return [*names, *([search] if search else [])]

    @activity.defn
    async def list_tools(self, names: list[str]) -> ToolOffer:
        """The functions these tools offer, as the models are shown them, and the tools
        their entries withhold (each a line); a server that cannot say is left out (its
        line in `unavailable`), never the run."""
        problem = self.tools.problem(names)
        if problem:
            raise ApplicationError(problem, type="UnknownTool", non_retryable=True)
        # Loaded at a worker's first tool call, not by every process that imports the
        # workflows: the MCP SDK and the HTML parser take about a second to import.
        from activities import mcp_tools, web_tools

        offer = ToolOffer()
        for name in names:
            if name == FETCH:
                offer.specs.append(web_tools.fetch_spec(self.tools.fetch()))
            elif name == WEB_SEARCH:
                offer.specs.append(web_tools.search_spec(self.tools.search()))
            else:
                try:
                    listing = await mcp_tools.read_tools(
                        name, self._server(name), self.env, self._mcp_sessions()
                    )
                except ToolFailure as failure:
                    log.warning("the tools of %s cannot be read: %s", name, self._line(failure))
                    offer.unavailable[name] = self._line(failure)
                    continue
                # A name another entry offers already (its start was refused where its
                # servers could say so: app.requests.front_door.check_tools): the first keeps it.
                taken = {spec.name: spec.source for spec in offer.specs}
                for spec in listing.specs:
                    if spec.name in taken:
                        offer.withheld.append(
                            f"{spec.name}: offered by {taken[spec.name]} already; rename one "
                            "of the two entries"
                        )
                    else:
                        offer.specs.append(spec)
                offer.withheld += withheld_lines(name, listing.withheld)
        return offer

    @activity.defn
    async def call_tool(self, run: ToolRun) -> ToolResult:
        """One tool call: its result cut to the run's cap (marked), or its error."""
        started = time.monotonic()
        spec = run.spec
        # While it runs it heartbeats: a stop's cancellation reaches it (and the tool's
        # server), and a dead worker is noticed within the heartbeat timeout.
        beating = asyncio.create_task(_heartbeats())
        try:
            text = await self._run(run)
        except (ToolFailure, ValueError) as failure:
            took = int((time.monotonic() - started) * 1000)
            line = self._line(failure)
            transient = isinstance(failure, ToolFailure) and failure.transient
            last = activity.info().attempt >= spec.max_attempts
            log.warning(
                "%s failed (attempt %d, %s): %s",
                run.summary,
                activity.info().attempt,
                "retried" if transient and not last else "final",
                line,
            )
            if transient and not last:
                raise ApplicationError(line, type="ToolCallFailed") from None
            return ToolResult(error=line, duration_ms=took)
        finally:
            beating.cancel()
        text = self.redactor.redact(text)
        size = len(text.encode("utf-8"))
        kept, cut = cut_result(text, run.max_bytes)
        took = int((time.monotonic() - started) * 1000)
        return ToolResult(text=kept, truncated=cut, bytes=size, duration_ms=took)

    async def _run(self, run: ToolRun) -> str:
        from activities import mcp_tools, web_tools  # (see list_tools)

        spec = run.spec
        arguments = run.call.parsed_arguments()
        if spec.source == FETCH:
            return await web_tools.fetch(arguments, self.tools.fetch())
        if spec.source == WEB_SEARCH:
            return await web_tools.web_search(arguments, self.tools.search(), self.env)
        server = self._server(spec.source)
        return await mcp_tools.call_tool(
            server, self.env, spec.tool, arguments, self._mcp_sessions(), run.max_bytes
        )

    def _server(self, name: str) -> McpEntry:
        entry = self.tools.servers().get(name)
        if entry is None:
            raise ApplicationError(
                f"tools: {name!r} is not configured on this worker",
                type="UnknownTool",
                non_retryable=True,
            )
        return entry

    def _line(self, error: Exception) -> str:
        return one_line(self.redactor.redact(str(error)), ERROR_CHARS) or type(error).__name__
