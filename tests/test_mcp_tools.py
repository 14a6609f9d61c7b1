"""The worker's MCP client (activities.mcp_tools) against real servers, no mocks: the
example calculator (examples/calculator_mcp.py) and a server of the test's over stdio,
and a server over streamable HTTP behind a bearer token. Loopback only."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import os
import signal
import socket
import stat
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from activities.mcp_tools import Sessions, ToolFailure, call_tool, list_tools, read_tools
from council.tool_config import NOT_ALLOWED, NOT_READ_ONLY, McpEntry

ROOT = Path(__file__).resolve().parent.parent
CALCULATOR = [sys.executable, str(ROOT / "examples" / "calculator_mcp.py")]
# A server's start on a busy machine: importing the SDK alone can take seconds.
STARTS_WITHIN = 120.0
TOKEN = "mcp-tools-test-token-3e8d1"
WRONG_TOKEN = "not-the-token-71c0f"

# A stdio server of the test's: it writes its process id to PID_FILE before anything else.
OWN_SERVER = '''
import os

with open(os.environ["PID_FILE"], "w") as pid_file:
    pid_file.write(str(os.getpid()))

import asyncio
import base64
import json

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations

server = MCPServer("own", log_level="WARNING")
READ_ONLY = ToolAnnotations(read_only_hint=True)


@server.tool(annotations=READ_ONLY)
def look() -> str:
    """Look, change nothing."""
    return "looked"


@server.tool()
def write(text: str) -> str:
    """Write something (it says nothing of being read-only)."""
    return "written"


@server.tool(annotations=READ_ONLY)
async def hang() -> str:
    """Never answer."""
    await asyncio.sleep(3600)
    return "woke"


@server.tool(annotations=READ_ONLY)
def environment() -> str:
    """The server's environment's names, GREETING, and its working directory."""
    return json.dumps(
        {"names": sorted(os.environ), "greeting": os.environ.get("GREETING"), "cwd": os.getcwd()}
    )


@server.tool(annotations=READ_ONLY)
def picture() -> CallToolResult:
    """A caption and a picture."""
    data = base64.b64encode(bytes(1234)).decode()
    return CallToolResult(
        content=[TextContent(text="a caption"), ImageContent(data=data, mime_type="image/png")]
    )


@server.tool(annotations=READ_ONLY)
def numbers() -> CallToolResult:
    """Structured content and no text."""
    return CallToolResult(content=[], structured_content={"total": 3, "unit": "km"})


server.run()
'''
# What a stdio server may find in its environment: the names the client passes on (the
# SDK's few beside PATH, HOME and LANG), the entry's env, and LC_CTYPE, which Python
# sets itself under the C locale.
# (and PWD, which the sandbox sets where it changes into the server's cwd)
PASSED_ON = {"PATH", "HOME", "LANG", "LOGNAME", "SHELL", "TERM", "USER", "LC_CTYPE", "PWD"}


def calculator(**options: object) -> McpEntry:
    return McpEntry.model_validate({"command": CALCULATOR, "timeout": STARTS_WITHIN, **options})


@pytest.fixture
def own_server(tmp_path: Path) -> McpEntry:
    """The test's stdio server, in tmp_path (its working directory)."""
    script = tmp_path / "own_server.py"
    script.write_text(OWN_SERVER)
    return McpEntry(
        command=[sys.executable, str(script)],
        env={"PID_FILE": str(tmp_path / "server.pid"), "GREETING": "hello"},
        cwd=str(tmp_path),
        timeout=STARTS_WITHIN,
    )


@pytest.fixture
def trusted_server(own_server: McpEntry) -> McpEntry:
    """The test's server started unconfined (`trusted`): the process id it writes is then the
    one this process sees (a confined server has a PID namespace of its own)."""
    return own_server.model_copy(update={"trusted": True})


