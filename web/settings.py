"""The web server's settings, read once at start (web.__main__) and shared by its parts."""

from __future__ import annotations

from dataclasses import dataclass, field

from council.config import Config
from web.guard import LOOPBACK_HOSTS


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
