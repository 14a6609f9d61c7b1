"""A stdio tool server cannot take the keys: it runs confined (activities.confinement), so
that no process of the worker and no file that holds a key can be read. A hostile server of
the tests' own (tests/looting_mcp.py) tries every route from inside a real worker's run: its
own environment, every process's /proc environ, cmdline and memory, the worker's .env,
council.toml, data directory and payload store; and it disguises what it finds, so that no
redaction could save the worker. Confined, it finds nothing; trusted, the same server finds
the keys (the test would see a leak). Where nothing can confine it, a server is refused in
one line unless its entry says trusted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters
from temporalio.testing import WorkflowEnvironment

from activities import confinement
from activities.confinement import Confinement
from activities.tool_failure import ToolFailure
from app.temporal import connection
from council.models import DeliberationRecord
from council.tools import ToolResult
from harness import processes
from harness.processes import ROOT, start_worker
from simulator import SimulatorServer
from tests.looting_mcp import LOOT_XOR
from tests.temporal_fixtures import FOUR_MODELS, TEST_API_KEY, request, worker_env
from workflows.deliberation import Deliberation

LOOTER = Path(__file__).resolve().parent / "looting_mcp.py"
DOTENV_KEY = "sk-dotenv-provider-key-81f0c2"
TOML_TOKEN = "sk-toml-tool-token-4d9e77"
DATA_KEY = "sk-data-file-key-0b3a6e"
STORE_KEY = "sk-store-blob-key-77c1d9"
QUESTION = "Loot the secrets of this machine."


def needs_a_sandbox() -> None:
    path, why = confinement.sandbox()
    if path is None:
        pytest.skip(f"no sandbox here: {why} (make test installs bubblewrap)")


def undisguised(text: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(bytes(b ^ LOOT_XOR for b in bytes.fromhex(text)))
    return found


async def loot(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path, trusted: bool
) -> tuple[DeliberationRecord, list[dict[str, Any]]]:
    """A real worker (a new interpreter, its key in its environment, a .env, council.toml
    and data directory of its own) runs a deliberation whose members call the looting
    server; what each call found, from the run's history."""
    home = tmp_path / ("trusted" if trusted else "confined")
    data = home / "data"
    (data / "runs").mkdir(parents=True)
    (data / "runs" / "keys.txt").write_text(f"KEY={DATA_KEY}\n")
    (home / ".env").write_text(f"OPENROUTER_API_KEY={DOTENV_KEY}\n")
    store = Path(os.environ["COUNCIL_STORE"])
    planted = store / f"planted-{uuid.uuid4().hex[:8]}"
    planted.write_text(STORE_KEY)
    config = home / "council.toml"
    paths = [str(home / ".env"), str(config), str(data), str(store)]
    config.write_text(
        "[tools.loot]\n"
        f"command = {json.dumps([sys.executable, str(LOOTER)])}\n"
        f"env = {{ LOOT_PATHS = {json.dumps(json.dumps(paths))} }}\n"
        f"trusted = {json.dumps(trusted)}\n"
        "[tools.other]\n"
        f'command = ["python", "-c", "pass"]\nenv = {{ OTHER_TOKEN = "{TOML_TOKEN}" }}\n'
    )
    queue = f"loot-{uuid.uuid4().hex[:8]}"
    env = worker_env(temporal, sim, queue, COUNCIL_CONFIG=str(config), COUNCIL_DATA=str(data))
    # A new interpreter, as a user starts one (the key in its environment block).
    with processes.new_interpreters():
        worker = start_worker(env, home / "worker.log", cwd=home)
    try:
        record: DeliberationRecord = await temporal.client.execute_workflow(
            Deliberation.run,
            request(QUESTION, models=FOUR_MODELS[:2], max_rounds=1, min_rounds=0, tools=["loot"]),
            id=queue,
            task_queue=queue,
            result_type=DeliberationRecord,
        )
    finally:
        worker.stop()
        planted.unlink()
    converter = connection.data_converter()
    found = []
    handle = temporal.client.get_workflow_handle(queue)
    async for event in handle.fetch_history_events():
        if event.HasField("activity_task_completed_event_attributes"):
            payloads = list(event.activity_task_completed_event_attributes.result.payloads)
            try:
                [result] = await converter.decode(payloads, [ToolResult])
            except Exception:
                continue
            if isinstance(result, ToolResult) and result.text and not result.error:
                found.append(undisguised(result.text))
    assert record.tool_calls and found, record.tools_unavailable
    return record, found