def same_place(path: str, directory: Path) -> bool:
    return os.path.samefile(path, directory)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def running(marker: str) -> list[int]:
    """The processes whose command line names `marker` (none where there is no /proc)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in command:
            found.append(int(entry.name))
    return found


async def gone(pid: int, marker: str, within: float = 30) -> bool:
    """Whether the process (and any process naming `marker`) is gone within `within` s."""
    deadline = asyncio.get_running_loop().time() + within
    while alive(pid) or running(marker):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def test_the_calculator_over_stdio() -> None:
    specs = await list_tools("calc", calculator(), {})
    assert [spec.name for spec in specs] == ["calc__evaluate", "calc__convert"]
    evaluate = specs[0]
    assert (evaluate.source, evaluate.tool, evaluate.read_only) == ("calc", "evaluate", True)
    assert evaluate.timeout_seconds == STARTS_WITHIN
    assert evaluate.parameters["required"] == ["expression"]
    assert evaluate.description.startswith("Evaluate an arithmetic expression")
    assert not any(line.startswith(" ") for line in evaluate.description.splitlines())
    assert specs[1].parameters["required"] == ["value", "from_unit", "to_unit"]

    assert await call_tool(calculator(), {}, "evaluate", {"expression": "2*(3+4)"}) == "14"
    converted = await call_tool(
        calculator(), {}, "convert", {"value": 1, "from_unit": "mi", "to_unit": "km"}
    )
    assert converted.startswith("1 mi = ") and converted.endswith(" km")
    assert float(converted.split()[3]) == pytest.approx(1.609, abs=1e-3)


def example_calculator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("calculator_mcp", CALCULATOR[1])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_calculator_evaluates_arithmetic_only() -> None:
    calc = example_calculator()
    assert calc.evaluate_expression("-2**2 + 7 // 2 % 3") == -4
    assert calc.evaluate_expression("round(sqrt(2) * pi, 3)") == 4.443
    assert calc.evaluate_expression("log(8, 2)") == pytest.approx(3)
    assert calc.shown(calc.evaluate_expression("0.1 + 0.2")) == "0.3"
    for refused, why in [
        ("__import__('os').system('true')", "unknown function"),
        ("__import__('os')", "unknown function '__import__'"),
        ("(1).__class__", "is not allowed"),
        ("x + 1", "unknown name 'x'"),
        ("9 ** 9 ** 9", "the power is too large"),
        ("10.0 ** 400", "the result is too large"),
        ("1 % 0", "division by zero"),
        ("sqrt(-1)", "math domain error"),
        ("1 +" * 200 + "1", "longer than 500 characters"),
        ("True + 1", "True is not a number"),
        ("sqrt(1, 2)", "sqrt takes 1 argument"),
    ]:
        with pytest.raises(ValueError) as error:
            calc.evaluate_expression(refused)
        assert why in str(error.value), refused
    assert calc.convert_units(100, "C", "F") == pytest.approx(212)
    assert calc.convert_units(1, "gal", "l") == pytest.approx(3.785411784)
    assert calc.convert_units(1, "day", "min") == 1440
    assert math.isclose(calc.convert_units(0, "K", "C"), -273.15)
    with pytest.raises(ValueError, match="cannot convert mass"):
        calc.convert_units(1, "kg", "m")
    with pytest.raises(ValueError, match="unknown unit 'parsec'"):
        calc.convert_units(1, "parsec", "m")


async def test_allow_names_the_tools_offered() -> None:
    entry = calculator(allow=["convert", "not_offered"], max_attempts=3, timeout=90)
    [spec] = await list_tools("units", entry, {})
    assert (spec.name, spec.tool, spec.source) == ("units__convert", "convert", "units")
    assert (spec.timeout_seconds, spec.max_attempts) == (90, 3)


async def test_a_tool_error_is_a_failure_in_the_servers_words() -> None:
    with pytest.raises(ToolFailure) as failure:
        await call_tool(calculator(), {}, "evaluate", {"expression": "1/0"})
    assert "division by zero" in str(failure.value)
    assert "\n" not in str(failure.value)


async def test_a_tool_not_declared_read_only_is_offered_only_with_side_effects(
    own_server: McpEntry,
) -> None:
    names = {spec.name for spec in await list_tools("own", own_server, {})}
    assert "own__look" in names and "own__write" not in names

    trusting = own_server.model_copy(update={"side_effects": True})
    specs = {spec.name: spec for spec in await list_tools("own", trusting, {})}
    assert specs["own__write"].read_only is False and specs["own__look"].read_only is True
    assert specs["own__write"].parameters["required"] == ["text"]


async def test_a_tool_named_in_allow_is_offered_and_the_others_are_withheld_saying_why(
    own_server: McpEntry,
) -> None:
    default = await read_tools("own", own_server, {})
    assert "own__write" not in {spec.name for spec in default.specs}
    assert default.withheld == {"write": NOT_READ_ONLY}
    # Naming a tool in allow is consent: offered, although it does not declare itself
    # read-only; every tool allow does not name is withheld.
    named = own_server.model_copy(update={"allow": ["write", "look"]})
    listing = await read_tools("own", named, {})
    assert [spec.name for spec in listing.specs] == ["own__look", "own__write"]
    assert listing.specs[1].read_only is False
    assert set(listing.withheld) == {"hang", "environment", "picture", "numbers"}
    assert set(listing.withheld.values()) == {NOT_ALLOWED}


async def test_the_server_gets_its_env_and_not_the_workers(
    own_server: McpEntry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COUNCIL_TEST_PROVIDER_KEY", "sk-test-not-for-tool-servers")
    seen = json.loads(await call_tool(own_server, os.environ, "environment", {}))
    assert "COUNCIL_TEST_PROVIDER_KEY" not in seen["names"]
    assert set(seen["names"]) <= PASSED_ON | {"PID_FILE", "GREETING"}
    assert seen["greeting"] == "hello"
    assert same_place(seen["cwd"], tmp_path)


async def test_the_server_inherits_from_the_environment_given(
    trusted_server: McpEntry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PATH, HOME and LANG come from the environment the caller hands in (the worker's
    ToolBox hands in its own), not from the process's."""
    monkeypatch.setenv("LANG", "C.UTF-8")
    alone = json.loads(await call_tool(trusted_server, {}, "environment", {}))
    given = json.loads(await call_tool(trusted_server, {"LANG": "C.UTF-8"}, "environment", {}))
    assert "LANG" not in alone["names"] and "LANG" in given["names"]


