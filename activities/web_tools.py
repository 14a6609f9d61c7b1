"""The built-in tools a council's members may call: `fetch` (a URL's readable text) and
`web_search` (a search backend's results), what each offers a model (`fetch_spec`,
`search_spec`) and how the worker runs them. A call that gives nothing raises
ToolFailure, one line that the model is shown and the record keeps.

    text = await fetch({"url": "https://example.org/"}, tools.fetch())
    text = await web_search({"query": "temporal durable"}, tools.search(), os.environ)

`fetch` goes where a model says, so it reaches only public addresses: every address a
host name resolves to is checked, at the moment of each connection (every redirect hop
included), and the connection goes to an address that was checked, so a name that
resolves differently the next time (DNS rebinding) cannot slip past. Loopback, private,
link-local, shared (CGNAT), multicast, reserved and unspecified addresses, and the
clouds' metadata addresses, in IPv4 or in IPv6 (an IPv4 address in IPv6 clothes too),
are refused unless `allow_addresses` under [tools.fetch] in council.toml lists them. It
reads at most `max_bytes` of a reply, only of a textual type, within `timeout` seconds in
all. HTML is turned into its readable text (activities.page_text: in one pass, time linear
in the page's size) in a process of its own, within PAGE_READING's CPU time and memory,
killed when the call ends.

`web_search` asks the backend the operator configured (a SearXNG-compatible JSON
endpoint, or Brave's Search API with its key read from the variable named): not guarded,
a local SearXNG is normal. The key never appears in what it returns, raises or logs.
"""

from __future__ import annotations

import asyncio
import html
import ipaddress
import json
import re
import socket
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import httpcore
import httpx

from activities.reading import chunks, tls
from activities.tool_failure import ToolFailure
from bounded import process
from council import limits
from council.redaction import Redactor, redact_logs
from council.tool_config import SEARCH_SETUP, FetchEntry, SearchEntry
from council.tools import FETCH, MAX_TOOL_TIMEOUT, WEB_SEARCH, ToolSpec

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# A host name and port -> the addresses it resolves to (the system's resolver unless a
# test gives its own).
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]

MESSAGE_CHARS = 500
# The content types read as text: HTML as its readable text, the others as they are
# (a type ending in +json or +xml counts as text too).
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset(
    {"text/plain", "text/markdown", "text/csv", "application/json", "application/xml", "text/xml"}
)
FETCH_HEADERS = {
    "User-Agent": "Mozilla/5.0 (compatible; Council-fetch/1.0)",
    "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
    # The cap counts the bytes as they come: no compressed reply that grows past it.
    "Accept-Encoding": "identity",
}
# What a search backend's reply may weigh, and what is kept of each result.
SEARCH_REPLY_BYTES = 4_000_000
QUERY_CHARS = 400
TITLE_CHARS = 200
URL_CHARS = 500
SNIPPET_CHARS = 400
# How much of a search backend's error reply its failure quotes.
QUOTED_CHARS = 200

# The clouds' instance metadata addresses (AWS, GCP and Azure; AWS over IPv6; Alibaba).
METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "fd00:ec2::254", "100.100.100.200")
)
SHARED = ipaddress.IPv4Network("100.64.0.0/10")  # carrier-grade NAT (RFC 6598)
NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # an IPv4 address behind a NAT64 gateway

_TAG = re.compile(r"<[^>]*>")
# What turning a page's HTML into text may take (activities.page_text, in a process of its
# own): the clock's share is what remains of the call's timeout.
PAGE_READING = process.Limits(
    cpu_seconds=limits.PAGE_READ_CPU_SECONDS,
    memory_bytes=limits.PAGE_READ_MEMORY_BYTES,
    seconds=float(MAX_TOOL_TIMEOUT),
)


# -- what the model is offered ----------------------------------------------------------


def fetch_spec(entry: FetchEntry) -> ToolSpec:
    return _spec(
        FETCH,
        entry,
        "Fetch a web page or text document (http or https URL) and return its readable "
        "text: HTML without markup, scripts or styles; plain text, Markdown, CSV, JSON "
        "and XML as they are. Other content (images, PDFs, binaries) is not read. "
        f"At most {entry.max_bytes:,} bytes are read; only public addresses are reached.",
        ("url", "The http:// or https:// URL to read."),
    )


