"""The web server's settings, read once at start (web.__main__) and shared by its parts."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from council.config import Config
from web.guard import LOOPBACK_HOSTS

# Set (to 1) by whatever starts the worker against the bundled simulator: the page then
# labels every answer as simulated.
SIMULATED_VARIABLE = "COUNCIL_SIMULATED"


def simulated(env: Mapping[str, str] | None = None) -> bool:
    """Whether the models behind this server are the simulator (COUNCIL_SIMULATED=1)."""
    env = os.environ if env is None else env
    return (env.get(SIMULATED_VARIABLE) or "").strip().lower() in ("1", "true", "yes")


@dataclass(frozen=True)
class Settings:
    task_queue: str
    token: str | None = None
    poll_seconds: float = 0.5
    temporal_address: str = "localhost:7233"
    # The Host names the server answers to (web.guard.allowed_hosts).
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    # council.toml: the councils a user can pick.
    config: Config = field(default_factory=Config)
    # The models are the simulator's: the page says so.
    simulated: bool = field(default_factory=simulated)