async def test_content_that_is_not_text(own_server: McpEntry) -> None:
    picture = await call_tool(own_server, {}, "picture", {})
    assert picture == "a caption\n[image/png: 1,234 bytes]"
    assert json.loads(await call_tool(own_server, {}, "numbers", {})) == {"total": 3, "unit": "km"}


async def test_a_hanging_tool_times_out_and_its_server_is_gone(
    trusted_server: McpEntry, tmp_path: Path
) -> None:
    entry = trusted_server.model_copy(update={"timeout": 1.0})
    with pytest.raises(ToolFailure) as failure:
        await call_tool(entry, {}, "hang", {})
    assert str(failure.value) == "the MCP server did not answer within 1 s"
    # The server had its grace period (at least) to start: it wrote its id.
    pid = int((tmp_path / "server.pid").read_text())
    assert await gone(pid, str(tmp_path / "own_server.py")), "the server outlived the call"


def live(pid: int) -> bool:
    """Whether the process runs (a zombie, dead but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def until_dead(pid: int, within: float = 30) -> bool:
    deadline = asyncio.get_running_loop().time() + within
    while live(pid):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def test_a_workers_sessions_keep_a_server_for_the_next_call(
    trusted_server: McpEntry, tmp_path: Path
) -> None:
    own_server = trusted_server
    pid_file = tmp_path / "server.pid"
    sessions = Sessions(idle_seconds=3600)
    try:
        # Two calls, one after the other: one server started.
        assert await call_tool(own_server, {}, "look", {}, sessions) == "looked"
        first = int(pid_file.read_text())
        assert await call_tool(own_server, {}, "environment", {}, sessions)
        assert int(pid_file.read_text()) == first and live(first)

        # A server that went away while idle is replaced by the next call, which succeeds.
        os.kill(first, signal.SIGKILL)
        assert await call_tool(own_server, {}, "look", {}, sessions) == "looked"
        second = int(pid_file.read_text())
        assert second != first and live(second)

        # A session serves one call at a time: a call beside a hanging one starts a server.
        hanging = asyncio.create_task(call_tool(own_server, {}, "hang", {}, sessions))
        await asyncio.sleep(0)  # one step of the loop: the hanging call takes the session
        assert await call_tool(own_server, {}, "look", {}, sessions) == "looked"
        third = int(pid_file.read_text())
        assert third not in (first, second)
        assert not hanging.done()
        # A cancelled call closes its session: its server is gone, the other kept.
        hanging.cancel()
        with pytest.raises(asyncio.CancelledError):
            await hanging
        assert await until_dead(second), "the cancelled call's server outlived it"
        assert live(third)
    finally:
        await sessions.aclose()
    assert await until_dead(third), "a server outlived the worker's sessions"

    # An entry that keeps no session: a server for each call, gone after it.
    each = own_server.model_copy(update={"keep_open": False})
    fresh = Sessions(idle_seconds=3600)
    try:
        assert await call_tool(each, {}, "look", {}, fresh) == "looked"
        assert await until_dead(int(pid_file.read_text())), "a session was kept"
    finally:
        await fresh.aclose()

    # A session left idle is closed.
    briefly = Sessions(idle_seconds=0.1)
    try:
        assert await call_tool(own_server, {}, "look", {}, briefly) == "looked"
        assert await until_dead(int(pid_file.read_text())), "an idle session was kept"
    finally:
        await briefly.aclose()


async def test_a_server_that_cannot_start() -> None:
    entry = McpEntry(command=["council-no-such-command-5b1e"], timeout=STARTS_WITHIN)
    with pytest.raises(ToolFailure) as failure:
        await list_tools("missing", entry, {})
    assert str(failure.value) == (
        "the MCP server could not start: council-no-such-command-5b1e: No such file or directory"
    )


async def test_a_server_that_crashes_is_named_by_its_last_words() -> None:
    crash = "import sys; sys.stderr.write('starting\\nout of cheese\\n'); sys.exit(3)"
    entry = McpEntry(command=[sys.executable, "-c", crash], timeout=STARTS_WITHIN)
    with pytest.raises(ToolFailure) as failure:
        await call_tool(entry, {}, "anything", {})
    assert str(failure.value) == "the MCP server closed the connection ('out of cheese')"


# A stdio server that writes CHATTER_MB of log lines to its stderr at its start and again
# at each call, before it answers.
CHATTY_SERVER = """
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

