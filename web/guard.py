"""Who the web server answers, one set of rules for every route (the pages, the live
stream, the OpenAI-compatible API, the MCP transport):

- Host allowlist, reads included: only requests addressed to this machine's loopback
  names, the host the server was started on, and COUNCIL_WEB_ALLOWED_HOSTS (app.hosts,
  the codec server's rule too). A page on another name that resolves here (DNS
  rebinding) gets a 400, never a page.
- Writes (start, stop, steer, sign in) from a browser must come from an allowlisted
  origin: the Origin (or, without one, the Referer) must name an allowed host, and the
  same host and port the request was sent to.
- The access token (COUNCIL_WEB_TOKEN), when set, for reads as for writes: a page, the
  list, a run, its record, its live stream and its files answer only with the token
  (a browser is sent to /login, and back once signed in), unless COUNCIL_WEB_PUBLIC_READ
  opens reading on purpose; /login and the static files are open; /v1 and the MCP
  transport need the bearer token for everything, /doctor the token whatever the reading
  rule. The token is `Authorization: Bearer`, compared in constant time, or the session
  cookie that /login gives for it. The cookie never holds the token: it is a random
  value and the time it was issued, signed with a key derived from the token (so a new
  token signs everyone out), valid for SESSION_SECONDS. Failed sign-ins are limited per
  client address.
- The client address is the connection's, unless it comes from a proxy the operator
  named (COUNCIL_WEB_TRUSTED_PROXIES): only then do X-Forwarded-For and
  X-Forwarded-Proto count (uvicorn's proxy headers middleware applies them).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

# The Host rule is app.hosts' (shared with the codec server); named here as before.
from app.hosts import LOOPBACK_HOSTS as LOOPBACK_HOSTS
from app.hosts import ConfigError as ConfigError
from app.hosts import allowed_hosts as allowed_hosts
from app.hosts import host_allowed
from app.hosts import host_name as _host_name
from app.hosts import loopback as loopback
from app.hosts import setting_items as _items
from council import numbers
from workflows.priority import tenant_of

SESSION_COOKIE = "council_session"
# How long a sign-in lasts.
SESSION_SECONDS = 7 * 24 * 3600
# Failed sign-ins from one client address: this many within the window, then 429.
MAX_FAILED_LOGINS = 5
LOGIN_WINDOW_SECONDS = 300.0
# Read without the token whatever the setting: the sign-in and what its page needs. /v1
# and /doctor check the token themselves (each in its own words).
OPEN_PATHS = ("/login", "/doctor")
OPEN_PREFIXES = ("/static/", "/v1/")
READ_METHODS = ("GET", "HEAD")


class Forbidden(Exception):
    """A request the rules refuse (the message says why, in one line)."""


def trusted_proxies(value: str | Iterable[str] | None) -> tuple[str, ...]:
    """COUNCIL_WEB_TRUSTED_PROXIES: addresses or networks (CIDR) of the reverse proxies
    whose X-Forwarded-For and X-Forwarded-Proto count. None by default; a bare `*` is
    refused: it would let any client name its own address."""
    proxies = []
    for item in _items(value):
        name = item.strip()
        if not name:
            continue
        try:
            network = ipaddress.ip_network(name, strict=False)
        except ValueError:
            raise ConfigError(
                f"COUNCIL_WEB_TRUSTED_PROXIES: {name[:60]!r} is not an IP address or a network "
                "such as 10.0.0.0/8 (a bare '*' would trust any client's headers)"
            ) from None
        proxies.append(str(network.network_address) if network.num_addresses == 1 else str(network))
    return tuple(dict.fromkeys(proxies))


@dataclass
class Guard:
    """The rules, with the server's allowlist and token."""

    allowed: Sequence[str]
    token: str | None = None
    # COUNCIL_WEB_PUBLIC_READ: anyone who reaches the server may read without the token.
    public_read: bool = False
    _failures: dict[str, deque[float]] = field(default_factory=dict)

    def _origin_ok(self, request: Request, source: str) -> bool:
        try:
            parts = urlsplit(source)
            host = parts.hostname
        except ValueError:
            return False
        return (
            parts.scheme in ("http", "https")
            and host is not None
            and host_allowed(_host_name(host), self.allowed)
            and parts.netloc.lower() == request.headers.get("host", "").lower()
        )

    def check_origin(self, request: Request) -> None:
        """A browser's write must come from an allowlisted origin of this server; a client
        that sends neither Origin nor Referer (a script, curl) is not a browser page."""
        origin = request.headers.get("origin")
        referer = request.headers.get("referer")
        if origin is not None:
            if not self._origin_ok(request, origin):
                raise Forbidden(f"refused: a request from another origin ({origin[:100]})")
        elif referer is not None and not self._origin_ok(request, referer):
            raise Forbidden("refused: a request from another page's origin")

    def token_matches(self, given: str) -> bool:
        """Whether `given` is the server's token (compared in constant time)."""
        if not self.token:
            return False
        return hmac.compare_digest(given.encode(), self.token.encode())

    def bearer_given(self, request: Request) -> bool:
        """The request's `Authorization: Bearer` is the server's token (always true without
        one): the rule of the API and the MCP transport, which have no sign-in."""
        if not self.token:
            return True
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and self.token_matches(given.strip())

    def token_given(self, request: Request) -> bool:
        """The page's rule: a session from the sign-in, or the token as a bearer."""
        if not self.token:
            return True
        cookie = request.cookies.get(SESSION_COOKIE)
        return self.session_valid(cookie) if cookie else self.bearer_given(request)

    def tenant(self, request: Request) -> str:
        """Who is asking, as a fairness key (workflows.priority), from what it proved: its
        sign-in session, else the server's token as a bearer, else the client's address (a
        bearer that the server does not check proves nothing, and a name the request gives
        itself is not who it is); a digest of it, never the value."""
        cookie = request.cookies.get(SESSION_COOKIE)
        if cookie and self.session_valid(cookie):
            return tenant_of("session", cookie)
        if self.token and self.bearer_given(request):
            return tenant_of("bearer", self.token)
        return tenant_of("address", request.client.host if request.client else "?")

    # ---- sessions ---------------------------------------------------------------------

    def _signature(self, body: str) -> str:
        assert self.token
        key = hashlib.sha256(b"council web session\0" + self.token.encode()).digest()
        return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()

    def new_session(self) -> str:
        """A sign-in cookie's value: when it was issued, a random part, and their
        signature."""
        body = f"{int(time.time())}.{secrets.token_urlsafe(24)}"
        return f"{body}.{self._signature(body)}"

    def session_valid(self, value: str) -> bool:
        """A cookie this server's token signed, issued less than SESSION_SECONDS ago."""
        if not self.token:
            return False
        body, _, signature = value.rpartition(".")
        issued = numbers.whole(body.partition(".")[0], signed=False)
        if issued is None or not hmac.compare_digest(
            signature.encode(), self._signature(body).encode()
        ):
            return False
        return -60 <= time.time() - issued <= SESSION_SECONDS

    def read_allowed(self, request: Request) -> bool:
        """A read of this path needs nothing more, or the request has what it needs."""
        path = request.url.path
        return (
            self.public_read
            or path in OPEN_PATHS
            or path.startswith(OPEN_PREFIXES)
            or self.token_given(request)
        )

    def check_write(self, request: Request) -> None:
        """Start, stop or steer: same origin, and the token when the server has one."""
        self.check_origin(request)
        if not self.token_given(request):
            raise Forbidden("this server needs its access token to start or stop: /login")

    # ---- sign-in attempts ---------------------------------------------------------

    def _recent_failures(self, client: str) -> deque[float]:
        window = self._failures.setdefault(client, deque())
        now = time.monotonic()
        while window and now - window[0] > LOGIN_WINDOW_SECONDS:
            window.popleft()
        return window

    def login_wait(self, client: str) -> float:
        """Seconds until this client may try to sign in again (0: now)."""
        window = self._recent_failures(client)
        if len(window) < MAX_FAILED_LOGINS:
            return 0.0
        return max(1.0, LOGIN_WINDOW_SECONDS - (time.monotonic() - window[0]))

    def login_failed(self, client: str) -> None:
        self._recent_failures(client).append(time.monotonic())


def sign_in_target(value: str | None) -> str:
    """Where the sign-in leads back to: a path of this server, else the front page."""
    if (
        not value
        or not value.startswith("/")
        or value.startswith("//")
        or "\\" in value
        or not value.isprintable()
    ):
        return "/"
    return value


class ReadsNeedToken:
    """The reading rule in front of every route (Guard.read_allowed): a browser's page
    request without the token goes to the sign-in, and comes back after it; anything else
    (the live stream, a record, a file, /statuses) is a 403 that says how to sign in."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in READ_METHODS:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if self.guard.read_allowed(request):
            await self.app(scope, receive, send)
            return
        if "text/html" in request.headers.get("accept", ""):
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            refused: PlainTextResponse | RedirectResponse = RedirectResponse(
                f"/login?next={quote(target, safe='')}", status_code=303
            )
        else:
            refused = PlainTextResponse(
                "this server needs its access token to read: sign in at /login, or send "
                "Authorization: Bearer TOKEN",
                status_code=403,
            )
        await refused(scope, receive, send)