def search_spec(entry: SearchEntry) -> ToolSpec:
    return _spec(
        WEB_SEARCH,
        entry,
        f"Search the web; returns up to {entry.results} results, each a title, its URL "
        "and a snippet. Read a result in full with the fetch tool where it is offered.",
        ("query", "What to search for."),
    )


def _spec(
    name: str, entry: FetchEntry | SearchEntry, description: str, argument: tuple[str, str]
) -> ToolSpec:
    """A built-in tool that reads and changes nothing, of one string argument (its name,
    what it means)."""
    argument_name, meaning = argument
    return ToolSpec(
        name=name,
        source=name,
        tool=name,
        description=description,
        parameters={
            "type": "object",
            "properties": {argument_name: {"type": "string", "description": meaning}},
            "required": [argument_name],
            "additionalProperties": False,
        },
        read_only=True,
        timeout_seconds=entry.timeout,
        max_attempts=entry.max_attempts,
    )


# -- which addresses fetch may reach ----------------------------------------------------


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for: IPv4-mapped, 6to4 or NAT64."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_kind(address: IPAddress) -> str | None:
    """What makes an address one fetch refuses ("a loopback address", "a private address",
    ...), or None for a public address."""
    if address in METADATA:
        return "a cloud metadata address"
    inner = _embedded_ipv4(address)
    if inner is not None:
        kind = address_kind(inner)
        return f"{kind} (as IPv6)" if kind else None
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address in SHARED:
        return "a shared (carrier-grade NAT) address"
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return "a site-local address"
    if address.is_private:
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "not a public address"
    return None


def allowed_networks(values: Iterable[str]) -> list[IPNetwork]:
    """allow_addresses as networks (a single address is a network of one)."""
    return [ipaddress.ip_network(value, strict=False) for value in values]


def is_allowed(address: IPAddress, networks: Sequence[IPNetwork]) -> bool:
    """Whether fetch may connect to this address: a public one, or one inside a network
    allow_addresses lists (an IPv4-mapped address counts as its IPv4 address)."""
    if address_kind(address) is None:
        return True
    candidates: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        candidates.append(address.ipv4_mapped)
    return any(a.version == n.version and a in n for a in candidates for n in networks)


def _refusal(host: str, address: IPAddress) -> ToolFailure:
    shown = host if host == str(address) else f"{host} ({address})"
    return ToolFailure(
        f"fetch: {shown} is {address_kind(address)}; refused (fetch reaches public addresses "
        "only, unless allow_addresses under [tools.fetch] in council.toml lists it)"
    )


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the system resolves a name to, in its order, each once. A name under
    .invalid resolves to nothing, at once (RFC 6761)."""
    if host.rstrip(".").lower().rsplit(".", 1)[-1] == "invalid":
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend that resolves each host itself, refuses the connection
    unless every address it resolves to may be reached, and connects to one of those
    checked addresses (TLS still checks the certificate against the URL's host name)."""

    def __init__(self, networks: Sequence[IPNetwork], resolver: Resolver) -> None:
        self._networks = list(networks)
        self._resolver = resolver
        self._inner = httpcore.AnyIOBackend()

    async def addresses(self, host: str, port: int) -> list[IPAddress]:
        """Where a connection to host:port may go; ToolFailure when nowhere."""
        try:
            found = [ipaddress.ip_address(host)]
        except ValueError:
            try:
                answers = await self._resolver(host, port)
            except (OSError, UnicodeError) as error:
                why = error.strerror if isinstance(error, OSError) and error.strerror else error
                raise ToolFailure(f"fetch: cannot resolve {host}: {why}") from None
            try:
                found = [ipaddress.ip_address(answer) for answer in answers]
            except ValueError:
                raise ToolFailure(f"fetch: {host} resolved to something not an address") from None
        if not found:
            raise ToolFailure(f"fetch: {host} resolves to no address")
        for address in found:
            if not is_allowed(address, self._networks):
                raise _refusal(host, address)
        return found

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        error: Exception | None = None
        for address in await self.addresses(host, port):
            try:
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as failed:
                error = failed
        assert error is not None
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise ToolFailure("fetch: only TCP connections are made")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


# httpcore's errors as httpx's (what httpx's own transport does), the most specific first:
# each httpcore class has its namesake in httpx.
_ERRORS: tuple[tuple[type[Exception], type[httpx.TransportError]], ...] = tuple(
    (getattr(httpcore, name), getattr(httpx, name))
    for name in (
        *("ConnectTimeout", "ReadTimeout", "WriteTimeout", "PoolTimeout", "TimeoutException"),
        *("ConnectError", "ReadError", "WriteError", "NetworkError"),
        *("RemoteProtocolError", "LocalProtocolError", "ProtocolError", "UnsupportedProtocol"),
    )
)


@contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except Exception as error:
        for theirs, ours in _ERRORS:
            if isinstance(error, theirs):
                raise ours(str(error)) from error
        raise


class _Body(httpx.AsyncByteStream):
    """A reply's body from httpcore, its errors as httpx's. An iterator object, not a
    generator: one left unfinished at a cap needs no closing by the collector."""

    def __init__(self, stream: AsyncIterable[bytes]) -> None:
        self._stream = stream
        self._iterator: AsyncIterator[bytes] | None = None

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    async def __anext__(self) -> bytes:
        if self._iterator is None:
            self._iterator = aiter(self._stream)
        with _as_httpx_errors():
            return await anext(self._iterator)

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)
        if close is not None:
            await close()


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport over httpcore's connection pool on a GuardedBackend (httpx's own
    transport takes no network backend). No proxy: a proxy would connect for us, unchecked."""

    def __init__(self, backend: httpcore.AsyncNetworkBackend) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=tls(), network_backend=backend, http1=True, http2=False
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            reply = await self._pool.handle_async_request(core)
        assert isinstance(reply.stream, AsyncIterable)
        return httpx.Response(
            status_code=reply.status,
            headers=reply.headers,
            stream=_Body(reply.stream),
            extensions=reply.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


# -- fetch ------------------------------------------------------------------------------


async def fetch(
    arguments: dict[str, Any],
    entry: FetchEntry,
    *,
    resolver: Resolver | None = None,
    page_limits: process.Limits | None = None,
) -> str:
    """A URL's readable text, under a header line that names the URL it came from (after
    redirects) and the page's title; ToolFailure in one line when there is none. An HTML
    page's text is read in a process of its own within `page_limits` (PAGE_READING, its
    clock the call's timeout), killed when the call ends."""
    url = _fetch_url(arguments.get("url"))
    backend = GuardedBackend(allowed_networks(entry.allow_addresses), resolver or system_resolver)
    call = _Call(entry, backend, page_limits or replace(PAGE_READING, seconds=entry.timeout))
    try:
        async with asyncio.timeout(entry.timeout):
            return await _fetch(url, call)
    except TimeoutError:
        if call.reading is not None:
            raise ToolFailure(
                f"fetch: the text of {call.reading} was not read within {entry.timeout:g} s",
                transient=True,
            ) from None
        raise ToolFailure(
            f"fetch: {url} gave no complete reply within {entry.timeout:g} s", transient=True
        ) from None


@dataclass
class _Call:
    """One fetch: its entry, its guard, what reading a page's text may take, and the page
    whose text is being read (None while there is none)."""

    entry: FetchEntry
    backend: GuardedBackend
    page_limits: process.Limits
    reading: httpx.URL | None = None


def _fetch_url(value: Any) -> httpx.URL:
    if not isinstance(value, str) or not value.strip():
        raise ToolFailure("fetch: give the URL to read as a non-empty string (url)")
    try:
        url = httpx.URL(value.strip())
    except httpx.InvalidURL as error:
        raise ToolFailure(f"fetch: {value!r} is not a URL ({error})") from None
    if url.scheme not in ("http", "https"):
        raise ToolFailure(f"fetch: only http and https URLs are read, not {value!r}")
    if not url.host:
        raise ToolFailure(f"fetch: {value!r} names no host")
    return url


async def _fetch(url: httpx.URL, call: _Call) -> str:
    entry = call.entry
    async with httpx.AsyncClient(
        transport=GuardedTransport(call.backend),
        follow_redirects=False,
        trust_env=False,
        timeout=entry.timeout,
        headers=FETCH_HEADERS,
    ) as client:
        request = client.build_request("GET", url)
        redirects = 0
        while True:
            try:
                response = await client.send(request, stream=True)
            except ToolFailure as refused:
                hops = "1 redirect" if redirects == 1 else f"{redirects} redirects"
                after = f" (after {hops} from {url})" if redirects else ""
                raise ToolFailure(f"{refused}{after}") from None
            except httpx.TimeoutException:
                raise TimeoutError from None
            except httpx.HTTPError as error:
                raise ToolFailure(_transport_failure(request.url, error)) from None
            try:
                if not response.is_redirect:
                    return await _read(response, call)
                following = response.next_request
                if following is None:  # pragma: no cover - httpx sets it on a redirect
                    raise ToolFailure(f"fetch: {request.url} redirects nowhere")
                if following.url.scheme not in ("http", "https"):
                    raise ToolFailure(
                        f"fetch: {request.url} redirects to {following.url}: only http and "
                        "https URLs are read"
                    )
                if redirects >= entry.max_redirects:
                    raise ToolFailure(
                        f"fetch: {url} redirects more than {entry.max_redirects} times "
                        f"(max_redirects under [tools.fetch])"
                    )
                redirects += 1
                request = following
            finally:
                await response.aclose()


