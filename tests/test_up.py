"""`make up` (up.py) as a user runs it, on free ports with its own data folder: the page it
prints starts a deliberation that completes, in Chromium; SIGINT and SIGTERM leave none of
the processes it started; a server that already answers is reused and left running. And
the one rule for the Temporal UI's address that every surface prints."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client as MCPClient
from mcp import StdioServerParameters, stdio_client
from temporalio.client import Client

from app.settings.environment import Settings
from app.store import store
from app.temporal import connection
from council.models import DeliberationRecord
from harness import processes
from harness.foreground import Stopped, stop_on_signals
from harness.processes import ROOT, free_port, port_open
from runs import finding
from runs.starting import temporal_ui
from tests.temporal_fixtures import temporal_address

# What would make up.py talk to a real provider or another server, or label runs otherwise.
UNSET = (
    "OPENROUTER_API_KEY",
    "COUNCIL_LLM_API_KEY",
    "COUNCIL_LLM_BASE_URL",
    "COUNCIL_UI_URL",
    "COUNCIL_MODELS",
    "COUNCIL_CHAIRMAN",
    "COUNCIL_CONFIG",
    "COUNCIL_WEB_TOKEN",
    "COUNCIL_WEB_HOST",
    "COUNCIL_DATA",
    # A user's `make up` keeps its payload store in its data directory, as here.
    "COUNCIL_STORE",
    "COUNCIL_STORE_THRESHOLD",
    "COUNCIL_SIM_LATENCY",
    "COUNCIL_SIM_DISAGREE",
    "SIM_LATENCY",
    # The simulator's and the worker's metrics' ports: from each test.
    "COUNCIL_SIM_PORT",
    "COUNCIL_METRICS_PORT",
    "COUNCIL_METRICS_HOST",
    "COUNCIL_WORKER_PROCESSES",
    # The codec server it starts: its port comes from each test, its origins from make up.
    "COUNCIL_CODEC_PORT",
    "COUNCIL_CODEC_CORS_ORIGINS",
    "COUNCIL_CODEC_TOKEN",
)


def process_start(pid: int) -> tuple[int, str] | None:
    """(pid, start time in clock ticks) of a live process (not a zombie), else None."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else (pid, fields[19])


