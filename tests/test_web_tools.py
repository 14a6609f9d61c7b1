"""The built-in fetch and web_search tools (activities.web_tools) against real HTTP servers
of the test's own on 127.0.0.1: a page's readable text, the address guard (loopback,
private and metadata addresses refused after resolution, on every redirect hop, and a
name that resolves differently the next time), the caps, and the two search backends.
Every connection a test makes goes to loopback; a bad address is a closed local port or
a name under .invalid.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from activities.web_tools import (
    ToolFailure,
    address_kind,
    allowed_networks,
    fetch,
    fetch_spec,
    is_allowed,
    search_spec,
    web_search,
)
from council.limits import PAGE_TITLE_CHARS
from council.redaction import REDACTED
from council.tool_config import FetchEntry, SearchEntry

# Each test but those that read a page's markup (in a process of its own: activities.page_text
# through bounded.process) is in the fast tier.

KEY = "brave-test-KEY-5c81f0a9d3-never-print"
PAGE = """<!doctype html>
<html><head><title> The  Council's
  Page </title>
<style>body { color: red }</style>
<script>var secret = "script text";</script>
</head><body>
<nav><a href="http://hidden.example/link-target">Home</a></nav>
<h1>Deliberation</h1>
<p>Three   models answer,
 then review each other.</p>
