"""`make up`: a local council and its web page, in the foreground until Ctrl-C.

    python up.py [--data DIR] [--latency SECONDS]      (make up SIM_LATENCY=SECONDS)

Starts what is not running yet: the embedded Temporal dev server unless one answers at
TEMPORAL_ADDRESS (state in DIR/temporal.db, default COUNCIL_DATA, else data/; its Web UI
on the gRPC port + 1000, :8233) with the codec server its UI reads stored texts through
(COUNCIL_CODEC_PORT, default 8081), the simulator when no API key is set (on
COUNCIL_SIM_PORT, default 8800, saying so: the answers will be simulated; each call takes
--latency seconds, default 2 to 5, so that a run can be watched), a worker (its
Prometheus metrics on COUNCIL_METRICS_PORT when set, on COUNCIL_METRICS_HOST), and the web
page (`python -m web` on COUNCIL_WEB_HOST and COUNCIL_WEB_PORT, default 127.0.0.1:8080).
A port among these that is taken is refused in one line before anything starts. Prints
the page's address, the Temporal UI's, the codec server's, the simulator's and the
metrics', then waits. Ctrl-C (SIGINT) or SIGTERM
stops exactly what it started; a server it found running stays up (with one line on how
its UI can show stored texts, when it cannot). Logs go to DIR/logs/.

With the simulator, the page's default council (the simulator's members) and the
simulator's address are written to DIR/default-council.json while it runs: the CLI and
the MCP server of another shell, on the same server and task queue, start the same
council, and `starter.py doctor` there checks the simulator (app.settings.councils).
"""

from __future__ import annotations

# First: a Python without Council's packages is told so in one line, and the fix.
from app.installation import dependencies  # noqa: F401  # isort: skip

import argparse
import sys
from pathlib import Path
from urllib.parse import urlsplit

from app.settings import councils
from app.settings import environment as app_settings
from app.settings.environment import Settings, SettingsError
from harness.foreground import Stopped, shown, stop_on_signals, watch
from harness.local import LocalServer, local_council, simulates, ui_address
from harness.processes import DATA, Process, port_open, reachable_host, start_web, url_host
from simulator.config import LATENCY_VARIABLE, Latency, describe_latency, parse_latency

SIMULATED_NOTE = "the answers will be simulated (the built-in SIMULATOR plays every member)"
# Seconds each simulated call takes unless SIM_LATENCY says otherwise: slow enough to
# watch answers stream, reviews fill in and Stop or One more round apply.
SIM_LATENCY = "SIM_LATENCY"
DEFAULT_SIM_LATENCY = "2-5"


def say(message: str) -> None:
    print(f"up: {message}", file=sys.stderr, flush=True)


def sim_latency(given: str) -> tuple[str, Latency]:
    """--latency (make up's SIM_LATENCY) as given (default 2-5) and read; ValueError with
    one line naming it."""
    text = given.strip() or DEFAULT_SIM_LATENCY
    try:
        return text, parse_latency(text)
    except ValueError as error:
        raise ValueError(f"{SIM_LATENCY} {error}") from None


def answers(url: str) -> bool:
    """Whether something listens at an http(s) address."""
    parts = urlsplit(url)
    if not parts.hostname:
        return False
    return port_open(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))


def port_taken(variable: str, host: str, port: int, what: str = "") -> str | None:
    """One line naming the variable when something listens on its port already."""
    if not port_open(reachable_host(host), port):
        return None
    return (
        f"{variable}: port {port} on {host} is already in use{what}; stop what listens "
        f"there or pick another port ({variable}={port + 1} make up)"
    )


