"""The installed application: the wheel holds what the commands run, with requirements.txt's
pins, and leaves the development tooling out; installed into a fresh virtual environment
outside the checkout (as `pipx install .` and `uv tool install .` do), its commands work
from anywhere: `council` (whose help names it), `council-worker`, `council-web` (the page)
and `council mcp` (the MCP server), against a real dev server and the simulator.

The fresh environment holds the wheel and, through a .pth file, the runtime dependencies
alone (requirements.txt's and what they require), taken from this environment: the
commands cannot lean on the checkout, on a development dependency or on the network.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import uuid
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from packaging.requirements import Requirement
from temporalio.testing import WorkflowEnvironment

from harness.processes import ROOT, Process, answers, free_port, port_open, spawn, wait_for
from simulator import SimulatorServer
from tests.temporal_fixtures import TEST_API_KEY, temporal_address

RUNTIME = (
    "activities",
    "app",
    "bounded",
    "council",
    "doctor",
    "evaluation",
    "grading",
    "mcp_server",
    "runs",
    "service",
    "web",
    "workflows",
)
TOOLING = ("harness/", "simulator/", "bench/", "tests/", "demo.py", "up.py")
SCRIPTS = {
    "council": "starter:entry",
    "council-worker": "worker:entry",
    "council-web": "web.__main__:main",
}
LEFT_OUT = (
    ".venv",
    ".venv-real",
    ".git",
    "data",
    "tests",
    "bench",
    "__pycache__",
    ".pytest_cache",
    ".hypothesis",
)
MCP_TOOLS = {"ask_council", "start_deliberation", "get_deliberation", "stop_deliberation"}
QUESTION = "Is a pinned dependency worth its upkeep?"


# The extras, and the features that need them (app/installation/extras.py).
EXTRAS = {"server": "requirements-server.txt", "plot": "requirements-plot.txt"}


def pins(file: str = "requirements.txt") -> list[str]:
    lines = (ROOT / file).read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip install .` builds, from a copy of the checkout."""
    where = tmp_path_factory.mktemp("wheel")
    source = where / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*LEFT_OUT))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(where / "dist"), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    [found] = (where / "dist").glob("council-*.whl")
    return found


