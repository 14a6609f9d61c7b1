"""What a run on this machine needs, started and stopped around it: `make demo`,
`make eval` and `make up` use local_council, `make server` and `make codec-server`
(harness.serve) the same rules for where the dev server, its Web UI and the codec server
listen."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from app.settings import config as app_config
from app.settings import environment as settings
from app.settings.environment import Settings, SettingsError
from app.temporal.connection import DEFAULT_ADDRESS
from harness.foreground import shown, stop_all
from harness.processes import (
    DATA,
    ROOT,
    Process,
    port_open,
    split_address,
    start_codec_server,
    start_simulator,
    start_temporal,
    start_worker,
    url_host,
)
from runs.starting import dev_ui_port, temporal_ui
from simulator.personas import DEFAULT_MODELS

# The simulator's council with tools, for `make demo` and `make up` (local_council).
OFFLINE_CONFIG = ROOT / "examples" / "offline.toml"

# Set (to 1) for the processes of a council whose members are the simulator's, so that
# what they show can say the answers are simulated.
SIMULATED = "COUNCIL_SIMULATED"
CODEC_PORT_VARIABLE = Settings.variables()["codec_port"]


def ui_address(env: Mapping[str, str]) -> str:
    """The Web UI of the Temporal server a local council uses (env from local_council)."""
    return temporal_ui(env["TEMPORAL_ADDRESS"], settings.current().ui_url)


@dataclass(frozen=True)
class LocalServer:
    """The Temporal dev server of this machine: its gRPC address (TEMPORAL_ADDRESS), its
    Web UI (1000 above), the codec server that UI reads stored texts through
    (COUNCIL_CODEC_PORT) and its state (DATA/temporal.db, beside the payload store
    DATA/store that the worker and the codec server share)."""

    address: str
    data: Path
    codec_port: int

    @classmethod
    def of(cls, data: Path, env: Mapping[str, str] | None = None) -> LocalServer:
        """The server of these variables (the process's by default); SettingsError with
        one line when one cannot be used."""
        env = os.environ if env is None else env
        chosen = Settings.read(env)
        address = env.get("TEMPORAL_ADDRESS") or DEFAULT_ADDRESS
        try:
            port = split_address(address)[1]
        except ValueError:
            port = 0
        if not 0 < port < 65536:
            raise SettingsError(
                f"TEMPORAL_ADDRESS must be HOST:PORT, such as localhost:7233 (got {address!r})"
            )
        return cls(address, data, chosen.codec_port)

    @property
    def host(self) -> str:
        return split_address(self.address)[0]

    @property
    def port(self) -> int:
        return split_address(self.address)[1]

    @property
    def ui_port(self) -> int:
        return dev_ui_port(self.port)

    @property
    def ui(self) -> str:
        return temporal_ui(self.address)

    @property
    def codec_url(self) -> str:
        return f"http://127.0.0.1:{self.codec_port}"

    def answers(self) -> bool:
        return port_open(self.host, self.port)

    def ui_origins(self) -> list[str]:
        """Where a browser may open the dev server's UI (it listens on loopback)."""
        hosts = dict.fromkeys(["localhost", "127.0.0.1", self.host])
        return [f"http://{url_host(host)}:{self.ui_port}" for host in hosts]

    def codec_env(self, configured: Settings) -> dict[str, str]:
        """The codec server's environment: the worker's payload store, and its allowed
        origins (COUNCIL_CODEC_CORS_ORIGINS, else the defaults) with this UI's added."""
        origins = dict.fromkeys([*configured.codec_cors_origins, *self.ui_origins()])
        return {"COUNCIL_DATA": str(self.data), "COUNCIL_CODEC_CORS_ORIGINS": ",".join(origins)}

    def codec_port_taken(self) -> str | None:
        """One line naming COUNCIL_CODEC_PORT when something listens there already."""
        if not port_open("127.0.0.1", self.codec_port):
            return None
        return (
            f"{CODEC_PORT_VARIABLE}: port {self.codec_port} on 127.0.0.1 is already in use "
            f"(a codec server of another shell?); stop what listens there or pick another "
            f"port ({CODEC_PORT_VARIABLE}={self.codec_port + 1})"
        )


def start_server(server: LocalServer, say: Callable[[str], None], started: list[Process]) -> None:
    """The codec server, then the dev server with its UI pointed at it (each appended to
    `started` as it starts); RuntimeError with one line when one cannot start."""
    taken = server.codec_port_taken()
    if taken:
        raise RuntimeError(taken)
    logs = server.data / "logs"
    codec_log = logs / "codec-server.log"
    say(f"starting the codec server at {server.codec_url} (log in {shown(codec_log)})")
    codec_env = server.codec_env(Settings.read(os.environ))
    started.append(start_codec_server(codec_env, server.codec_port, log_path=codec_log))
    db = server.data / "temporal.db"
    say(
        f"starting the Temporal dev server at {server.address} (state in {shown(db)}, UI on "
        f"{server.ui})"
    )
    started.append(
        start_temporal(
            db,
            port=server.port,
            ui_port=server.ui_port,
            log_path=logs / "temporal.log",
            codec_endpoint=server.codec_url,
        )
    )


def ui_codec_endpoint(ui: str) -> str | None:
    """The codec endpoint the Temporal UI at `ui` was given ("" for none), as its
    /api/v1/settings says; None when no such UI answers there."""
    try:
        response = httpx.get(f"{ui}/api/v1/settings", timeout=3)
        found = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(found, dict) or not isinstance(found.get("Codec"), dict):
        return None
    return str(found["Codec"].get("Endpoint") or "")


def codec_advice(server: LocalServer, ui: str) -> str | None:
    """For a server found running: one line on how its UI can show stored texts, when it
    cannot (None when it has a codec endpoint, or no UI answers)."""
    if ui_codec_endpoint(ui) != "":
        return None
    return (
        f"the Temporal UI at {ui} shows stored texts as references (it has no codec "
        f"endpoint): run `make codec-server` and enter {server.codec_url} in the UI's "
        "Codec Server settings, or restart the server with `make server`"
    )


def simulates(given: Settings) -> bool:
    """Whether a local council's members are the simulator's: no API key and no base URL
    of a provider set."""
    return given.llm.key is None and "base_url" not in given.llm.model_fields_set


@contextmanager
def local_council(
    say: Callable[[str], None],
    simulated_note: str,
    simulator_env: Mapping[str, str] | None = None,
    data: Path = DATA,
    started: list[Process] | None = None,
    tools: bool = False,
    sim_port: int | None = None,
) -> Iterator[dict[str, str]]:
    """Whatever a run on this machine still needs, started here and stopped afterwards.

    The embedded dev server unless one answers at TEMPORAL_ADDRESS (state in
    `data`/temporal.db), with the codec server its UI reads stored texts through
    (COUNCIL_CODEC_PORT), the simulator when no API key or base URL is set (saying so with
    `simulated_note`), and a worker. Yields the environment for `starter.py` (COUNCIL_DATA:
    `data`, so that the payload store is `data`/store unless COUNCIL_STORE says otherwise;
    with the simulator: its members as COUNCIL_MODELS and COUNCIL_CHAIRMAN unless those
    are set, and COUNCIL_SIMULATED=1). `started`, when given, receives each process as it starts.
    With `tools` and the simulator, and no council.toml of the user's: examples/offline.toml
    (COUNCIL_CONFIG), whose default council calculates and fetches. The simulator listens on
    `sim_port` (None: a free port); the worker gets this process's variables, its metrics
    (COUNCIL_METRICS_PORT, COUNCIL_METRICS_HOST) among them.
    """
    server = LocalServer.of(data)
    logs = data / "logs"
    started = [] if started is None else started
    mine = len(started)
    env: dict[str, str] = {"TEMPORAL_ADDRESS": server.address, "COUNCIL_DATA": str(data)}
    try:
        if server.answers():
            say(f"using the Temporal server already answering at {server.address}")
            advice = codec_advice(server, temporal_ui(server.address, settings.current().ui_url))
            if advice:
                say(advice)
        else:
            start_server(server, say, started)
        given = Settings.read()  # this process's, as the shell sets them now
        if simulates(given):
            simulator = start_simulator(
                port=sim_port, log_path=logs / "simulator.log", env=simulator_env
            )
            started.append(simulator)
            models = given.default_models or list(DEFAULT_MODELS)
            env["COUNCIL_LLM_BASE_URL"] = simulator.extra["url"]
            env["COUNCIL_MODELS"] = ",".join(models)
            env["COUNCIL_CHAIRMAN"] = given.default_chairman or models[0]
            env[SIMULATED] = "1"
            say(f"no API key set (COUNCIL_LLM_API_KEY or OPENROUTER_API_KEY): {simulated_note}")
            if tools and app_config.config_path(given) is None:
                env[app_config.CONFIG_VARIABLE] = str(OFFLINE_CONFIG)
                say(
                    f"no council.toml: the members may use the tools of {shown(OFFLINE_CONFIG)} "
                    "(a calculator, and fetch)"
                )
        say(f"starting a worker (log in {shown(logs / 'worker.log')})")
        # This checkout's build serves new runs on the local server, whatever ran before.
        started.append(start_worker(env, log_path=logs / "worker.log", make_current=True))
        yield env
    finally:
        stop_all(started[mine:], say)