def taken_ports(settings: Settings) -> str | None:
    """The first of the page's, the simulator's (when it will run) and the metrics' ports
    that something listens on already, in one line; None when all are free."""
    checks = [("COUNCIL_WEB_PORT", settings.web_host, settings.web_port, "")]
    if simulates(settings):
        checks.append(
            ("COUNCIL_SIM_PORT", "127.0.0.1", settings.sim_port, " (a `make simulator`?)")
        )
    if settings.metrics_port is not None:
        checks.append(("COUNCIL_METRICS_PORT", settings.metrics_host, settings.metrics_port, ""))
    for variable, host, port, what in checks:
        taken = port_taken(variable, host, port, what)
        if taken:
            return taken
    return None


def metrics_url(settings: Settings) -> str | None:
    if settings.metrics_port is None:
        return None
    host = url_host(reachable_host(settings.metrics_host))
    return f"http://{host}:{settings.metrics_port}/metrics"


def main(argv: list[str] | None = None) -> int:
    try:
        settings = app_settings.load()
    except SettingsError as error:
        say(str(error))
        return 2
    parser = argparse.ArgumentParser(prog="python up.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=settings.data_dir or DATA,
        help="state and logs (default COUNCIL_DATA, else data/)",
    )
    parser.add_argument(
        "--latency",
        default="",
        help="each simulated call's seconds: 0, 1.5 or 1-3 (default 2-5; make up's SIM_LATENCY)",
    )
    args = parser.parse_args(argv)
    host, port = settings.web_host, settings.web_port
    try:
        latency_text, latency = sim_latency(args.latency)
        server = LocalServer.of(args.data)
    except ValueError as error:
        say(str(error))
        return 2
    taken = taken_ports(settings)
    if taken:
        say(taken)
        return 2
    taken = server.codec_port_taken() if not server.answers() else None
    if taken:
        say(taken)
        return 2
    stop_on_signals()
    started: list[Process] = []
    default_council = args.data / councils.LOCAL_COUNCIL_FILE
    pace = {LATENCY_VARIABLE: latency_text}
    try:
        with local_council(
            say,
            SIMULATED_NOTE,
            simulator_env=pace,
            data=args.data,
            started=started,
            tools=True,
            sim_port=settings.sim_port,
        ) as env:
            members = Settings.read(env)  # as the stack's processes get them
            if members.simulated:
                [simulator] = [p for p in started if p.name == "simulator"]
                councils.write_local_council(
                    default_council,
                    members.default_models,
                    members.default_chairman,
                    base_url=simulator.extra["url"],
                )
            web_log = args.data / "logs" / "web.log"
            say(f"starting the web page (log in {shown(web_log)})")
            started.append(start_web(env, host, port, log_path=web_log))
            ui = ui_address(env)
            reused = not any(process.name == "temporal" for process in started)
            unreachable = " (nothing answers there: set COUNCIL_UI_URL)" if not answers(ui) else ""
            say("the council is up; Ctrl-C stops what this started")
            say(f"  the page:         {started[-1].extra['url']}")
            say(f"  the Temporal UI:  {ui}{unreachable if reused else ''}")
            hint = f"; make up {SIM_LATENCY}=0 for instant replies" if latency else ""
            for process in started:
                if process.name == "codec server":
                    url = process.extra["url"]
                    say(f"  the codec server: {url} (the Temporal UI reads stored texts there)")
                if process.name == "simulator":
                    url = process.extra["url"]
                    say(f"  the simulator:    {url} ({describe_latency(latency)}{hint})")
            metrics = metrics_url(settings)
            if metrics:
                say(f"  the metrics:      {metrics} (the worker's, for Prometheus)")
            if settings.web_token or settings.web_tokens or settings.web_tokens_file:
                what = "starting" if settings.web_public_read else "reading, starting"
                say(
                    f"  {what} and stopping on the page need an access token (COUNCIL_WEB_TOKEN, "
                    "COUNCIL_WEB_TOKENS; sign in at /login)"
                )
            return watch(started, say)
    except Stopped:
        return 0
    except RuntimeError as error:
        say(f"could not start: {error}")
        return 1
    finally:
        councils.remove_local_council(default_council)


if __name__ == "__main__":
    sys.exit(main())