def test_the_wheel_holds_what_the_commands_run_and_leaves_the_tooling_out(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata_text = archive.read(
            next(n for n in names if n.endswith(".dist-info/METADATA"))
        ).decode()
        entry_points = archive.read(next(n for n in names if n.endswith("entry_points.txt")))
    requires = [Requirement(r) for r in re.findall(r"^Requires-Dist: (.+)$", metadata_text, re.M)]
    assert [str(r) for r in requires if r.marker is None] == pins()
    for extra, file in EXTRAS.items():
        assert re.search(rf"^Provides-Extra: {extra}$", metadata_text, re.M)
        wanted = [r for r in requires if r.marker and r.marker.evaluate({"extra": extra})]
        assert [f"{r.name}{r.specifier}" for r in wanted] == pins(file)
    for package in RUNTIME:
        assert f"{package}/__init__.py" in names, package
    assert {"worker.py", "starter.py", "workflows/deliberation.py"} <= set(names)
    assert {"web/templates/deliberation.html", "web/static/council.js"} <= set(names)
    assert [n for n in names if n.startswith("app/") and n.endswith("/record.md.j2")]
    assert {
        "web/static/vendor/idiomorph-0.8.0.js",
        "web/static/vendor/idiomorph-LICENSE.txt",
    } <= set(names)
    assert not [n for n in names if n.startswith(TOOLING)]
    tops = {n.split("/")[0] for n in names if ".dist-info" not in n}
    assert tops == {*RUNTIME, "worker.py", "starter.py"}
    for command, target in SCRIPTS.items():
        assert f"{command} = {target}" in entry_points.decode()
    # The licence: MIT, declared in the metadata, its text shipped with the wheel.
    assert re.search(r"^License-Expression: MIT$", metadata_text, re.MULTILINE)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def runtime_distributions() -> set[str]:
    """requirements.txt's distributions and every one they require, as installed here."""
    found: set[str] = set()
    wanted = [Requirement(pin) for pin in pins()]
    while wanted:
        requirement = wanted.pop()
        name = requirement.name.lower().replace("_", "-")
        if name in found:
            continue
        found.add(name)
        for text in metadata.requires(name) or []:
            needed = Requirement(text)
            extras = requirement.extras | {""}
            if needed.marker is None or any(
                needed.marker.evaluate({"extra": extra}) for extra in extras
            ):
                wanted.append(needed)
    return found


def link_dependencies(into: Path) -> None:
    """A directory of links to the files of the runtime distributions (and their
    metadata), nothing else of this environment."""
    into.mkdir()
    site = Path(sysconfig.get_paths()["purelib"])
    for name in runtime_distributions():
        files = metadata.distribution(name).files or []
        for top in {f.parts[0] for f in files if f.parts[0] != ".."}:
            if (site / top).exists() and not (into / top).exists():
                (into / top).symlink_to(site / top)


@dataclass
class Installed:
    bin: Path
    elsewhere: Path  # an empty directory outside the checkout, where the commands run

    def run(
        self, *command: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bin / command[0]), *command[1:]],
            cwd=self.elsewhere,
            env={**os.environ, "PYTHONPATH": "", **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self, *command: str, env: dict[str, str], log: Path) -> Process:
        return spawn(
            command[0],
            [str(self.bin / command[0]), *command[1:]],
            log,
            {"PYTHONPATH": "", **env},
            cwd=self.elsewhere,
        )


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The wheel in a virtual environment of its own, as an isolated application install."""
    where = tmp_path_factory.mktemp("installed")
    assert not where.is_relative_to(ROOT)
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    link_dependencies(where / "dependencies")
    (Path(site) / "dependencies.pth").write_text(f"{where / 'dependencies'}\n")
    pip = [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check"]
    done = subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    checked = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    elsewhere = where / "elsewhere"
    elsewhere.mkdir()
    return Installed(venv / "bin", elsewhere)


def test_the_installed_commands_name_themselves(installed: Installed) -> None:
    for command in (["council"], ["council-worker"], ["council-web"], ["council", "mcp"]):
        shown = installed.run(*command, "--help")
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith(f"usage: {' '.join(command)} ")
    refused = installed.run("council", "--no-such-option")
    assert refused.returncode == 2 and refused.stderr.startswith("council: ")
    # The code runs from the installed package, and the tooling is not there.
    probe = "import starter, web, importlib.util as u; print(starter.__file__, web.__file__);"
    probe += "print([m for m in ('harness', 'simulator', 'bench', 'tests') if u.find_spec(m)])"
    found = installed.run("python", "-c", probe)
    assert found.returncode == 0, found.stderr
    files, tooling = found.stdout.splitlines()
    assert all("site-packages" in f and not Path(f).is_relative_to(ROOT) for f in files.split())
    assert tooling == "[]"


# Imports every module of the installed packages, and prints those that fail and why.
IMPORT_ALL = """
import importlib, pkgutil, sys
names = ["worker", "starter"]
for top in sys.argv[1:]:
    package = importlib.import_module(top)
    names += [info.name for info in pkgutil.walk_packages(package.__path__, top + ".")]
for name in names:
    try:
        importlib.import_module(name)
    except Exception as error:
        print(f"{name}: {type(error).__name__}: {error}")
