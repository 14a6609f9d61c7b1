"""The web server's view of the process's settings (app.settings), made once at start
(web.__main__) and shared by its parts: what the page, /v1 and the doctor page read, with
what only the running server knows (the host names it answers to, council.toml, the
Temporal address)."""

from __future__ import annotations

from dataclasses import dataclass

from app.access.principals import Principals
from app.settings.environment import Settings
from council.config import Config
from runs.quota import Quota
from web import guard


@dataclass(frozen=True)
class WebSettings:
    # The COUNCIL_* settings the server started with.
    variables: Settings
    # council.toml: the councils a user can pick.
    config: Config
    temporal_address: str
    # The Host names the server answers to (web.guard.allowed_hosts).
    allowed_hosts: tuple[str, ...] = guard.LOOPBACK_HOSTS

    @classmethod
    def of(
        cls, settings: Settings, host: str, config: Config, temporal_address: str
    ) -> WebSettings:
        """The view of a server on `host`; guard.ConfigError when a host name in
        COUNCIL_WEB_ALLOWED_HOSTS cannot be used."""
        hosts = guard.allowed_hosts(host, settings.web_allowed_hosts)
        return cls(settings, config, temporal_address, hosts)

    @property
    def task_queue(self) -> str:
        return self.variables.task_queue

    @property
    def principals(self) -> Principals:
        """COUNCIL_WEB_TOKEN's principal and the named tokens (app.access.principals): starting and
        stopping (and reading, unless public_read) need one of their tokens."""
        return guard.principals_of(self.variables)

    @property
    def public_read(self) -> bool:
        """COUNCIL_WEB_PUBLIC_READ (web.guard): reading needs no token."""
        return self.variables.web_public_read

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