def descendants(root: int) -> dict[tuple[int, str], str]:
    """Every live process below `root` (children, grandchildren...) with its command line,
    keyed by (pid, start time) so that a reused pid is not mistaken for it."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found: dict[tuple[int, str], str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, ppid in parents.items():
            if ppid == parent and (key := process_start(pid)):
                try:
                    command = (Path("/proc") / str(pid) / "cmdline").read_bytes()
                except OSError:
                    continue
                found[key] = command.replace(b"\0", b" ").decode(errors="replace")
                frontier.append(pid)
    return found


def still_running(processes: dict[tuple[int, str], str]) -> list[str]:
    return [command for key, command in processes.items() if process_start(key[0]) == key]


def carrying(marker: str) -> list[str]:
    """The command lines of live processes whose environment holds `marker` (NAME=value):
    whatever up.py started inherits it, started before or after any snapshot."""
    found = []
    needle = marker.encode() + b"\0"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or entry.name == str(os.getpid()):
            continue
        try:
            if needle not in (entry / "environ").read_bytes() + b"\0":
                continue
            if process_start(int(entry.name)) is None:
                continue
            found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found


def environment(pid: int) -> dict[str, str]:
    raw = (Path("/proc") / str(pid) / "environ").read_text(errors="replace")
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


def free_server_port() -> int:
    """A free port whose dev-server UI port (+1000) is free too."""
    while True:
        port = free_port()
        if port + 1000 <= 65535 and not port_open("127.0.0.1", port + 1000):
            return port


@dataclass
class Up:
    popen: subprocess.Popen
    output_path: Path
    marker: str

    def leftovers(self) -> list[str]:
        return carrying(self.marker)

    def output(self) -> str:
        return self.output_path.read_text(errors="replace")

    def line(self, pattern: str, timeout: float = 180) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output(), re.MULTILINE)
            if found:
                return found
            assert self.popen.poll() is None, f"up.py exited early:\n{self.output()}"
            time.sleep(0.1)
        raise AssertionError(f"no line matching {pattern!r} in {timeout:.0f} s:\n{self.output()}")

    def stop(self, sig: int, timeout: float = 25) -> int:
        self.popen.send_signal(sig)
        return self.popen.wait(timeout)


@contextmanager
def make_up(tmp: Path, **env: str) -> Iterator[Up]:
    """`python up.py --data TMP`, the script behind `make up`, with its output in a file
    (and its codec server and simulator, if it starts them, on free ports)."""
    environment = {k: v for k, v in os.environ.items() if k not in UNSET}
    environment["COUNCIL_CODEC_PORT"] = str(free_port())
    environment["COUNCIL_SIM_PORT"] = str(free_port())
    marker = f"COUNCIL_UP_TEST={uuid.uuid4().hex}"
    environment[marker.split("=")[0]] = marker.split("=")[1]
    output = tmp / "up.out"
    latency = ["--latency", env.pop("SIM_LATENCY")] if "SIM_LATENCY" in env else []
    with open(output, "wb") as out:
        popen = subprocess.Popen(
            [sys.executable, str(ROOT / "up.py"), "--data", str(tmp / "data"), *latency],
            cwd=ROOT,
            env={**environment, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    up = Up(popen, output, marker)
    try:
        yield up
    finally:
        if popen.poll() is None:  # a failed test: stop it the way a user would
            popen.send_signal(signal.SIGINT)
            try:
                popen.wait(25)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()


async def test_make_up_serves_a_page_that_runs_a_deliberation_and_sigint_stops_it_all(
    tmp_path: Path, page: Any
) -> None:
    server_port, web_port = free_server_port(), free_port()
    sim_port, metrics_port = free_port(), free_port()
    with make_up(
        tmp_path,
        TEMPORAL_ADDRESS=f"127.0.0.1:{server_port}",
        COUNCIL_WEB_PORT=str(web_port),
        COUNCIL_SIM_PORT=str(sim_port),
        COUNCIL_METRICS_PORT=str(metrics_port),
        SIM_LATENCY="0",  # the run completes at once (the default pace: the next test)
    ) as up:
        page_url = up.line(r"the page:\s+(\S+)").group(1)
        ui = up.line(r"the Temporal UI:\s+(\S+)").group(1)
        assert page_url == f"http://127.0.0.1:{web_port}"
        assert ui == f"http://127.0.0.1:{server_port + 1000}"
        # The simulator on COUNCIL_SIM_PORT, the worker's metrics on COUNCIL_METRICS_PORT
        # (on loopback: not on 127.0.0.2, which a socket bound to every address answers).
        sim_url = up.line(r"the simulator:\s+(\S+)").group(1)
        assert sim_url == f"http://127.0.0.1:{sim_port}/v1"
        metrics = up.line(r"the metrics:\s+(\S+)").group(1)
        assert metrics == f"http://127.0.0.1:{metrics_port}/metrics"
        assert "simulated" in up.output()
        assert (tmp_path / "data" / "temporal.db").exists()
        started = descendants(up.popen.pid)
        commands = " | ".join(started.values())
        for part in (
            "temporal server start-dev",
            "-m app.codec.server",
            "-m simulator",
            "worker.py",
            "-m web",
        ):
            assert part in commands
        [web] = [pid for (pid, _), command in started.items() if "-m web" in command]
        web_env = environment(web)
        assert web_env["COUNCIL_SIMULATED"] == "1"  # the page can say its answers are simulated
        assert web_env["COUNCIL_MODELS"] == "sim/atlas,sim/borealis,sim/cirrus,sim/drift"
        assert web_env["COUNCIL_CHAIRMAN"] == "sim/atlas"
        # No council.toml here: the simulated members get the example calculator and fetch.
        assert web_env["COUNCIL_CONFIG"].endswith("offline.toml")
        async with httpx.AsyncClient(timeout=5) as http:
            assert (await http.get(ui)).status_code == 200  # the dev server's Web UI
            assert (await http.get(f"{sim_url}/models")).status_code == 200
            assert "temporal_" in (await http.get(metrics)).text
        assert not port_open("127.0.0.2", metrics_port)

        await page.goto(page_url)
        assert "sim/atlas" in await page.content()  # the form offers the simulator's members
        assert "openai/gpt-4o-mini" not in await page.content()
        tools = page.locator("fieldset.tools input[name=tools]")
        assert await tools.evaluate_all("boxes => boxes.map(b => b.value)") == ["calc", "fetch"]
        await page.fill("#question", "Is one command enough to start a council of 2 * 21?")
        await page.click("#start-button")
        try:
            await page.wait_for_url(re.compile(r"/deliberations/council-is-one-command"))
            await page.wait_for_function(
                "() => document.querySelector('#status')?.textContent.trim() === 'completed'",
                timeout=45_000,
            )
        except Exception as error:
            body = (await page.inner_text("body"))[:1500]
            web_log = (tmp_path / "data" / "logs" / "web.log").read_text()[-1500:]
            raise AssertionError(f"{error}\nat {page.url}:\n{body}\nweb log:\n{web_log}") from None
        # The default council's members calculated (none ticked: the council's tools).
        assert await page.locator("details.tool-calls").count() >= 4
        assert "calc__evaluate" in await page.inner_text("body")
        link = await page.get_attribute("#temporal-ui", "href")
        assert link is not None and link.startswith(f"{ui}/namespaces/default/workflows/council-")

        assert up.stop(signal.SIGINT) == 0
    assert still_running(started) == []
    assert up.leftovers() == []
    assert not port_open("127.0.0.1", server_port)
    assert not port_open("127.0.0.1", web_port)
    assert "stopped the processes it started" in up.output()


async def shows_in_code_block(block: Any, text: str) -> bool:
    """Whether `text` shows in one of the Temporal UI's code blocks, scrolled from top to
    bottom as a reader would (it draws only the lines in view)."""
    while True:
        if text in await block.inner_text():
            return True
        moved = await block.evaluate(
            """async (scroller) => {
                const before = scroller.scrollTop;
                scroller.scrollTop = before + scroller.clientHeight * 0.8;
                const frame = () => new Promise((next) => requestAnimationFrame(next));
                await frame();
                await frame();
                return scroller.scrollTop > before;
            }"""
        )
        if not moved:
            return text in await block.inner_text()


async def test_the_temporal_ui_of_make_up_shows_a_finished_runs_answer(
    tmp_path: Path, page: Any
) -> None:
    """The dev server's own Web UI, given the codec server by make up, shows the record
    that the history holds only by reference, and downloads a text too large to show."""
    from playwright.async_api import expect

    server_port = free_server_port()
    address = f"127.0.0.1:{server_port}"
    data = tmp_path / "data"
    with make_up(
        tmp_path, TEMPORAL_ADDRESS=address, COUNCIL_WEB_PORT=str(free_port()), SIM_LATENCY="0"
    ) as up:
        ui = up.line(r"the Temporal UI:\s+(\S+)").group(1)
        codec = up.line(r"the codec server:\s+(\S+)").group(1)
        async with httpx.AsyncClient(timeout=5) as http:
            settings = (await http.get(f"{ui}/api/v1/settings")).json()
            assert settings["Codec"]["Endpoint"] == codec
            assert (await http.get(f"{codec}/health")).status_code == 200

        shell = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("COUNCIL_", "TEMPORAL_"))},
            "TEMPORAL_ADDRESS": address,
            "COUNCIL_DATA": str(data),
        }
        cli = await asyncio.create_subprocess_exec(
            sys.executable,
            *("starter.py", "start", "Is the record readable in the Temporal UI?"),
            *("--max-rounds", "1", "--wait", "--json"),
            cwd=ROOT,
            env=shell,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(cli.communicate(), 90)
        assert cli.returncode == 0, err.decode()
        record = DeliberationRecord.model_validate_json(out)
        assert record.stage3 is not None
        answer = record.stage3.response.splitlines()[0][:70]
        assert json.dumps(answer)[1:-1] == answer  # shown as written inside a JSON string

        # The history holds the record only by reference (the control: without a codec
        # server, the UI shows this reference).
        raw = await Client.connect(address)
        history = await raw.get_workflow_handle(record.id).fetch_history()
        [completed] = [
            e.workflow_execution_completed_event_attributes
            for e in history.events
            if e.HasField("workflow_execution_completed_event_attributes")
        ]
        [result] = completed.result.payloads
        assert store.reference(result) is not None

        await page.goto(f"{ui}/namespaces/default/workflows/{record.id}")
        blocks = page.locator('[data-testid="input-and-result"] .cm-scroller')
        await expect(blocks.nth(1)).to_contain_text('"role": "assistant"', timeout=60_000)
        assert await shows_in_code_block(blocks.nth(1), answer)

        # A text larger than a history could hold inline stays a reference, with its size
        # on a button that downloads it in full through the codec server.
        large = "A text too long to show in the Temporal UI. " * 60_000
        reader = await Client.connect(
            address, data_converter=connection.data_converter({"COUNCIL_DATA": str(data)})
        )
        started = await reader.start_workflow(
            "NobodyRunsThis", large, id=f"too-long-{uuid.uuid4().hex[:6]}", task_queue="nobody"
        )
        await page.goto(f"{ui}/namespaces/default/workflows/{started.id}")
        button = page.locator('[data-testid="input-and-result"] button', has_text="MB")
        async with page.expect_download(timeout=60_000) as downloading:
            await button.click(timeout=60_000)
        download = await downloading.value
        saved = tmp_path / "downloaded.json"
        await download.save_as(saved)
        assert json.loads(saved.read_text()) == large
        assert up.stop(signal.SIGINT) == 0
    assert not port_open("127.0.0.1", int(codec.rsplit(":", 1)[1]))


async def test_make_up_reuses_a_running_server_and_leaves_it_running(
    tmp_path: Path, temporal: Any
) -> None:
    address = temporal_address(temporal)
    web_port = free_port()
    with make_up(
        tmp_path,
        TEMPORAL_ADDRESS=address,
        COUNCIL_WEB_PORT=str(web_port),
        COUNCIL_TASK_QUEUE=f"council-up-{web_port}",
    ) as up:
        up.line(r"the page:\s+(\S+)")
        # The simulator takes a few seconds a call by default, to watch a run; its address
        # is printed.
        sim = up.line(r"the simulator:\s+(\S+) \(2 to 5 s a call; make up SIM_LATENCY=0 ")
        assert await simulator_latency(sim.group(1)) == [2.0, 5.0]
        assert f"using the Temporal server already answering at {address}" in up.output()
        assert up.line(r"the Temporal UI:\s+(\S+)").group(1) == temporal_ui(address)
        started = descendants(up.popen.pid)
        commands = " | ".join(started.values())
        assert not any(Path(c.split()[0]).name == "temporal" for c in started.values())
        assert "-m web" in commands and "worker.py" in commands
        assert up.stop(signal.SIGTERM) == 0
    assert still_running(started) == []
    assert up.leftovers() == []
    assert not port_open("127.0.0.1", web_port)
    host, port = address.rsplit(":", 1)
    assert port_open(host, int(port))
    await temporal.client.count_workflows()  # and it still answers


def test_a_ctrl_c_that_lands_inside_a_start_leaves_no_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Ctrl-C between the fork and the Popen object (the signal sent from inside Popen, as
    a machine under load may deliver it): the child is stopped, then Stopped is raised."""
    children: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def interrupted(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        children.append(real_popen(*args, **kwargs))
        signal.raise_signal(signal.SIGINT)
        return children[-1]

    monkeypatch.setattr(processes.subprocess, "Popen", interrupted)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        stop_on_signals()
        with pytest.raises(Stopped), processes.new_interpreters():  # through Popen, as up.py
            processes.spawn("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"])
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    [child] = children
    assert child.poll() is not None  # stopped, not left running


