"""What a hostile page or tool server costs the worker: the built-in fetch reading pages
whose markup is cheap to send and was dear to turn into text, and an MCP tool answering
with one huge single-line message, over stdio and over streamable HTTP. Each case runs in
a process of its own (its peak memory its own), calls the tool as the worker does, and
reports the call's wall time, the worker's CPU time, the CPU time of the processes it
reaped (the page's reader), the worker's memory before the call and at its peak, the
longest the event loop went without turning, and how the call ended.

    python -m bench.bombs                       # every case (a few minutes on old code)
    python -m bench.bombs --only pages          # or: --only mcp
    python -m bench.bombs --limit 60            # a case still running after 60 s is stopped
    python -m bench.bombs --case page:flat:200000   # one case, as JSON (what the table runs)

The pages come from a server of its own on 127.0.0.1; the tool servers are
tests/hostile_mcp.py. The same script runs against an older checkout (copy it and
tests/hostile_mcp.py there) for the figures before a change.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "tests" / "hostile_mcp.py"
KB = 1_000
MB = 1_000_000
MIB = 1 << 20
PAGES = {
    # A flat page: a paragraph of one letter, again and again.
    "flat": lambda size: b"<p>x</p>" * (size // 8),
    # Elements nested as deep as the size allows, one letter at the bottom.
    "nested": lambda size: b"<div>" * (size // 11) + b"x" + b"</div>" * (size // 11),
    # Tags that never close (Python's html.parser is quadratic on them).
    "unclosed": lambda size: b"<a" * (size // 2),
}
CASES = [
    "page:flat:20000",
    "page:flat:80000",
    "page:flat:200000",
    "page:nested:100000",
    "page:unclosed:200000",
    "page:flat:2000000",
    "mcp:stdio:10000000",
    "mcp:stdio:30000000",
    "mcp:stdio:60000000",
    "mcp:json:10000000",
    "mcp:json:30000000",
    "mcp:sse:30000000",
]
TICK = 0.005


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _rss_mib() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / MIB


async def measured(call: Callable[[], Awaitable[str]]) -> dict[str, Any]:
    """The call's figures, a ticker beside it measuring the event loop's longest stall."""
    stall = 0.0
    done = False

    async def ticker() -> None:
        nonlocal stall
        loop = asyncio.get_running_loop()
        while not done:
            before = loop.time()
            await asyncio.sleep(TICK)
            stall = max(stall, loop.time() - before - TICK)

    ticking = asyncio.create_task(ticker())
    rss = _rss_mib()
    cpu, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    try:
        text = await call()
        outcome = f"text of {len(text.encode()):,} bytes"
    except Exception as error:
        outcome = f"{type(error).__name__}: {error}"
    wall = time.monotonic() - started
    done = True
    await ticking
    return {
        "wall_s": wall,
        "cpu_s": _cpu(resource.RUSAGE_SELF) - cpu,
        "children_cpu_s": _cpu(resource.RUSAGE_CHILDREN) - children,
        "rss_before_mib": rss,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "stall_ms": stall * 1000,
        "outcome": outcome,
    }


@contextmanager
def page_server(body: bytes) -> Iterator[str]:
    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/page"
    finally:
        server.shutdown()
        server.server_close()


async def page_case(kind: str, size: int) -> dict[str, Any]:
    from activities.web_tools import fetch
    from council.tool_config import FetchEntry

    entry = FetchEntry(allow_addresses=["127.0.0.1"], timeout=600)
    with page_server(PAGES[kind](size)) as url:
        return await measured(lambda: fetch({"url": url}, entry))


async def mcp_case(transport: str, size: int) -> dict[str, Any]:
    from activities.mcp_tools import Sessions, call_tool
    from council.tool_config import McpEntry

    server = None
    if transport == "stdio":
        entry = McpEntry(command=[sys.executable, str(HOSTILE), "stdio"], timeout=600)
    else:
        server = await asyncio.create_subprocess_exec(
            sys.executable, str(HOSTILE), "http", transport, stdout=subprocess.PIPE
        )
        assert server.stdout is not None
        port = int(await server.stdout.readline())
        entry = McpEntry(url=f"http://127.0.0.1:{port}/mcp", timeout=600)
    sessions = Sessions()
    try:
        # The server started and its session open first: the call alone is measured.
        await call_tool(entry, {}, "small", {}, sessions)
        return await measured(lambda: call_tool(entry, {}, "flood", {"size": size}, sessions))
    finally:
        await sessions.aclose()
        if server is not None:
            server.kill()
            await server.wait()


def one(case: str) -> dict[str, Any]:
    what, kind, size = case.split(":")
    run = page_case if what == "page" else mcp_case
    return asyncio.run(run(kind, int(size)))


def _size(size: int) -> str:
    return f"{size // MB} MB" if size >= MB else f"{size // KB} KB"


def table(cases: list[str], limit: float) -> str:
    rows = [
        "| case | wall | worker CPU | reader CPU | RSS before | peak RSS | loop stall | outcome |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for case in cases:
        what, kind, size = case.split(":")
        name = f"{'fetch' if what == 'page' else 'MCP'} {kind} {_size(int(size))}"
        print(f"bench.bombs: {name} ...", file=sys.stderr, flush=True)
        command = [sys.executable, "-m", "bench.bombs", "--case", case]
        # A group of its own: a case stopped at the limit takes its tool server with it.
        running = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        try:
            out, err = running.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(running.pid, signal.SIGKILL)
            running.communicate()
            stopped = f"stopped: no end in {limit:.0f} s"
            rows.append(f"| {name} | > {limit:.0f} s | | | | | | {stopped} |")
            continue
        try:
            got = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            rows.append(f"| {name} | | | | | | | failed: {err.strip()[-200:]} |")
            continue
        reader = f"{got['children_cpu_s']:.2f} s" if what == "page" else ""
        outcome = got["outcome"].replace("|", "/")[:120]
        rows.append(
            f"| {name} | {got['wall_s']:.2f} s | {got['cpu_s']:.2f} s | {reader} | "
            f"{got['rss_before_mib']:.0f} MiB | {got['peak_rss_mib']:.0f} MiB | "
            f"{got['stall_ms']:.0f} ms | {outcome} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bombs", description=__doc__)
    parser.add_argument("--case", help="one case (page:KIND:BYTES or mcp:TRANSPORT:BYTES)")
    parser.add_argument("--only", choices=["pages", "mcp"], help="only these cases")
    parser.add_argument("--limit", type=float, default=180, help="seconds a case may take")
    args = parser.parse_args()
    if args.case:
        print(json.dumps(one(args.case)))
        return
    prefix = {"pages": "page:", "mcp": "mcp:", None: ""}[args.only]
    print(table([case for case in CASES if case.startswith(prefix)], args.limit))


if __name__ == "__main__":
    main()