CHATTER = ("debug: " + "x" * 1017 + "\\n") * 1024 * int(sys.argv[1])
server = MCPServer("chatty", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def talk() -> str:
    \"\"\"Log a lot, then answer.\"\"\"
    sys.stderr.write(CHATTER + "the last thing logged\\n")
    sys.stderr.flush()
    return "said"


sys.stderr.write(CHATTER)
server.run()
"""
CHATTER_MB = 8


def open_file_bytes() -> int:
    """The size of the largest regular file this process holds open (0 without /proc)."""
    largest = 0
    for fd in Path("/proc/self/fd").glob("*"):
        try:
            info = os.stat(fd)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode):
            largest = max(largest, info.st_size)
    return largest


async def test_a_chatty_servers_stderr_costs_the_worker_no_disk(tmp_path: Path) -> None:
    script = tmp_path / "chatty.py"
    script.write_text(CHATTY_SERVER)
    entry = McpEntry(command=[sys.executable, str(script), str(CHATTER_MB)], timeout=STARTS_WITHIN)
    before = open_file_bytes()
    sessions = Sessions(idle_seconds=3600)
    try:
        # Its stderr is read as it is written: the server never blocks on a full pipe.
        for _ in range(3):
            assert await call_tool(entry, {}, "talk", {}, sessions) == "said"
        # 32 MB logged in one session: nothing the worker holds grew with it.
        assert open_file_bytes() <= max(before, 1_000_000)
    finally:
        await sessions.aclose()


async def test_a_server_that_crashes_after_a_flood_is_named_by_its_last_words() -> None:
    flood = "import sys; sys.stderr.write('noise ' * 500_000 + '\\nout of cheese\\n'); sys.exit(3)"
    entry = McpEntry(command=[sys.executable, "-c", flood], timeout=STARTS_WITHIN)
    with pytest.raises(ToolFailure) as failure:
        await call_tool(entry, {}, "anything", {})
    assert str(failure.value) == "the MCP server closed the connection ('out of cheese')"


async def test_a_server_that_speaks_no_mcp() -> None:
    garbage = "print('hello, I am not JSON-RPC', flush=True)"
    entry = McpEntry(command=[sys.executable, "-c", garbage], timeout=STARTS_WITHIN)
    with pytest.raises(ToolFailure) as failure:
        await list_tools("noise", entry, {})
    assert str(failure.value) == (
        "the MCP server closed the connection; it wrote what is not an MCP message on its "
        "stdout: 'hello, I am not JSON-RPC'"
    )


class Bearer:
    """Refuses a request without `Authorization: Bearer TOKEN` (401)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"").decode()
            if given != f"Bearer {TOKEN}":
                refusal = PlainTextResponse("a token is needed", status_code=401)
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


