"""One piece of the local stack in the foreground, where `make up` would put it:

    python -m harness.serve server        `make server`: the Temporal dev server at
                                          TEMPORAL_ADDRESS (state in DATA/temporal.db),
                                          its Web UI 1000 above, and the codec server that
                                          UI reads stored texts through (COUNCIL_CODEC_PORT)
    python -m harness.serve codec-server  `make codec-server`: the codec server alone on
                                          COUNCIL_CODEC_PORT, for the UI of TEMPORAL_ADDRESS
    python -m harness.serve simulator     `make simulator`: the simulator on COUNCIL_SIM_PORT

DATA is COUNCIL_DATA, else the checkout's data/ (the payload store DATA/store unless
COUNCIL_STORE says otherwise), as for `make up`. A variable that cannot be used, or a port
that is taken, stops it with one line before anything starts (status 2); Ctrl-C stops
what it started.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

from app.settings.environment import Settings, SettingsError
from harness.foreground import Stopped, shown, stop_all, stop_on_signals, watch
from harness.local import LocalServer, start_server
from harness.processes import DATA, Process, port_open

SIM_PORT_VARIABLE = Settings.variables()["sim_port"]
_speaker = ["serve"]


def say(message: str) -> None:
    print(f"{_speaker[0]}: {message}", file=sys.stderr, flush=True)


def data_dir() -> Path:
    return Settings.read(os.environ).data_dir or DATA


def serve_server() -> int:
    """The dev server and its codec server until Ctrl-C."""
    server = LocalServer.of(data_dir())
    if server.answers():
        say(
            f"TEMPORAL_ADDRESS: a Temporal server already answers at {server.address}; stop "
            f"it or pick another port (TEMPORAL_ADDRESS={server.host}:{server.port + 1})"
        )
        return 2
    if taken := server.codec_port_taken():
        say(taken)
        return 2
    stop_on_signals()
    started: list[Process] = []
    try:
        start_server(server, say, started)
        say("the server is up; Ctrl-C stops it")
        say(f"  the Temporal server: {server.address}")
        say(f"  the Temporal UI:     {server.ui}")
        say(f"  the codec server:    {server.codec_url} (the UI reads stored texts through it)")
        say(f"  logs in {shown(server.data / 'logs')}")
        return watch(started, say)
    except Stopped:
        return 0
    except RuntimeError as error:
        say(f"could not start: {error}")
        return 1
    finally:
        stop_all(started, say)


def serve_codec_server() -> int:
    """`python -m app.codec.server` in this process's place, for the UI of TEMPORAL_ADDRESS."""
    configured = Settings.read(os.environ)
    server = LocalServer.of(data_dir())
    if taken := server.codec_port_taken():
        say(taken)
        return 2
    say(f"give the Temporal UI of {server.address} the codec endpoint {server.codec_url}")
    command = ["-m", "app.codec.server", "--host", "127.0.0.1", "--port", str(server.codec_port)]
    os.execve(
        sys.executable,
        [sys.executable, *command],
        {**os.environ, **server.codec_env(configured)},
    )


def serve_simulator() -> int:
    """`python -m simulator` in this process's place, on COUNCIL_SIM_PORT."""
    port = Settings.read(os.environ).sim_port
    if port_open("127.0.0.1", port):
        say(
            f"{SIM_PORT_VARIABLE}: port {port} on 127.0.0.1 is already in use; stop what "
            f"listens there or pick another port ({SIM_PORT_VARIABLE}={port + 1})"
        )
        return 2
    command = ["-m", "simulator", "--host", "127.0.0.1", "--port", str(port)]
    os.execv(sys.executable, [sys.executable, *command])


PIECES: dict[str, Callable[[], int]] = {
    "server": serve_server,
    "codec-server": serve_codec_server,
    "simulator": serve_simulator,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.serve", description=__doc__.splitlines()[0]
    )
    parser.add_argument("piece", choices=sorted(PIECES))
    args = parser.parse_args(argv)
    _speaker[0] = args.piece
    try:
        return PIECES[args.piece]()
    except SettingsError as error:
        say(str(error))
        return 2


if __name__ == "__main__":
    sys.exit(main())