def _transport_failure(url: httpx.URL, error: httpx.HTTPError) -> str:
    detail = str(error) or type(error).__name__
    if isinstance(error, httpx.ConnectError):
        return f"fetch: cannot connect to {url.host}: {detail}"
    return f"fetch: {url}: {type(error).__name__}: {detail}"


def _media_type(response: httpx.Response) -> str:
    value: str = response.headers.get("content-type", "")
    return value.split(";", 1)[0].strip().lower()


def _is_text(media_type: str) -> bool:
    return media_type in TEXT_TYPES or media_type.endswith(("+json", "+xml"))


async def _read(response: httpx.Response, call: _Call) -> str:
    entry = call.entry
    if response.status_code >= 400:
        raise ToolFailure(
            f"fetch: {response.url} answered HTTP {response.status_code} {response.reason_phrase}"
        )
    media_type = _media_type(response)
    if media_type not in HTML_TYPES and not _is_text(media_type):
        raise ToolFailure(
            f"fetch: {media_type or 'content of no stated type'} is not text; not read"
        )
    body = bytearray()
    cut = False
    try:
        async with chunks(response) as each:
            async for chunk in each:
                room = entry.max_bytes - len(body)
                body += chunk[:room]
                if len(chunk) > room:
                    cut = True
                    break
    except httpx.TimeoutException:
        raise TimeoutError from None
    except httpx.HTTPError as error:
        raise ToolFailure(_transport_failure(response.url, error)) from None
    charset = response.charset_encoding
    if media_type in HTML_TYPES:
        call.reading = response.url
        title, text = await _page_text(bytes(body), charset, call.page_limits, response.url)
        call.reading = None
    else:
        title, text = "", _decode(bytes(body), charset).lstrip("\ufeff").strip()
    header = f"URL: {response.url}" + (f" | Title: {title}" if title else "")
    if cut:
        text += f"\n[... cut: only the first {entry.max_bytes:,} bytes were read]"
    return f"{header}\n\n{text or '(no readable text)'}"


def _decode(data: bytes, charset: str | None) -> str:
    try:
        return data.decode(charset or "utf-8", "replace")
    except LookupError:  # a charset Python does not know
        return data.decode("utf-8", "replace")


async def _page_text(
    data: bytes, charset: str | None, bounds: process.Limits, url: httpx.URL
) -> tuple[str, str]:
    """An HTML page's title and readable text (activities.page_text), read in a process of
    its own within `bounds`; the process is killed when the call ends (TimeoutError past
    the clock's share, as the call's own timeout). ToolFailure past the CPU or memory."""
    ended = await process.run_async("activities.page_text:answer", data, bounds, charset or "")
    if ended.output is not None:
        parts = json.loads(ended.output)
        return str(parts["title"]), str(parts["text"])
    if ended.stopped == "time":
        raise TimeoutError
    if ended.stopped == "cpu":
        why = f"takes more than {bounds.cpu_seconds} s of CPU time to read"
    elif ended.stopped == "memory":
        why = f"needs more than {limits.size_text(bounds.memory_bytes)} of memory to read"
    else:
        why = f"could not be read (the reader stopped: {ended.detail})"
    raise ToolFailure(f"fetch: the text of {url} {why}; not read")


def _squeeze(text: str) -> str:
    return " ".join(text.split())


# -- web_search -------------------------------------------------------------------------