@pytest.fixture
async def http_server() -> AsyncIterator[str]:
    """An MCP server on streamable HTTP at 127.0.0.1, behind the bearer token: its URL."""
    server = MCPServer("remote", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def look(what: str) -> str:
        """Look at something."""
        return f"looked at {what}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False))
    def delete(what: str) -> str:
        """Delete something."""
        return f"deleted {what}"

    # Listening before the server runs: a connection waits in the backlog meanwhile.
    listening = socket.create_server(("127.0.0.1", 0))
    app = Bearer(server.streamable_http_app(host="127.0.0.1"))
    served = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    task = asyncio.create_task(served.serve(sockets=[listening]))
    yield f"http://127.0.0.1:{listening.getsockname()[1]}/mcp"
    served.should_exit = True
    await task
    listening.close()


def remote(url: str) -> McpEntry:
    return McpEntry(url=url, token_env="REMOTE_TOKEN", timeout=STARTS_WITHIN)


async def test_streamable_http_with_the_token(http_server: str) -> None:
    env = {"REMOTE_TOKEN": TOKEN}
    specs = await list_tools("remote", remote(http_server), env)
    assert [spec.name for spec in specs] == ["remote__look"]
    assert await call_tool(remote(http_server), env, "look", {"what": "the sky"}) == (
        "looked at the sky"
    )


@pytest.mark.parametrize("env", [{}, {"REMOTE_TOKEN": ""}, {"OTHER": TOKEN}])
async def test_streamable_http_without_the_token_variable(
    http_server: str, env: dict[str, str]
) -> None:
    with pytest.raises(ToolFailure) as failure:
        await list_tools("remote", remote(http_server), env)
    assert "REMOTE_TOKEN" in str(failure.value)
    assert TOKEN not in str(failure.value)


async def test_streamable_http_with_a_wrong_token(http_server: str) -> None:
    env = {"REMOTE_TOKEN": WRONG_TOKEN}
    for attempt in (
        list_tools("remote", remote(http_server), env),
        call_tool(remote(http_server), env, "look", {"what": "x"}),
    ):
        with pytest.raises(ToolFailure) as failure:
            await attempt
        message = str(failure.value)
        assert message == (
            "the MCP server refused the request (HTTP 401): check the token in REMOTE_TOKEN"
        )
        assert WRONG_TOKEN not in message and TOKEN not in message


async def test_streamable_http_that_nobody_serves() -> None:
    with socket.create_server(("127.0.0.1", 0)) as unused:
        port = unused.getsockname()[1]
    entry = McpEntry(url=f"http://127.0.0.1:{port}/mcp", timeout=STARTS_WITHIN)
    with pytest.raises(ToolFailure) as failure:
        await list_tools("remote", entry, {})
    assert str(failure.value).startswith(f"cannot reach the MCP server at 127.0.0.1:{port}: ")


async def test_a_result_says_no_secret_of_the_servers_env(tmp_path: Path) -> None:
    secret = "server-secret-42f9a1"
    leak = textwrap.dedent(
        f"""
        import sys
        sys.stderr.write("could not log in with {secret}\\n")
        sys.exit(1)
        """
    )
    entry = McpEntry(
        command=[sys.executable, "-c", leak], env={"API_KEY": secret}, timeout=STARTS_WITHIN
    )
    with pytest.raises(ToolFailure) as failure:
        await list_tools("leaky", entry, {})
    assert secret not in str(failure.value) and "could not log in with" in str(failure.value)
