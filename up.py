"""`make up`: a local council and its web page, in the foreground until Ctrl-C.

    python up.py [--data DIR]

Starts what is not running yet: the embedded Temporal dev server unless one answers at
TEMPORAL_ADDRESS (state in DIR/temporal.db, default data/; its Web UI on the gRPC port
+ 1000, :8233), the simulator when no API key is set (saying so: the answers will be
simulated), a worker, and the web page (`python -m web` on COUNCIL_WEB_HOST and
COUNCIL_WEB_PORT, default 127.0.0.1:8080). Prints the page's address and the Temporal
UI's, then waits. Ctrl-C (SIGINT) or SIGTERM stops exactly what it started; a server it
found running stays up. Logs go to DIR/logs/.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit

from harness.local import local_council, shown, ui_address
from harness.processes import DATA, Process, port_open, reachable_host, start_web
from web.__main__ import DEFAULT_HOST, DEFAULT_PORT

SIMULATED_NOTE = "the answers will be simulated (the built-in SIMULATOR plays every member)"


class Stopped(BaseException):
    """SIGINT or SIGTERM arrived: stop what was started (BaseException, like
    KeyboardInterrupt, so that no `except Exception` on the way swallows it)."""


def say(message: str) -> None:
    print(f"up: {message}", file=sys.stderr, flush=True)


def web_address(env: Mapping[str, str]) -> tuple[str, int]:
    """The page's host and port (COUNCIL_WEB_HOST, COUNCIL_WEB_PORT); ValueError with one
    line naming the variable when the port cannot be used."""
    host = (env.get("COUNCIL_WEB_HOST") or "").strip() or DEFAULT_HOST
    raw = (env.get("COUNCIL_WEB_PORT") or "").strip() or str(DEFAULT_PORT)
    port = int(raw) if raw.isdigit() else 0
    if not 1 <= port <= 65535:
        raise ValueError(f"COUNCIL_WEB_PORT must be a port number from 1 to 65535 (got {raw!r})")
    return host, port


def answers(url: str) -> bool:
    """Whether something listens at an http(s) address."""
    parts = urlsplit(url)
    if not parts.hostname:
        return False
    return port_open(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))


def _stop(signum: int, frame: FrameType | None) -> None:
    # A second Ctrl-C must not cut the stopping short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Stopped(signal.Signals(signum).name)


def watch(started: list[Process]) -> int:
    """Wait for a signal; a process that exits on its own ends the wait (status 1)."""
    while True:
        for process in started:
            if not process.alive():
                log = f", log in {shown(process.log_path)}" if process.log_path else ""
                say(
                    f"the {process.name} exited (status {process.popen.returncode}{log}); "
                    "stopping the rest"
                )
                return 1
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python up.py", description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="state and logs (default data/)")
    args = parser.parse_args(argv)
    try:
        host, port = web_address(os.environ)
    except ValueError as error:
        say(str(error))
        return 2
    if port_open(reachable_host(host), port):
        say(
            f"COUNCIL_WEB_PORT: port {port} on {host} is already in use; stop what listens "
            f"there or pick another port (COUNCIL_WEB_PORT={port + 1} make up)"
        )
        return 2
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)
    started: list[Process] = []
    try:
        with local_council(say, SIMULATED_NOTE, data=args.data, started=started) as env:
            web_log = args.data / "logs" / "web.log"
            say(f"starting the web page (log in {shown(web_log)})")
            started.append(start_web(env, host, port, log_path=web_log))
            ui = ui_address(env)
            reused = not any(process.name == "temporal" for process in started)
            unreachable = " (nothing answers there: set COUNCIL_UI_URL)" if not answers(ui) else ""
            say("the council is up; Ctrl-C stops what this started")
            say(f"  the page:        {started[-1].extra['url']}")
            say(f"  the Temporal UI: {ui}{unreachable if reused else ''}")
            if os.environ.get("COUNCIL_WEB_TOKEN"):
                say(
                    "  starting and stopping on the page need COUNCIL_WEB_TOKEN (sign in at /login)"
                )
            return watch(started)
    except Stopped:
        return 0
    except RuntimeError as error:
        say(f"could not start: {error}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