"""


def test_every_installed_module_imports_without_the_tooling(installed: Installed) -> None:
    """Each module of the wheel imports where only the wheel and its dependencies are: none
    reaches for the harness, the simulator, the benchmarks or the tests (nor for an extra)."""
    found = installed.run("python", "-c", IMPORT_ALL, *RUNTIME)
    assert found.returncode == 0, found.stderr[-2000:]
    assert found.stdout == ""


def test_a_feature_that_needs_a_missing_extra_says_which_in_one_line(
    installed: Installed, tmp_path: Path
) -> None:
    """Installed without its extras, the commands run; `council eval`, which draws plots,
    stops before anything starts and names the extra to install."""
    dataset = tmp_path / "one.jsonl"
    dataset.write_text('{"id": "a", "kind": "number", "question": "1 + 1?", "answer": "2"}\n')
    shown = installed.run(
        "python", "-c", "import importlib.util as u; print(u.find_spec('matplotlib'))"
    )
    assert shown.stdout.strip() == "None"
    refused = installed.run(
        "council", "eval", str(dataset), env={"TEMPORAL_ADDRESS": "127.0.0.1:9"}
    )
    assert refused.returncode == 2, refused.stderr[-2000:]
    assert refused.stderr.count("\n") == 1 and "council[plot]" in refused.stderr
    assert "matplotlib" in refused.stderr


def test_an_installed_council_keeps_its_data_in_the_users_data_directory(
    installed: Installed, tmp_path: Path
) -> None:
    probe = "from app.settings import environment; from app.store import store"
    probe += "; s = environment.current(); print(s.data()); print(store.location(s))"
    # The suite's store (tests/conftest.py) unset: an empty variable counts as unset.
    env = {"XDG_DATA_HOME": str(tmp_path / "share"), "COUNCIL_STORE": "", "COUNCIL_DATA": ""}
    found = installed.run("python", "-c", probe, env=env)
    assert found.returncode == 0, found.stderr[-2000:]
    data = tmp_path / "share" / "council"
    assert found.stdout.splitlines() == [str(data), str(data / "store")]
    moved = installed.run("python", "-c", probe, env={**env, "COUNCIL_DATA": str(tmp_path)})
    assert moved.stdout.splitlines() == [str(tmp_path), str(tmp_path / "store")]


async def test_the_installed_commands_deliberate_and_serve_the_page_and_mcp(
    installed: Installed, temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    env = {
        "TEMPORAL_ADDRESS": temporal_address(temporal),
        "COUNCIL_TASK_QUEUE": f"installed-{uuid.uuid4().hex[:8]}",
        "COUNCIL_LLM_BASE_URL": sim.url,
        "COUNCIL_LLM_API_KEY": TEST_API_KEY,
        "COUNCIL_MODELS": "sim/atlas,sim/borealis,sim/cirrus",
    }
    started: list[Process] = []
    try:
        worker = installed.start("council-worker", env=env, log=tmp_path / "worker.log")
        started.append(worker)
        await asyncio.to_thread(
            wait_for, lambda: "worker ready" in worker.log_text(), "council-worker", worker
        )

        asked = await asyncio.to_thread(
            installed.run,
            "council",
            "start",
            QUESTION,
            "--max-rounds",
            "1",
            "--wait",
            "--json",
            env=env,
        )
        assert asked.returncode == 0, asked.stderr[-2000:]
        record = json.loads(asked.stdout)
        assert record["query"] == QUESTION and record["stage3"]["response"]

        port = free_port()
        page = installed.start(
            "council-web", "--port", str(port), env=env, log=tmp_path / "web.log"
        )
        started.append(page)
        url = f"http://127.0.0.1:{port}"
        await asyncio.to_thread(wait_for, lambda: answers(url), "council-web", page)
        async with httpx.AsyncClient(timeout=10) as http:
            shown = await http.get(f"{url}/deliberations/{record['id']}")
        assert shown.status_code == 200 and QUESTION in shown.text

        port = free_port()
        mcp = installed.start(
            "council", "mcp", "--http", f"127.0.0.1:{port}", env=env, log=tmp_path / "mcp.log"
        )
        started.append(mcp)
        await asyncio.to_thread(wait_for, lambda: port_open("127.0.0.1", port), "council mcp", mcp)
        async with Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp")) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == MCP_TOOLS
            got = await client.call_tool("get_deliberation", {"id": record["id"]})
        assert not got.is_error, got
    finally:
        for process in started:
            process.stop()