<noscript>enable scripts</noscript><template><p>template text</p></template>
<!-- a comment -->
<ul><li>First <b>bold</b> point</li><li>Second point</li></ul>
<table><tr><td>cell one</td><td>cell two</td></tr></table>
</body></html>"""

Handler = Callable[[BaseHTTPRequestHandler], None]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that stopped reading at its cap: expected, not news


class Site:
    """An HTTP server on 127.0.0.1 in a thread; each path answers as the test sets it in
    `routes` (others: 404), and every request is kept (path with query, headers)."""

    def __init__(self) -> None:
        self.routes: dict[str, Handler] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        site = self

        class Answer(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.requests.append((self.path, dict(self.headers.items())))
                route = site.routes.get(urlsplit(self.path).path)
                if route is None:
                    reply(404, "text/plain", b"no such page")(self)
                else:
                    route(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        # Bound and listening once made: ready before serve_forever's first turn.
        self.server = _Server(("127.0.0.1", 0), Answer)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        # A short poll: shutdown() waits for serve_forever's next look (0.5 s by default).
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]


def reply(
    status: int, content_type: str | None, body: bytes, headers: dict[str, str] | None = None
) -> Handler:
    def answer(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        if content_type is not None:
            handler.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return answer


def redirect(location: str) -> Handler:
    return reply(302, "text/plain", b"moved", {"Location": location})


def json_reply(value: Any, status: int = 200) -> Handler:
    return reply(status, "application/json", json.dumps(value).encode())


@pytest.fixture
def site() -> Iterator[Site]:
    server = Site()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()
        server.thread.join()


@contextlib.contextmanager
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that takes connections and never answers."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield listener.getsockname()[1]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def local(**fields: Any) -> FetchEntry:
    return FetchEntry(allow_addresses=["127.0.0.1"], **fields)


async def fetch_failure(url: Any, entry: FetchEntry, **options: Any) -> str:
    with pytest.raises(ToolFailure) as caught:
        await fetch({"url": url}, entry, **options)
    message = str(caught.value)
    assert message.startswith("fetch: ") and "\n" not in message
    return message


# -- fetch: what it reads ---------------------------------------------------------------


async def test_an_html_page_is_its_title_and_readable_text(site: Site) -> None:
    site.routes["/page"] = reply(200, "text/html; charset=utf-8", PAGE.encode())
    text = await fetch({"url": f"{site.url}/page"}, local())
    header, body = text.split("\n\n", 1)
    assert header == f"URL: {site.url}/page | Title: The Council's Page"
    assert body.splitlines() == [
        "Home",
        "Deliberation",
        "Three models answer, then review each other.",
        "First bold point",
        "Second point",
        "cell one cell two",
    ]
    for gone in ("secret", "color", "enable scripts", "template text", "comment", "hidden"):
        assert gone not in text
    [(_, headers)] = site.requests
    assert "Council-fetch" in headers["User-Agent"]


async def test_an_xhtml_page_with_an_xml_declaration_and_no_charset(site: Site) -> None:
    page = (
        '<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml">'
        "<head><title>Caf\u00e9</title></head>"
        "<body><p>cr\u00e8me br\u00fbl\u00e9e</p></body></html>"
    )
    site.routes["/x"] = reply(200, "application/xhtml+xml", page.encode())
    text = await fetch({"url": f"{site.url}/x"}, local())
    assert text == f"URL: {site.url}/x | Title: Caf\u00e9\n\ncr\u00e8me br\u00fbl\u00e9e"


CYRILLIC = "\u0447\u0430\u0439"


@pytest.mark.parametrize(
    ("body", "text"),
    [
        # The page's own charset: a <meta> (either form), a BOM; else UTF-8 where the bytes
        # are UTF-8, else windows-1252.
        ('<meta charset="iso-8859-1"><p>caf\u00e9</p>'.encode("latin-1"), "caf\u00e9"),
        (
            (
                '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'
                f"<p>{CYRILLIC}</p>"
            ).encode("cp1251"),
            CYRILLIC,
        ),
        ("<p>cr\u00e8me</p>".encode("utf-16"), "cr\u00e8me"),
        ("<p>na\u00efve</p>".encode(), "na\u00efve"),
        (b"<p>caf\xe9</p>", "caf\u00e9"),
    ],
    ids=["meta-charset", "meta-http-equiv", "bom", "utf-8", "windows-1252"],
)
async def test_a_page_without_a_charset_is_read_in_its_own(
    site: Site, body: bytes, text: str
) -> None:
    site.routes["/page"] = reply(200, "text/html", body)
    assert await fetch({"url": f"{site.url}/page"}, local()) == f"URL: {site.url}/page\n\n{text}"


@pytest.mark.parametrize(
    ("markup", "text"),
    [
        ("a<!-->b<!--->c<!-- <p>hidden</p> -->d", "abcd"),
        ("<ul><li>one<li>two</ul>three</div>, four", "one\ntwo\nthree, four"),
        ("line one</br>line two", "line one\nline two"),
        ('<a title="a > b" href=\'x"y\'>link</a> after', "link after"),
        ("<script>document.write('</p>x')</script><p>shown</p>", "shown"),
        ("<textarea>some <b>text</b> &amp; more</textarea>", "some <b>text</b> & more"),
        ("<p>a &lt; b, 3<4, AT&T &amp; &#x41;&#66;</p>", "a < b, 3<4, AT&T & AB"),
        ("<pre>  keep\n   lines  </pre>x\ny", "keep\nlines\nx y"),
        ("<p>a<![CDATA[ <raw> ]]>b</p>", "a <raw> b"),
        ("<P>Upper</P><DIV>Div</DIV><SCRIPT>no</SCRIPT>", "Upper\nDiv"),
        ("<p>kept</p><a href='never closed", "kept"),
        ("<p>kept</p><!-- never closed <p>x</p>", "kept"),
    ],
)
async def test_markup_is_read_as_a_browser_reads_it(site: Site, markup: str, text: str) -> None:
    site.routes["/page"] = reply(200, "text/html; charset=utf-8", markup.encode())
    assert await fetch({"url": f"{site.url}/page"}, local()) == f"URL: {site.url}/page\n\n{text}"


async def test_a_title_left_open_is_cut(site: Site) -> None:
    site.routes["/page"] = reply(200, "text/html", b"<title>" + b"word " * 100_000)
    header, body = (await fetch({"url": f"{site.url}/page"}, local())).split("\n\n", 1)
    title = header.split(" | Title: ", 1)[1]
    assert len(title) == PAGE_TITLE_CHARS and title.endswith("\u2026")
    assert body == "(no readable text)"


@pytest.mark.fast
async def test_text_types_are_read_as_they_are_in_their_charset(site: Site) -> None:
    site.routes["/latin"] = reply(
        200, "text/plain; charset=iso-8859-1", "caf\u00e9".encode("latin-1")
    )
    site.routes["/data"] = json_reply({"answer": 42})
    site.routes["/broken"] = reply(200, "text/csv", b"a,b\n\xff,2\n")
    assert await fetch({"url": f"{site.url}/latin"}, local()) == (
        f"URL: {site.url}/latin\n\ncaf\u00e9"
    )
    assert await fetch({"url": f"{site.url}/data"}, local()) == (
        f'URL: {site.url}/data\n\n{{"answer": 42}}'
    )
    assert (await fetch({"url": f"{site.url}/broken"}, local())).endswith("a,b\n\ufffd,2")


@pytest.mark.fast
async def test_a_redirect_within_the_allowed_server_is_followed(site: Site) -> None:
    site.routes["/old"] = redirect("/new")
    site.routes["/new"] = reply(200, "text/plain", b"moved here")
    text = await fetch({"url": f"{site.url}/old"}, local())
    assert text == f"URL: {site.url}/new\n\nmoved here"
    assert site.paths() == ["/old", "/new"]


@pytest.mark.fast
async def test_reading_stops_at_the_byte_cap_and_says_so(site: Site) -> None:
    site.routes["/big"] = reply(200, "text/plain", b"x" * 5_000_000)
    text = await fetch({"url": f"{site.url}/big"}, local(max_bytes=1000))
    body = text.split("\n\n", 1)[1]
    assert body == "x" * 1000 + "\n[... cut: only the first 1,000 bytes were read]"


# -- fetch: what it refuses -------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["file:///etc/passwd", "ftp://127.0.0.1/", "javascript:alert(1)", "gopher://127.0.0.1:70/"],
)
@pytest.mark.fast
async def test_only_http_and_https_urls(url: str) -> None:
    assert "only http and https URLs" in await fetch_failure(url, local())


@pytest.mark.parametrize("url", [None, "", "   ", 42, ["http://127.0.0.1/"]])
@pytest.mark.fast
async def test_the_url_must_be_a_non_empty_string(url: Any) -> None:
    assert "non-empty string" in await fetch_failure(url, local())


@pytest.mark.parametrize(
    ("url", "why"),
    [("http://[::1", "is not a URL"), ("http:///path", "names no host"), ("http://", "no host")],
)
@pytest.mark.fast
async def test_a_malformed_url(url: str, why: str) -> None:
    assert why in await fetch_failure(url, local())


@pytest.mark.parametrize("host", ["127.1", "0x7f.1", "2130706433"])
@pytest.mark.fast
async def test_other_spellings_of_loopback_are_refused(host: str) -> None:
    message = await fetch_failure(f"http://{host}:{closed_port()}/", FetchEntry())
    assert f"{host} (127.0.0.1) is a loopback address; refused" in message


@pytest.mark.fast
async def test_loopback_is_refused_unless_allowed(site: Site) -> None:
    site.routes["/page"] = reply(200, "text/plain", b"private data")
    message = await fetch_failure(f"{site.url}/page", FetchEntry())
    assert "127.0.0.1 is a loopback address; refused" in message
    assert "allow_addresses" in message
    localhost = await fetch_failure(f"http://localhost:{site.port}/page", FetchEntry())
    assert "localhost (" in localhost and "a loopback address" in localhost
    ipv6 = await fetch_failure(f"http://[::1]:{site.port}/page", local())
    assert "::1 is a loopback address" in ipv6
    mapped = await fetch_failure(f"http://[::ffff:127.0.0.1]:{site.port}/page", FetchEntry())
    assert "loopback address (as IPv6)" in mapped
    assert site.requests == []  # refused before any connection


@pytest.mark.parametrize("target", ["http://127.0.0.2:{port}/", "http://[::1]:{port}/"])
@pytest.mark.fast
async def test_a_redirect_to_a_refused_address_is_refused(site: Site, target: str) -> None:
    site.routes["/go"] = redirect(target.format(port=site.port))
    message = await fetch_failure(f"{site.url}/go", local())
    assert "is a loopback address; refused" in message
    assert f"(after 1 redirect from {site.url}/go)" in message
    assert site.paths() == ["/go"]


@pytest.mark.fast
async def test_too_many_redirects(site: Site) -> None:
    site.routes["/loop"] = redirect("/loop")
    message = await fetch_failure(f"{site.url}/loop", local(max_redirects=2))
    assert "redirects more than 2 times" in message
    assert site.paths() == ["/loop"] * 3


@pytest.mark.fast
async def test_a_redirect_to_another_scheme_is_refused(site: Site) -> None:
    site.routes["/file"] = redirect("file:///etc/passwd")
    assert "only http and https" in await fetch_failure(f"{site.url}/file", local())


@pytest.mark.parametrize(
    ("content_type", "shown"),
    [
        ("image/png", "image/png"),
        ("application/pdf", "application/pdf"),
        ("application/octet-stream; charset=utf-8", "application/octet-stream"),
        (None, "content of no stated type"),
    ],
)
@pytest.mark.fast
async def test_content_that_is_not_text_is_not_read(
    site: Site, content_type: str | None, shown: str
) -> None:
    site.routes["/file"] = reply(200, content_type, b"\x89PNG\r\n\x1a\n")
    message = await fetch_failure(f"{site.url}/file", local())
    assert message == f"fetch: {shown} is not text; not read"


@pytest.mark.fast
async def test_an_error_status_is_a_failure(site: Site) -> None:
    message = await fetch_failure(f"{site.url}/missing", local())
    assert message == f"fetch: {site.url}/missing answered HTTP 404 Not Found"


@pytest.mark.fast
async def test_a_server_that_never_answers_times_out() -> None:
    with silent_port() as port:
        message = await fetch_failure(f"http://127.0.0.1:{port}/", local(timeout=0.5))
    assert "gave no complete reply within 0.5 s" in message


@pytest.mark.fast
async def test_bad_addresses_fail_in_one_line() -> None:
    closed = await fetch_failure(f"http://127.0.0.1:{closed_port()}/", local())
    assert closed.startswith("fetch: cannot connect to 127.0.0.1")
    unknown = await fetch_failure("http://no-such-host.invalid/", FetchEntry())
    assert unknown.startswith("fetch: cannot resolve no-such-host.invalid")


# -- the address guard ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("10.0.0.1", "a private address"),
        ("172.16.0.1", "a private address"),
        ("192.168.1.1", "a private address"),
        ("127.0.0.1", "a loopback address"),
        ("127.8.9.10", "a loopback address"),
        ("::1", "a loopback address"),
        ("169.254.169.254", "a cloud metadata address"),
        ("fd00:ec2::254", "a cloud metadata address"),
        ("100.100.100.200", "a cloud metadata address"),
        ("169.254.1.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("fc00::1", "a private address"),
        ("fd12:3456::1", "a private address"),
        ("::ffff:127.0.0.1", "a loopback address (as IPv6)"),
        ("::ffff:10.1.2.3", "a private address (as IPv6)"),
        ("::ffff:169.254.169.254", "a cloud metadata address (as IPv6)"),
        ("64:ff9b::7f00:1", "a loopback address (as IPv6)"),
        ("2002:c0a8:0101::1", "a private address (as IPv6)"),
        ("100.64.0.1", "a shared (carrier-grade NAT) address"),
        ("0.0.0.0", "the unspecified address"),
        ("::", "the unspecified address"),
        ("224.0.0.1", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("fec0::1", "a site-local address"),
        ("8.8.8.8", None),
        ("93.184.215.14", None),
        ("2606:4700::1111", None),
        ("::ffff:8.8.8.8", None),
    ],
)
@pytest.mark.fast
def test_which_addresses_are_refused(address: str, kind: str | None) -> None:
    assert address_kind(ipaddress.ip_address(address)) == kind


@pytest.mark.parametrize(
    "address", ["240.0.0.1", "255.255.255.255", "192.0.2.1", "198.18.0.1", "2001:db8::1"]
)
@pytest.mark.fast
def test_other_addresses_that_are_not_public_are_refused(address: str) -> None:
    # Reserved, broadcast, documentation and benchmarking ranges (which word names each
    # follows the Python version's tables).
    assert address_kind(ipaddress.ip_address(address)) is not None


@pytest.mark.fast
def test_allow_addresses_admits_addresses_and_networks() -> None:
    networks = allowed_networks(["127.0.0.1", "10.0.0.0/8", "fd00::/8"])

    def allowed(address: str) -> bool:
        return is_allowed(ipaddress.ip_address(address), networks)

    assert allowed("127.0.0.1") and allowed("::ffff:127.0.0.1") and allowed("10.9.8.7")
    assert allowed("fd00::5") and allowed("8.8.8.8")
    assert not allowed("127.0.0.2") and not allowed("::1") and not allowed("192.168.0.1")
    assert not is_allowed(ipaddress.ip_address("127.0.0.1"), [])


class Resolver:
    """A name's answers, one list per resolution (the last one repeats), and how often it
    was asked."""

    def __init__(self, *answers: Sequence[str]) -> None:
        self.answers = list(answers)
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> Sequence[str]:
        self.asked.append(host)
        return self.answers[min(len(self.asked), len(self.answers)) - 1]


@pytest.mark.fast
async def test_the_connection_goes_to_the_address_that_was_checked(site: Site) -> None:
    site.routes["/page"] = reply(200, "text/plain", b"reached")
    resolver = Resolver(["127.0.0.1"])
    # No system resolver answers for .invalid: the guard's own answer is where it connects.
    text = await fetch({"url": f"http://site.invalid:{site.port}/page"}, local(), resolver=resolver)
    assert text == f"URL: http://site.invalid:{site.port}/page\n\nreached"
    assert resolver.asked == ["site.invalid"]
    [(_, headers)] = site.requests
    assert headers["Host"] == f"site.invalid:{site.port}"


@pytest.mark.fast
async def test_every_address_a_name_resolves_to_is_checked(site: Site) -> None:
    resolver = Resolver(["93.184.215.14", "127.0.0.1"])
    entry = FetchEntry()
    message = await fetch_failure(f"http://two.invalid:{site.port}/", entry, resolver=resolver)
    assert "two.invalid (127.0.0.1) is a loopback address; refused" in message
    assert site.requests == []


@pytest.mark.fast
async def test_a_name_that_resolves_elsewhere_the_next_time_is_refused(site: Site) -> None:
    """DNS rebinding: the first answer passes (127.0.0.1, allowed here, stands for a public
    address), the next connection's answer is a refused one; the guard resolves and checks
    at every connection, so the second is refused, not made."""
    site.routes["/start"] = redirect("/next")  # the server closes each connection (HTTP/1.0)
    site.routes["/next"] = reply(200, "text/plain", b"inside")
    resolver = Resolver(["127.0.0.1"], ["127.0.0.2"])
    message = await fetch_failure(
        f"http://rebind.invalid:{site.port}/start", local(), resolver=resolver
    )
    assert "rebind.invalid (127.0.0.2) is a loopback address; refused" in message
    assert resolver.asked == ["rebind.invalid", "rebind.invalid"]
    assert site.paths() == ["/start"]


# -- web_search -------------------------------------------------------------------------


def searxng(site: Site, **fields: Any) -> SearchEntry:
    return SearchEntry(searxng_url=f"{site.url}/search", **fields)


def brave(site: Site, **fields: Any) -> SearchEntry:
    return SearchEntry(brave_key_env="BRAVE_TEST_KEY", brave_url=f"{site.url}/brave", **fields)


async def search_failure(arguments: Any, entry: SearchEntry, env: dict[str, str]) -> str:
    with pytest.raises(ToolFailure) as caught:
        await web_search(arguments, entry, env)
    message = str(caught.value)
    assert message.startswith("web_search: ") and "\n" not in message
    return message


@pytest.mark.fast
async def test_searxng_results_are_a_numbered_list(site: Site) -> None:
    results = [
        {"title": f"Result {n}", "url": f"https://example.org/{n}", "content": f"snippet {n}"}
        for n in range(1, 8)
    ]
    results[0] = {
        "title": "  Temporal &amp; <b>durable</b>\n execution ",
        "url": "https://temporal.io/",
        "content": "Workflows   that survive\ncrashes. " + "long " * 200,
    }
    site.routes["/search"] = json_reply({"query": "x", "results": results})
    text = await web_search({"query": "  durable   execution "}, searxng(site, results=3), {})
    lines = text.splitlines()
    assert lines[0] == "Web search results for 'durable execution':"
    assert lines[1:3] == ["1. Temporal & durable execution", "   https://temporal.io/"]
    assert lines[3].startswith("   Workflows that survive crashes. long") and lines[3].endswith("…")
    assert len(lines[3]) == 3 + 400
    assert lines[4:] == [
        "2. Result 2",
        "   https://example.org/2",
        "   snippet 2",
        "3. Result 3",
        "   https://example.org/3",
        "   snippet 3",
    ]
    [(path, _)] = site.requests
    assert parse_qs(urlsplit(path).query) == {"q": ["durable execution"], "format": ["json"]}


@pytest.mark.fast
async def test_brave_results_with_the_key_in_its_header(site: Site) -> None:
    found = {
        "web": {
            "results": [
                {
                    "title": "Brave <strong>one</strong>",
                    "url": "https://one.example/",
                    "description": "The <strong>first</strong> &quot;hit&quot;",
                },
                {"title": "no url"},
                {"title": "Two", "url": "https://two.example/", "description": ""},
            ]
        }
    }
    site.routes["/brave"] = json_reply(found)
    text = await web_search({"query": "council"}, brave(site, results=4), {"BRAVE_TEST_KEY": KEY})
    assert text == (
        "Web search results for 'council':\n"
        '1. Brave one\n   https://one.example/\n   The first "hit"\n'
        "2. Two\n   https://two.example/"
    )
    [(path, headers)] = site.requests
    assert headers["X-Subscription-Token"] == KEY
    assert parse_qs(urlsplit(path).query) == {"q": ["council"], "count": ["4"]}
    assert KEY not in path


@pytest.mark.fast
async def test_brave_with_no_results(site: Site) -> None:
    site.routes["/brave"] = json_reply({"type": "search", "query": {"original": "zzz"}})
    text = await web_search({"query": "zzz"}, brave(site), {"BRAVE_TEST_KEY": KEY})
    assert text == "No web search results for 'zzz'."


@pytest.mark.fast
async def test_the_brave_key_never_shows_in_a_failure(site: Site) -> None:
    site.routes["/brave"] = json_reply(
        {"error": f"invalid subscription token {KEY} (starts {KEY[:12]})"}, status=401
    )
    message = await search_failure({"query": "council"}, brave(site), {"BRAVE_TEST_KEY": KEY})
    assert "HTTP 401 Unauthorized" in message and REDACTED in message
    assert KEY[:8] not in message


@pytest.mark.fast
async def test_a_missing_brave_key_names_its_variable(site: Site) -> None:
    for env in ({}, {"BRAVE_TEST_KEY": "  "}, {"OTHER": KEY}):
        message = await search_failure({"query": "q"}, brave(site), env)
        assert "BRAVE_TEST_KEY is not set" in message and KEY not in message
    assert site.requests == []


@pytest.mark.fast
async def test_no_backend_says_how_to_set_one() -> None:
    message = await search_failure({"query": "q"}, SearchEntry(), {})
    assert message.startswith("web_search: no search backend: ")
    assert "searxng_url" in message and "brave_key_env" in message


@pytest.mark.parametrize("arguments", [{}, {"query": ""}, {"query": "  \n"}, {"query": 7}])
@pytest.mark.fast
async def test_the_query_must_be_a_non_empty_string(site: Site, arguments: Any) -> None:
    assert "non-empty string" in await search_failure(arguments, searxng(site), {})
    assert site.requests == []


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (reply(200, "text/html", b"<html>\n<p>a search page</p></html>"), "is not JSON"),
        (json_reply({"answers": []}), "is not an object with results, a list"),
        (json_reply([1, 2]), "is not an object with results, a list"),
        (reply(503, "text/plain", b"down\nfor maintenance"), "HTTP 503"),
    ],
)
@pytest.mark.fast
async def test_a_reply_that_is_not_results_fails_in_one_line(
    site: Site, answer: Handler, why: str
) -> None:
    site.routes["/search"] = answer
    assert why in await search_failure({"query": "q"}, searxng(site), {})


@pytest.mark.fast
async def test_a_search_backend_that_never_answers_times_out() -> None:
    with silent_port() as port:
        entry = SearchEntry(searxng_url=f"http://127.0.0.1:{port}/search", timeout=0.5)
        message = await search_failure({"query": "q"}, entry, {})
    assert message == "web_search: the search backend gave no reply within 0.5 s"


@pytest.mark.fast
async def test_an_unreachable_search_backend_fails_in_one_line() -> None:
    entry = SearchEntry(searxng_url=f"http://127.0.0.1:{closed_port()}/search")
    assert "cannot be reached" in await search_failure({"query": "q"}, entry, {})


# -- what the model is offered ----------------------------------------------------------


@pytest.mark.fast
def test_the_tools_specs() -> None:
    spec = fetch_spec(FetchEntry(timeout=12, max_attempts=3))
    assert (spec.name, spec.source, spec.tool, spec.read_only) == ("fetch", "fetch", "fetch", True)
    assert (spec.timeout_seconds, spec.max_attempts) == (12, 3)
    assert spec.parameters["required"] == ["url"]
    assert spec.parameters["properties"]["url"]["type"] == "string"
    search = search_spec(SearchEntry(searxng_url="http://127.0.0.1:8888/search", results=7))
    assert (search.name, search.source, search.tool) == ("web_search",) * 3
    assert search.parameters["required"] == ["query"]
    assert search.parameters["properties"]["query"]["type"] == "string"
    assert "7 results" in search.description
    assert search.openai()["function"]["name"] == "web_search"
