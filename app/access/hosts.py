"""The Host names a server of ours answers to: one rule for the web page, the MCP
transport (web.guard) and the codec server (app.codec.server).

A server answers only to this machine's loopback names, the host it was started on
(unless that is every address) and the names its setting lists (`*.example.com` for a
domain's subdomains). A request for any other Host, such as a page on a name that
resolves here (DNS rebinding), gets a 400, never an answer.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
ANY_ADDRESS = ("0.0.0.0", "::", "")


class ConfigError(ValueError):
    """A setting that cannot be used (one line naming the variable)."""


def host_name(host: str) -> str:
    """A host as a Host header carries it: IPv6 addresses in brackets, lower case."""
    try:
        if ipaddress.ip_address(host.strip("[]")).version == 6:
            return f"[{host.strip('[]')}]".lower()
    except ValueError:
        pass
    return host.lower()


def setting_items(value: str | Iterable[str] | None) -> list[str]:
    """A comma-separated setting's items (app.settings gives them split already)."""
    return (value or "").split(",") if isinstance(value, str | None) else list(value)


def allowed_hosts(
    bind_host: str,
    extra: str | Iterable[str] | None = None,
    variable: str = "COUNCIL_WEB_ALLOWED_HOSTS",
) -> tuple[str, ...]:
    """The names a server answers to: loopback, the host it binds to (unless that is
    every address), and those of `extra`, the setting `variable` (a bare `*` is refused:
    it would answer to any name)."""
    hosts = list(LOOPBACK_HOSTS)
    if bind_host not in ANY_ADDRESS:
        hosts.append(host_name(bind_host))
    for item in setting_items(extra):
        name = item.strip()
        if not name:
            continue
        if name == "*" or "*" in name[1:] or (name.startswith("*") and not name.startswith("*.")):
            raise ConfigError(
                f"{variable}: {name!r} is not a host name or a '*.domain' "
                "pattern (a bare '*' would answer to any name)"
            )
        hosts.append(host_name(name))
    return tuple(dict.fromkeys(hosts))


def loopback(host: str) -> bool:
    """A host name or address that only this machine reaches."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_allowed(host: str, allowed: Iterable[str]) -> bool:
    host = host.lower()
    return any(
        host == pattern or (pattern.startswith("*.") and host.endswith(pattern[1:]))
        for pattern in allowed
    )