async def web_search(arguments: dict[str, Any], entry: SearchEntry, env: Mapping[str, str]) -> str:
    """The first `entry.results` results for a query from the configured backend, as a
    numbered list (title, URL, snippet); ToolFailure in one line when there are none to
    give. `env` holds the Brave key's variable."""
    query = arguments.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolFailure("web_search: give what to search for as a non-empty string (query)")
    query = _squeeze(query)[:QUERY_CHARS]
    key = ""
    if entry.searxng_url is not None:
        url = entry.searxng_url
        params: dict[str, str | int] = {"q": query, "format": "json"}
        headers = {"Accept": "application/json"}
    elif entry.brave_key_env is not None:
        key = env.get(entry.brave_key_env, "").strip()
        if not key:
            raise ToolFailure(
                f"web_search: {entry.brave_key_env} is not set (the variable that holds the "
                "Brave Search API key, brave_key_env under [tools.web_search])"
            )
        redact_logs([key])  # not even part of it in a log line
        url = entry.brave_url
        params = {"q": query, "count": entry.results}
        headers = {"Accept": "application/json", "X-Subscription-Token": key}
    else:
        raise ToolFailure(f"web_search: no search backend: {SEARCH_SETUP}")
    redactor = Redactor([key] if key else [])
    try:
        async with asyncio.timeout(entry.timeout):
            payload = await _search_reply(url, params, headers, entry.timeout)
        results = _results(payload, brave=entry.searxng_url is None)
    except TimeoutError:
        raise ToolFailure(
            f"web_search: the search backend gave no reply within {entry.timeout:g} s",
            transient=True,
        ) from None
    except ToolFailure as failure:
        raise ToolFailure(redactor.redact(str(failure)), failure.transient) from None
    return redactor.redact(_listing(query, results[: entry.results]))


async def _search_reply(
    url: str, params: Mapping[str, str | int], headers: Mapping[str, str], timeout: float
) -> Any:
    """The backend's reply as JSON."""
    try:
        async with (
            httpx.AsyncClient(verify=tls(), timeout=timeout, follow_redirects=False) as client,
            client.stream("GET", url, params=params, headers=headers) as response,
        ):
            body = bytearray()
            async with chunks(response) as each:
                async for chunk in each:
                    body += chunk
                    if len(body) > SEARCH_REPLY_BYTES:
                        raise ToolFailure(
                            "web_search: the search backend's reply is larger than "
                            f"{SEARCH_REPLY_BYTES:,} bytes"
                        )
            status, reason = response.status_code, response.reason_phrase
    except httpx.TimeoutException:
        raise TimeoutError from None
    except httpx.HTTPError as error:
        detail = str(error) or type(error).__name__
        raise ToolFailure(
            f"web_search: the search backend cannot be reached: {detail}", transient=True
        ) from None
    text = bytes(body).decode("utf-8", "replace")
    if status != 200:
        raise ToolFailure(
            f"web_search: the search backend answered HTTP {status} {reason}: "
            f"{_squeeze(text)[:QUOTED_CHARS]}"
        )
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise ToolFailure(
            f"web_search: the search backend's reply is not JSON: {_squeeze(text)[:80]!r}"
        ) from None


def _results(payload: Any, *, brave: bool) -> list[tuple[str, str, str]]:
    """(title, URL, snippet) of each result: SearXNG's results[] (title, url, content),
    Brave's web.results[] (title, url, description)."""
    if brave:
        web = payload.get("web", {"results": []}) if isinstance(payload, dict) else None
        # Brave leaves `web` out when nothing was found.
        items = web.get("results") if isinstance(web, dict) else None
        shape, snippet = "an object with web.results, a list", "description"
    else:
        items = payload.get("results") if isinstance(payload, dict) else None
        shape, snippet = "an object with results, a list", "content"
    if not isinstance(items, list):
        raise ToolFailure(f"web_search: the search backend's reply is not {shape}")
    found: list[tuple[str, str, str]] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("url"), str):
            continue
        found.append(
            (
                _clean(item.get("title"), TITLE_CHARS),
                _clean(item["url"], URL_CHARS),
                _clean(item.get(snippet), SNIPPET_CHARS),
            )
        )
    return found


def _clean(value: Any, limit: int) -> str:
    """A field as one line of plain text (a snippet's <strong> and entities undone)."""
    if not isinstance(value, str):
        return ""
    text = _squeeze(html.unescape(_TAG.sub("", value)))
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _listing(query: str, results: Sequence[tuple[str, str, str]]) -> str:
    if not results:
        return f"No web search results for {query!r}."
    lines = [f"Web search results for {query!r}:"]
    for number, (title, url, snippet) in enumerate(results, 1):
        lines.append(f"{number}. {title or url}")
        lines.append(f"   {url}")
        if snippet:
            lines.append(f"   {snippet}")
    return "\n".join(lines)
