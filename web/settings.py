"""The web server's settings, made once at start (web.__main__) from the process's
settings (app.settings) and shared by its parts."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.settings import Settings as Variables
from council.config import Config
from web.guard import LOOPBACK_HOSTS
from workflows.quota import Quota


@dataclass(frozen=True)
class Settings:
    task_queue: str
    token: str | None = None
    # COUNCIL_WEB_PUBLIC_READ (web.guard): reading needs no token.
    public_read: bool = False
    temporal_address: str = "localhost:7233"
    # The Host names the server answers to (web.guard.allowed_hosts).
    allowed_hosts: tuple[str, ...] = LOOPBACK_HOSTS
    # council.toml: the councils a user can pick.
    config: Config = field(default_factory=Config)
    # The COUNCIL_* settings the server started with (the default council, the UI's address).
    variables: Variables = field(default_factory=Variables.read)

    @property
    def simulated(self) -> bool:
        """The models are the simulator's: the page says so."""
        return self.variables.simulated

    @property
    def quota(self) -> Quota:
        """What each caller may start (COUNCIL_QUOTA_*)."""
        return Quota.of(self.variables)

    @property
    def ui_url(self) -> str | None:
        return self.variables.ui_url
