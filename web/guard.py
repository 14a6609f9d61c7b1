"""Who the web server answers, one set of rules for every route (the pages, the live
stream, the OpenAI-compatible API, the MCP transport):

- Host allowlist, reads included: only requests addressed to this machine's loopback
  names, the host the server was started on, and COUNCIL_WEB_ALLOWED_HOSTS (app.access.hosts,
  the codec server's rule too). A page on another name that resolves here (DNS
  rebinding) gets a 400, never a page.
- Writes (start, stop, steer, sign in) from a browser must come from an allowlisted
  origin: the Origin (or, without one, the Referer) must name an allowed host, and the
  same host and port the request was sent to.
- The access tokens (app.access.principals: COUNCIL_WEB_TOKEN, the team's one, and the named
  tokens of COUNCIL_WEB_TOKENS), when any is set, for reads as for writes: a page, the
  list, a run, its record, its live stream and its files answer only with a token (a
  browser is sent to /login, and back once signed in), unless COUNCIL_WEB_PUBLIC_READ
  opens reading on purpose; /login and the static files are open; /v1 and the MCP
  transport need a bearer token for everything, /doctor a token whatever the reading
  rule. A token is `Authorization: Bearer`, compared in constant time with every one the
  server has, or the session cookie that /login gives for it. The cookie never holds the
  token: it is the time it was issued, a random value and the principal's name, signed
  with a key derived from that principal's token (so a new token signs its holders out),
  valid for SESSION_SECONDS.
- Who asks is the principal, never the session: every sign-in and request with one token
  is one tenant (its name), with one quota and one share of the calls.
- Tries are limited per client address (an IPv6 address by its /64): MAX_FAILED_LOGINS
  wrong tokens within LOGIN_WINDOW_SECONDS, at the sign-in or as a bearer on any route,
  and MAX_SIGN_INS sign-ins of any outcome; past either, every try is a 429 (its token
  not even compared) until the window clears.
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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

# The Host rule is app.access.hosts' (shared with the codec server); named here as before.
from app.access.hosts import LOOPBACK_HOSTS as LOOPBACK_HOSTS
from app.access.hosts import ConfigError as ConfigError
from app.access.hosts import allowed_hosts as allowed_hosts
from app.access.hosts import host_allowed
from app.access.hosts import host_name as _host_name
from app.access.hosts import loopback as loopback
from app.access.hosts import setting_items as _items
from app.access.principals import Principal, Principals
from app.settings.environment import Settings
from council import numbers
from runs.priority import tenant_of

SESSION_COOKIE = "council_session"
# How long a sign-in lasts.
SESSION_SECONDS = 7 * 24 * 3600
# Wrong tokens from one client address (at the sign-in or as a bearer), and sign-ins of any
# outcome: this many within the window, then 429 for every try until the window clears.
MAX_FAILED_LOGINS = 5
MAX_SIGN_INS = 10
LOGIN_WINDOW_SECONDS = 300.0
# The clients whose attempts are remembered before those of passed windows are forgotten.
MAX_CLIENTS_KEPT = 10_000
# Where a request keeps who it proved to be (Guard.principal), once found.
_FOUND = "council.principal"
# Read without the token whatever the setting: the sign-in and what its page needs. /v1
# and /doctor check the token themselves (each in its own words); /mcp only says where the
# MCP server is.
OPEN_PATHS = ("/login", "/doctor", "/mcp")
OPEN_PREFIXES = ("/static/", "/v1/")
READ_METHODS = ("GET", "HEAD")


class Forbidden(Exception):
    """A request the rules refuse (the message says why, in one line)."""


def principals_of(settings: Settings) -> Principals:
    """Who may use the page, /v1 and MCP over HTTP: COUNCIL_WEB_TOKEN's principal and the
    named tokens of COUNCIL_WEB_TOKENS and COUNCIL_WEB_TOKENS_FILE (none: no token is
    needed)."""
    return Principals.of(
        settings.secret("web_token"), (*settings.web_tokens, *settings.web_tokens_file)
    )


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
    """The rules, with the server's allowlist and principals (app.access.principals: the tokens it
    takes and the names they go by; none: no token is needed)."""

    allowed: Sequence[str]
    principals: Principals = field(default_factory=Principals)
    # COUNCIL_WEB_PUBLIC_READ: anyone who reaches the server may read without the token.
    public_read: bool = False
    # What the tries' windows are measured by.
    clock: Callable[[], float] = time.monotonic
    _failures: dict[str, deque[float]] = field(default_factory=dict)
    _sign_ins: dict[str, deque[float]] = field(default_factory=dict)

    @property
    def token_required(self) -> bool:
        return bool(self.principals)

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

    # ---- who is asking ------------------------------------------------------------------

    def principal(self, request: Request, *, session: bool = True) -> Principal | None:
        """Who the request proves to be: its sign-in session when it sends one (and
        `session` lets it count: the API and the MCP transport take a bearer only), else its
        `Authorization: Bearer` token; None for neither."""
        if not self.principals:
            return None
        cookie = request.cookies.get(SESSION_COOKIE) if session else None
        if cookie:
            return self.session_principal(cookie)
        return self.bearer(request)

    def bearer(self, request: Request) -> Principal | None:
        """The principal whose token the request's `Authorization: Bearer` is (None: none
        sent, or none of this server's). A bearer that is no token of this server counts as
        a failed sign-in of its client, and a client past the limit is refused
        (TooManyFailures) before its bearer is compared. Found once per request."""
        found: tuple[Principal | None] | None = request.scope.get(_FOUND)
        if found is not None:
            return found[0]
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        principal = None
        if scheme.lower() == "bearer" and given.strip() and self.principals:
            client = client_key(request)
            wait = self.sign_in_wait(client)
            if wait:
                raise TooManyFailures(wait)
            principal = self.principals.matching(given.strip())
            if principal is None:
                self.sign_in_failed(client)
        request.scope[_FOUND] = (principal,)
        return principal

    def token_given(self, request: Request, *, session: bool = True) -> bool:
        """The request proves one of the server's tokens (always true without any). The
        page's rule: a session from the sign-in, or a token as a bearer; with `session`
        False, the rule of the API and the MCP transport, which have no sign-in: the bearer
        only. TooManyFailures for a client past the limit."""
        return not self.principals or self.principal(request, session=session) is not None

    def tenant(self, request: Request, *, session: bool = True) -> str:
        """Who is asking, as a fairness key (runs.priority), from what it proved (as
        `principal` reads it): the principal's name, one for every sign-in, session and
        request of its token; else, on a server that takes no token, the client's address
        as a digest (a name the request gives itself is not who it is)."""
        principal = self.principal(request, session=session)
        if principal is not None:
            return principal.tenant
        return tenant_of("address", request.client.host if request.client else "?")

    # ---- sessions ---------------------------------------------------------------------

    def _signature(self, body: str, principal: Principal) -> str:
        key = hashlib.sha256(b"council web session\0" + principal.token.encode()).digest()
        return hmac.new(key, body.encode(), hashlib.sha256).hexdigest()

    def new_session(self, principal: Principal) -> str:
        """A sign-in cookie's value: when it was issued, a random part, whose it is (the
        principal's name), and their signature with a key derived from its token."""
        body = f"{int(time.time())}.{secrets.token_urlsafe(24)}.{principal.name}"
        return f"{body}.{self._signature(body, principal)}"

    def session_principal(self, value: str) -> Principal | None:
        """The principal of a cookie that its token signed, issued less than SESSION_SECONDS
        ago (None: no such session)."""
        body, _, signature = value.rpartition(".")
        issued_text, _, rest = body.partition(".")
        principal = self.principals.named(rest.partition(".")[2])
        issued = numbers.whole(issued_text, signed=False)
        if (
            principal is None
            or issued is None
            or not hmac.compare_digest(
                signature.encode(), self._signature(body, principal).encode()
            )
        ):
            return None
        return principal if -60 <= time.time() - issued <= SESSION_SECONDS else None

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
        """Start, stop or steer: same origin, and a token when the server takes any."""
        self.check_origin(request)
        if not self.token_given(request):
            raise Forbidden("this server needs its access token to start or stop: /login")

    # ---- sign-in attempts ---------------------------------------------------------

    def _recent(self, kept: dict[str, deque[float]], client: str) -> deque[float]:
        now = self.clock()
        if len(kept) >= MAX_CLIENTS_KEPT and client not in kept:
            # Forget the clients whose window has passed (bounded memory, whatever many
            # addresses try).
            for other in [
                c for c, w in kept.items() if not w or now - w[-1] > LOGIN_WINDOW_SECONDS
            ]:
                del kept[other]
        window = kept.setdefault(client, deque())
        while window and now - window[0] > LOGIN_WINDOW_SECONDS:
            window.popleft()
        return window

    def sign_in_wait(self, client: str, *, signing_in: bool = False) -> float:
        """Seconds until this client may try a token again (0: now): after MAX_FAILED_LOGINS
        wrong tokens (a sign-in or a bearer) within LOGIN_WINDOW_SECONDS, and, for the
        sign-in form, after MAX_SIGN_INS sign-ins of any outcome."""
        windows = [(self._recent(self._failures, client), MAX_FAILED_LOGINS)]
        if signing_in:
            windows.append((self._recent(self._sign_ins, client), MAX_SIGN_INS))
        now = self.clock()
        waits = [
            max(1.0, LOGIN_WINDOW_SECONDS - (now - window[-limit]))
            for window, limit in windows
            if len(window) >= limit
        ]
        return max(waits, default=0.0)

    def sign_in_tried(self, client: str) -> None:
        self._recent(self._sign_ins, client).append(self.clock())

    def sign_in_failed(self, client: str) -> None:
        self._recent(self._failures, client).append(self.clock())


class TooManyFailures(Forbidden):
    """A client past the limit of wrong tokens: refused (429) for `wait` seconds, its token
    not even compared."""

    def __init__(self, wait: float) -> None:
        self.wait = wait
        super().__init__(f"too many failed sign-ins from this address: try again in {wait:.0f} s")


def too_many(refused: TooManyFailures) -> PlainTextResponse:
    """The refusal of a client past the limit: 429, and when to try again."""
    return PlainTextResponse(
        str(refused), status_code=429, headers={"Retry-After": f"{refused.wait:.0f}"}
    )


def client_key(request: Request) -> str:
    """Whose attempts these are, for the sign-in limits: the client's address (as the
    connection or a trusted proxy gives it), an IPv6 address by its /64 network, which one
    client commonly holds whole."""
    host = request.client.host if request.client else "?"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if address.version == 6 and address.ipv4_mapped is None:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address.ipv4_mapped or address) if address.version == 6 else str(address)


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
        try:
            allowed = self.guard.read_allowed(request)
        except TooManyFailures as over:
            await too_many(over)(scope, receive, send)
            return
        if allowed:
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