async def test_a_confined_server_reads_no_process_of_the_worker_and_no_file_of_keys(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    needs_a_sandbox()
    record, found = await loot(temporal, sim, tmp_path, trusted=False)
    keys = {TEST_API_KEY, DOTENV_KEY, TOML_TOKEN, DATA_KEY, STORE_KEY}
    for each in found:
        # It sees its own processes only (its sandbox's: the sandbox's reaper, pid 1, a
        # fresh process of bwrap with the server's own small environment), no other's
        # memory, no file of keys.
        assert each["pid_count"] <= 3, each["pids"]
        assert each["memory_count"] <= 1 and set(each["memory"]) <= {1}
        assert each["path_count"] == 0, each["paths"]
        assert each["tokens"] == [], each["tokens"]
    dumped = record.model_dump_json()
    assert not any(key in dumped for key in keys)


async def test_a_trusted_server_is_not_confined_and_the_looter_would_find_the_keys(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    """The control: the same server, trusted, runs as the worker's user with nothing
    hidden, and finds the keys (this is what the confined test would have seen)."""
    _, found = await loot(temporal, sim, tmp_path, trusted=True)
    tokens = {token for each in found for _, token in each["tokens"]}
    assert {DOTENV_KEY, TOML_TOKEN, DATA_KEY, STORE_KEY} <= tokens, tokens
    assert found[0]["pid_count"] > 3  # the machine's processes


def test_a_server_under_tmp_sees_its_environment_and_the_files_it_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's own /tmp covers the machine's: a server whose virtual environment, script
    and worker's cwd are there (a checkout under /tmp, say) still finds them, read-only."""
    needs_a_sandbox()
    if not tmp_path.is_relative_to("/tmp"):
        pytest.skip(f"the test's folder {tmp_path} is not under the sandbox's own /tmp")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = (venv / "lib").glob("python*/site-packages")
    (site / "probe_library.py").write_text("FOUND = 'the library'\n")
    (tmp_path / "server.py").write_text(
        "import probe_library\nprint(probe_library.FOUND, open('notes.txt').read())\n"
    )
    (tmp_path / "notes.txt").write_text("and the notes")
    monkeypatch.chdir(tmp_path)  # the worker's cwd: the relative script is read from it
    server = StdioServerParameters(command=str(venv / "bin" / "python"), args=["server.py"])
    wrapped = Confinement().wrap(server, trusted=False)
    done = subprocess.run(
        [wrapped.command, *wrapped.args], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "the library and the notes", done.stderr


# ---- the rules, fast ----------------------------------------------------------------------


@pytest.mark.fast
def test_where_nothing_can_confine_a_server_it_is_refused_unless_trusted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        confinement, "sandbox", lambda: (None, "bubblewrap (bwrap) is not installed")
    )
    server = StdioServerParameters(command=sys.executable, args=["server.py"], env={})
    with pytest.raises(ToolFailure) as refused:
        Confinement().wrap(server, trusted=False)
    assert str(refused.value) == (
        "a stdio tool server runs confined, and here bubblewrap (bwrap) is not installed: "
        "install bubblewrap (apt-get install bubblewrap), or set trusted = true in its [tools] "
        "entry to run it with the worker's own rights"
    )
    assert refused.value.transient is False
    assert Confinement().wrap(server, trusted=True) == server


@pytest.mark.fast
def test_a_confined_start_hides_the_files_of_keys_and_takes_only_its_env(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(confinement, "sandbox", lambda: ("/usr/bin/bwrap", ""))
    (tmp_path / "data").mkdir()
    (tmp_path / ".env").write_text("K=v\n")
    hidden = Confinement.hiding([tmp_path / "data", tmp_path / ".env", tmp_path / "gone"])
    server = StdioServerParameters(
        command="python3", args=["-c", "pass"], env={"PATH": os.environ["PATH"], "A": "1"}
    )
    wrapped = hidden.wrap(server, trusted=False)
    assert wrapped.command == "/usr/bin/bwrap"
    words = wrapped.args
    for flag in ("--unshare-pid", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in words
    assert words[words.index("--cap-drop") + 1] == "ALL"
    assert ["--tmpfs", str(tmp_path / "data")] == words[words.index(str(tmp_path / "data")) - 1 :][
        :2
    ]
    assert ["--ro-bind", "/dev/null", str(tmp_path / ".env")] == words[
        words.index(str(tmp_path / ".env")) - 2 :
    ][:3]
    assert str(tmp_path / "gone") not in words  # nothing to hide there
    assert words[words.index("--setenv") : words.index("--setenv") + 3] == [
        "--setenv",
        "PATH",
        os.environ["PATH"],
    ]
    assert words[-4:-2] == ["--", words[-3]] and Path(words[-3]).name.startswith("python3")
    # A program that is nowhere fails as its start would, naming it.
    missing = server.model_copy(update={"command": "council-no-such-server-9f"})
    with pytest.raises(FileNotFoundError, match="council-no-such-server-9f"):
        hidden.wrap(missing, trusted=False)


def test_the_worker_makes_itself_non_dumpable() -> None:
    """No process of its user but root may then read its memory or environment."""
    if not sys.platform.startswith("linux"):
        pytest.skip("prctl is Linux's")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from activities.confinement import protect_this_process as p; print(p())",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip() == "True", done.stderr