async def test_ctrl_c_while_it_starts_stops_what_it_started_so_far(
    tmp_path: Path, temporal: Any
) -> None:
    web_port = free_port()
    with make_up(
        tmp_path,
        TEMPORAL_ADDRESS=temporal_address(temporal),  # a server that stays: nothing dies with it
        COUNCIL_WEB_PORT=str(web_port),
        COUNCIL_TASK_QUEUE=f"council-up-{web_port}",
    ) as up:
        up.line("starting a worker")
        assert up.leftovers() != []  # the simulator, and the worker on its way
        assert up.stop(signal.SIGINT) == 0
    assert up.leftovers() == []
    assert "the page:" not in up.output()
    assert "stopped the processes it started" in up.output()


def test_a_page_port_that_cannot_be_used_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    with make_up(tmp_path, COUNCIL_WEB_PORT="70000") as up:
        assert up.popen.wait(20) == 2
    assert (
        up.output() == "up: COUNCIL_WEB_PORT must be a port number from 1 to 65535 (got '70000')\n"
    )
    with make_up(tmp_path, COUNCIL_WEB_PORT="8²") as up:  # "8²".isdigit(), but not a number
        assert up.popen.wait(20) == 2
    assert up.output() == "up: COUNCIL_WEB_PORT must be a port number from 1 to 65535 (got '8²')\n"
    for pace in ("soon", "-1", "5-2", "²"):
        with make_up(tmp_path, SIM_LATENCY=pace, COUNCIL_WEB_PORT=str(free_port())) as up:
            assert up.popen.wait(20) == 2
        assert up.output().startswith("up: SIM_LATENCY must be ") and up.output().count("\n") == 1
        assert f"(got {pace!r})" in up.output()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with make_up(tmp_path, COUNCIL_WEB_PORT=str(port)) as up:
            assert up.popen.wait(20) == 2
        assert up.output().startswith(
            f"up: COUNCIL_WEB_PORT: port {port} on 127.0.0.1 is already in use"
        )
        # The simulator's port (a `make simulator` of another shell, say) and the worker's
        # metrics' port, each refused in one line before anything starts.
        for variable in ("COUNCIL_SIM_PORT", "COUNCIL_METRICS_PORT"):
            with make_up(
                tmp_path, COUNCIL_WEB_PORT=str(free_port()), **{variable: str(port)}
            ) as up:
                assert up.popen.wait(20) == 2
            line = up.output()
            assert line.startswith(f"up: {variable}: port {port} on 127.0.0.1 is already in use")
            assert line.endswith(f"({variable}={port + 1} make up)\n") and line.count("\n") == 1
    assert not (tmp_path / "data").exists()


