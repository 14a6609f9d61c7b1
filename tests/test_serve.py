"""`make server`, `make codec-server` and `make simulator` (harness.serve) where `make up`
would put them: TEMPORAL_ADDRESS (the UI 1000 above), COUNCIL_DATA, COUNCIL_CODEC_PORT and
COUNCIL_SIM_PORT, through the Makefile as a user runs it; a setting that cannot be used,
or a port that is taken, is one line before anything starts. And what `make up` says of a
server it finds running whose UI has no codec endpoint."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from harness.processes import ROOT, answers, free_port, port_open, start_temporal, wait_for
from tests.stored_payloads import stored_in
from tests.test_up import UNSET, descendants, free_server_port, make_up, still_running

BIN = Path(sys.executable).parent


@dataclass
class Made:
    popen: subprocess.Popen
    output_path: Path

    def output(self) -> str:
        return self.output_path.read_text(errors="replace")

    def line(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output(), re.MULTILINE)
            if found:
                return found
            assert self.popen.poll() is None, f"make exited early:\n{self.output()}"
            time.sleep(0.1)
        raise AssertionError(f"no line matching {pattern!r} in {timeout:.0f} s:\n{self.output()}")

    def interrupt(self, timeout: float = 25) -> None:
        """Ctrl-C, as a terminal sends it: to make and what it runs."""
        os.killpg(self.popen.pid, signal.SIGINT)
        self.popen.wait(timeout)


@contextmanager
def make(tmp: Path, target: str, **env: str) -> Iterator[Made]:
    """`make TARGET` in the checkout with this environment's Python (its venv taken as
    installed), in a session of its own, its output in a file."""
    environment = {k: v for k, v in os.environ.items() if k not in UNSET}
    output = tmp / f"{target}.out"
    with open(output, "wb") as out:
        popen = subprocess.Popen(
            ["make", "-s", "-o", ".venv/.installed", f"BIN={BIN}", target],
            cwd=ROOT,
            env={**environment, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    made = Made(popen, output)
    try:
        yield made
    finally:
        if popen.poll() is None:
            try:
                made.interrupt()
            except subprocess.TimeoutExpired:
                os.killpg(popen.pid, signal.SIGKILL)
                popen.wait()


def preflight(codec: str, origin: str) -> httpx.Response:
    return httpx.options(
        f"{codec}/default/decode",
        headers={
            "Origin": origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type,x-namespace",
        },
        timeout=5,
    )


async def test_make_server_starts_the_server_its_ui_and_codec_server_where_make_up_would(
    tmp_path: Path,
) -> None:
    server_port, codec_port = free_server_port(), free_port()
    data = tmp_path / "data"
    with make(
        tmp_path,
        "server",
        TEMPORAL_ADDRESS=f"127.0.0.1:{server_port}",
        COUNCIL_CODEC_PORT=str(codec_port),
        COUNCIL_DATA=str(data),
    ) as server:
        server.line("the server is up")
        ui = server.line(r"the Temporal UI:\s+(\S+)").group(1)
        codec = server.line(r"the codec server:\s+(\S+)").group(1)
        assert (ui, codec) == (
            f"http://127.0.0.1:{server_port + 1000}",
            f"http://127.0.0.1:{codec_port}",
        )
        assert port_open("127.0.0.1", server_port)
        assert (data / "temporal.db").exists()
        async with httpx.AsyncClient(timeout=10) as http:
            settings = (await http.get(f"{ui}/api/v1/settings")).json()
            assert settings["Codec"]["Endpoint"] == codec
            for origin in (ui, f"http://localhost:{server_port + 1000}"):
                assert preflight(codec, origin).headers["access-control-allow-origin"] == origin
            # It reads the payload store a worker of this data directory writes.
            text = "A stored answer. " * 4000
            stored = await stored_in("default", {"COUNCIL_DATA": str(data)}, text)
            decoded = await http.post(
                f"{codec}/default/decode",
                content=json_format.MessageToJson(Payloads(payloads=[stored])),
                headers={"Content-Type": "application/json"},
            )
        [payload] = json_format.Parse(decoded.text, Payloads()).payloads
        assert json.loads(payload.data) == text
        started = descendants(server.popen.pid)
        server.interrupt()
    assert "stopped the processes it started" in server.output()
    assert still_running(started) == []
    for port in (server_port, server_port + 1000, codec_port):
        assert not port_open("127.0.0.1", port)


def test_make_codec_server_and_make_simulator_listen_where_they_are_told(tmp_path: Path) -> None:
    server_port, codec_port, sim_port = free_server_port(), free_port(), free_port()
    ui = f"http://127.0.0.1:{server_port + 1000}"
    with make(
        tmp_path,
        "codec-server",
        TEMPORAL_ADDRESS=f"localhost:{server_port}",
        COUNCIL_CODEC_PORT=str(codec_port),
    ) as codec_server:
        codec_server.line(rf"codec server on http://127.0.0.1:{codec_port} ")
        codec = f"http://127.0.0.1:{codec_port}"
        wait_for(lambda: answers(f"{codec}/health"), "make codec-server")
        # The UI of TEMPORAL_ADDRESS's dev server may call it, beside the default origins.
        for origin in (ui, "http://localhost:8233"):
            assert preflight(codec, origin).headers["access-control-allow-origin"] == origin
        assert preflight(codec, "http://elsewhere.invalid").status_code == 400
        with make(tmp_path, "simulator", COUNCIL_SIM_PORT=str(sim_port)) as simulator:
            url = simulator.line(r"point the worker at it: COUNCIL_LLM_BASE_URL=(\S+)").group(1)
            assert url == f"http://127.0.0.1:{sim_port}/v1"
            wait_for(lambda: answers(f"{url}/models"), "make simulator")
            simulator.interrupt()
        codec_server.interrupt()
    assert not port_open("127.0.0.1", codec_port) and not port_open("127.0.0.1", sim_port)


def serve(piece: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in UNSET}
    return subprocess.run(
        [sys.executable, "-m", "harness.serve", piece],
        cwd=ROOT,
        env={**environment, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_port_that_cannot_be_used_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    done = serve("codec-server", COUNCIL_CODEC_PORT="70000")
    assert (done.returncode, done.stderr) == (
        2,
        "codec-server: COUNCIL_CODEC_PORT must be a port number from 1 to 65535 (got '70000')\n",
    )
    done = serve("server", TEMPORAL_ADDRESS="localhost")
    assert (done.returncode, done.stderr) == (
        2,
        "server: TEMPORAL_ADDRESS must be HOST:PORT, such as localhost:7233 (got 'localhost')\n",
    )
    done = serve("simulator", COUNCIL_SIM_PORT="8800x")
    assert done.returncode == 2
    assert (
        done.stderr
        == "simulator: COUNCIL_SIM_PORT must be a port number from 1 to 65535 (got '8800x')\n"
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for piece, variable in (
            ("simulator", "COUNCIL_SIM_PORT"),
            ("codec-server", "COUNCIL_CODEC_PORT"),
            ("server", "COUNCIL_CODEC_PORT"),
        ):
            done = serve(
                piece,
                **{variable: str(port)},
                TEMPORAL_ADDRESS=f"127.0.0.1:{free_server_port()}",
                COUNCIL_DATA=str(tmp_path / "data"),
            )
            assert done.returncode == 2, done.stderr
            assert done.stderr.startswith(
                f"{piece}: {variable}: port {port} on 127.0.0.1 is already in use"
            )
            assert done.stderr.count("\n") == 1
        # Through make as well (make adds its own line about the failed target).
        with make(tmp_path, "simulator", COUNCIL_SIM_PORT=str(port)) as refused:
            assert refused.popen.wait(30) != 0
        assert f"simulator: COUNCIL_SIM_PORT: port {port} on 127.0.0.1" in refused.output()
    assert not (tmp_path / "data").exists()


async def test_a_server_found_running_without_a_codec_endpoint(tmp_path: Path) -> None:
    """`make server` does not start a second one; `make up` uses it and says in one line how
    its UI can show stored texts."""
    server_port = free_server_port()
    address = f"127.0.0.1:{server_port}"
    running = start_temporal(None, port=server_port, ui_port=server_port + 1000)
    try:
        done = serve("server", TEMPORAL_ADDRESS=address, COUNCIL_DATA=str(tmp_path / "data"))
        assert done.returncode == 2
        assert done.stderr == (
            f"server: TEMPORAL_ADDRESS: a Temporal server already answers at {address}; stop it "
            f"or pick another port (TEMPORAL_ADDRESS=127.0.0.1:{server_port + 1})\n"
        )
        codec_port = free_port()
        with make_up(
            tmp_path,
            TEMPORAL_ADDRESS=address,
            COUNCIL_WEB_PORT=str(free_port()),
            COUNCIL_CODEC_PORT=str(codec_port),
            COUNCIL_TASK_QUEUE=f"council-serve-{server_port}",
        ) as up:
            up.line("the council is up")
            started = " | ".join(descendants(up.popen.pid).values())
            assert "app.codec.server" not in started
            assert up.stop(signal.SIGINT) == 0
        [advice] = [line for line in up.output().splitlines() if "codec" in line]
        assert advice == (
            f"up: the Temporal UI at http://127.0.0.1:{server_port + 1000} shows stored texts "
            "as references (it has no codec endpoint): run `make codec-server` and enter "
            f"http://127.0.0.1:{codec_port} in the UI's Codec Server settings, or restart "
            "the server with `make server`"
        )
    finally:
        running.stop()
