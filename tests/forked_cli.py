"""Python commands of the suite without paying for the imports each time: `python
starter.py ARGS...`, `python -m web ...`, `python worker.py ...` and the other Python
servers harness.processes starts (simulator, codec server).

Most of a command's start is importing Temporal's client and worker, pydantic and the
models (about two CPU-seconds on the test machine); the suite runs the command, the page's
server and workers a few hundred times. A fork server, started once per test process,
imports `starter`, `web`, `service` and the other entry points with their dependencies and
then forks a child for each command: the child is a process of its own, with the standard
input, output and error, the environment, the working directory and the arguments it is
given, runs the script (or module) as `__main__` exactly as `python SCRIPT` (`python -m
MODULE`) does, and exits with the command's own status. What is shared is only what the
imports left in memory (no thread, no connection: the server checks that it has one thread
before it forks). tests/test_starter.py still runs the real `python starter.py` as well, and
tests/test_durability.py a real `python worker.py`.

    python -m tests.forked_cli SOCKET   the server (the test process starts it)
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import gc
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "starter.py"


# ---- the server -----------------------------------------------------------------------


def _serve(path: str) -> None:
    # What each child would import: once, here.
    import app.codec.server  # noqa: F401
    import service.command
    import service.worker  # noqa: F401
    import simulator.server  # noqa: F401
    import starter  # noqa: F401
    import web.app  # noqa: F401

    if threading.active_count() != 1:
        raise SystemExit("forked_cli: the imports started a thread; cannot fork safely")
    # What the imports made lives as long as each child: out of their full collections (the
    # CLI makes one at the end of each command), and its pages stay shared with the server.
    gc.collect()
    gc.freeze()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped as they end
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(1.0)
    parent = os.getppid()
    print("ready", flush=True)
    while os.getppid() == parent:  # the test process is gone: so is the server
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        # The child starts once its pid is sent: else a child that ends at once could send
        # its status first, and be read as its pid.
        sent_r, sent_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            listener.close()
            os.close(sent_w)
            os.read(sent_r, 1)
            os.close(sent_r)
            _child(conn, json.loads(message), fds)  # never returns
        os.close(sent_r)
        for fd in fds:
            os.close(fd)
        conn.sendall(f"{pid}\n".encode())
        os.close(sent_w)  # the child's read returns
        conn.close()


def _child(conn: socket.socket, request: dict[str, object], fds: list[int]) -> None:
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        if request.get("session"):
            os.setsid()  # as Popen's start_new_session: stopped with its process group
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update(request["env"])  # type: ignore[arg-type]
        from app.settings import environment as settings

        settings._current = None  # read from this command's environment, as at a start
        sys.stdin = open(0, closefd=False)  # noqa: SIM115
        module = request.get("module")
        script = str(request.get("script") or SCRIPT)
        sys.argv = [str(module or script), *request["argv"]]  # type: ignore[misc]
        try:
            if module:
                runpy.run_module(str(module), run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as leaving:
            code = _status(leaving.code)
        except BaseException:
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        conn.sendall(f"{code}\n".encode())
    finally:
        os._exit(code)


def _status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


# ---- the client -----------------------------------------------------------------------


class _Server:
    """This test process's fork server, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._path = ""

    def path(self) -> str:
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                where = tempfile.mkdtemp(prefix="council-cli-")
                self._path = os.path.join(where, "fork.sock")
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "tests.forked_cli", self._path],
                    cwd=ROOT,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                )
                assert self._process.stdout is not None
                line = self._process.stdout.readline()
                if line.strip() != b"ready":
                    raise RuntimeError("the command fork server did not start")
                atexit.register(self._process.kill)
            return self._path


_server = _Server()


def _run(
    argv: list[str], env: dict[str, str], stdin: bytes, started: list[int]
) -> tuple[int, bytes, bytes]:
    in_read, in_write = os.pipe()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    request = {"argv": argv, "env": env, "cwd": str(ROOT)}
    process = _fork(request, [in_read, out_write, err_write])
    for fd in (in_read, out_write, err_write):
        os.close(fd)
    started.append(process.pid)
    chunks: dict[int, bytes] = {}

    def drain(fd: int) -> None:
        with open(fd, "rb") as pipe:
            chunks[fd] = pipe.read()

    readers = [threading.Thread(target=drain, args=(fd,)) for fd in (out_read, err_read)]
    for reader in readers:
        reader.start()
    try:
        with open(in_write, "wb") as pipe:
            pipe.write(stdin)
    except BrokenPipeError:  # the command ended without reading it all
        pass
    for reader in readers:
        reader.join()
    code = process.wait()
    return (code if code is not None else -1), chunks[out_read], chunks[err_read]


async def run_starter(
    *args: str, env: dict[str, str], timeout: float, stdin: bytes = b""
) -> tuple[int, str, str]:
    """`python starter.py ARGS...` in a process of its own, forked from the server:
    (exit status, stdout, stderr). Past `timeout` the process is killed and TimeoutError
    raised, as asyncio.wait_for does."""
    started: list[int] = []
    work = asyncio.ensure_future(asyncio.to_thread(_run, list(args), env, stdin, started))
    try:
        code, out, err = await asyncio.wait_for(asyncio.shield(work), timeout)
    except (TimeoutError, asyncio.CancelledError):
        for pid in started:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        await asyncio.gather(work, return_exceptions=True)
        raise
    return code, out.decode(), err.decode()


class ForkedPopen:
    """A forked process as harness.processes.Process holds a Popen: its pid, poll() and
    wait(). Its status comes over the server's connection (None while it runs; a process
    killed by a signal reads -1)."""

    def __init__(self, conn: socket.socket, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._conn = conn

    def poll(self) -> int | None:
        return self.wait(0) if self.returncode is None else self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        self._conn.settimeout(timeout)
        try:
            status = self._conn.recv(64)
        except (TimeoutError, BlockingIOError):
            if timeout is None or timeout > 0:
                raise subprocess.TimeoutExpired("forked", timeout or 0) from None
            return None
        self.returncode = int(status) if status.strip() else -1
        self._conn.close()
        return self.returncode


def fork_python(args: list[str], env: Mapping[str, str], log: int, cwd: Path = ROOT) -> ForkedPopen:
    """`python ARGS...` (`SCRIPT ...` or `-m MODULE ...`) forked from the server, as
    harness.processes would start it (its launcher in the suite, tests/conftest.py): a
    session of its own, output and errors to `log`, nothing on its standard input."""
    if args[0] == "-m":
        what: dict[str, object] = {"module": args[1], "argv": args[2:]}
    else:
        what = {"script": str(Path(cwd, args[0])), "argv": args[1:]}
    request = {**what, "env": dict(env), "cwd": str(cwd), "session": True}
    with open(os.devnull, "rb") as nothing:
        return _fork(request, [nothing.fileno(), log, log])


def _fork(request: dict[str, object], fds: list[int]) -> ForkedPopen:
    """Ask the server to fork `request` with `fds` as its standard input, output and error;
    the connection then carries the process's status."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(_server.path())
    socket.send_fds(conn, [json.dumps(request).encode()], fds)
    pid = b""
    while not pid.endswith(b"\n"):  # byte by byte: the status that follows stays unread
        pid += conn.recv(1)
    return ForkedPopen(conn, int(pid))


if __name__ == "__main__":
    _serve(sys.argv[1])