INTEGRATIONS = ROOT / "docs" / "integrations.md"


async def simulator_latency(url: str) -> Any:
    """The default latency a running simulator applies (its control endpoint)."""
    async with httpx.AsyncClient(timeout=5) as http:
        faults = (await http.get(url.removesuffix("/v1") + "/_sim/faults")).json()
    return faults.get("*", {}).get("latency")


async def test_the_cli_and_mcp_of_another_shell_start_the_pages_default_council(
    tmp_path: Path, temporal: Any, page: Any
) -> None:
    address = temporal_address(temporal)
    web_port = free_port()
    queue = f"council-up-{web_port}"
    data = tmp_path / "data"
    with make_up(
        tmp_path,
        TEMPORAL_ADDRESS=address,
        COUNCIL_WEB_PORT=str(web_port),
        COUNCIL_TASK_QUEUE=queue,
        SIM_LATENCY="0",
    ) as up:
        page_url = up.line(r"the page:\s+(\S+)").group(1)
        sim = up.line(r"the simulator:\s+(\S+) \(no delay\)$").group(1)
        assert await simulator_latency(sim) == 0
        await page.goto(page_url)
        offered = (await page.get_attribute("#models", "placeholder")).splitlines()
        assert offered == ["sim/atlas", "sim/borealis", "sim/cirrus", "sim/drift"]

        # Another shell knows the server, the task queue and where `make up` keeps its
        # data; no COUNCIL_MODELS.
        shell = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("COUNCIL_", "TEMPORAL_"))},
            "TEMPORAL_ADDRESS": address,
            "COUNCIL_TASK_QUEUE": queue,
            "COUNCIL_DATA": str(data),
        }
        cli = await asyncio.create_subprocess_exec(
            sys.executable,
            *("starter.py", "start", "Same council?", "--max-rounds", "1", "--wait", "--json"),
            cwd=ROOT,
            env=shell,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(cli.communicate(), 90)
        assert cli.returncode == 0, err.decode()
        record = DeliberationRecord.model_validate_json(out)
        assert (record.models, record.chairman) == (offered, offered[0])

        with (tmp_path / "mcp.log").open("w") as log:
            server = StdioServerParameters(
                command=sys.executable, args=["starter.py", "mcp"], env=shell, cwd=ROOT
            )
            async with MCPClient(stdio_client(server, errlog=log), read_timeout_seconds=60) as mcp:
                started = await mcp.call_tool(
                    "start_deliberation", {"question": "Same council here?", "max_rounds": 1}
                )
        assert isinstance(started.structured_content, dict), started
        wid = started.structured_content["id"]
        # Read as that shell reads: its payload store is the one in `make up`'s data.
        reader = await Client.connect(
            address, data_converter=connection.data_converter({"COUNCIL_DATA": str(data)})
        )
        record = await finding.handle(reader, wid).result()
        assert (record.models, record.chairman) == (offered, offered[0])
        assert (data / "default-council.json").exists()

        # The doctor of that shell checks the simulator `make up`'s worker calls (not
        # OpenRouter), says so, and finds nothing wrong: structured output included.
        doctor = await asyncio.create_subprocess_exec(
            sys.executable,
            *("starter.py", "doctor", "--json"),
            cwd=ROOT,
            env=shell,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(doctor.communicate(), 90)
        checks = {check["name"]: check for check in json.loads(out)}
        assert doctor.returncode == 0, (checks, err.decode())
        reachable = checks["provider default reachable"]["detail"]
        assert reachable.startswith(f"{sim} answers")
        assert "the simulator of the make up running on this Temporal server" in reachable

        # docs/integrations.md's curl example, as written but for the page's port.
        [example] = re.findall(r"```sh\n(curl -N .*?)```", INTEGRATIONS.read_text(), re.S)
        command = example.replace("http://127.0.0.1:8080", page_url)
        curl = await asyncio.create_subprocess_exec(
            "bash", "-c", command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(curl.communicate(), 90)
        assert curl.returncode == 0, err.decode()
        events = [line for line in out.decode().splitlines() if line.startswith("data: ")]
        assert events[-1] == "data: [DONE]", out.decode()[-2000:]
        last = json.loads(events[-2].removeprefix("data: "))
        wid = last["id"]
        record = await finding.handle(reader, wid).result()
        assert (record.models, record.chairman) == (offered, offered[0])
        assert up.stop(signal.SIGINT) == 0
    # Once it stops, its council is nobody's default any more.
    assert not (data / "default-council.json").exists()


@pytest.mark.parametrize(
    ("address", "env", "expected"),
    [
        ("localhost:7233", {}, "http://localhost:8233"),
        ("127.0.0.1:17233", {}, "http://127.0.0.1:18233"),
        ("temporal.internal:7233", {}, "http://temporal.internal:8233"),
        ("ns.acct.tmprl.cloud:7233", {}, "https://cloud.temporal.io"),
        ("temporal:7233", {"COUNCIL_UI_URL": "https://ui.example.com/"}, "https://ui.example.com"),
        ("localhost:7233", {"COUNCIL_UI_URL": "  "}, "http://localhost:8233"),
    ],
)
def test_the_temporal_ui_follows_the_server_used(
    address: str, env: dict[str, str], expected: str
) -> None:
    assert temporal_ui(address, Settings.read(env).ui_url) == expected
