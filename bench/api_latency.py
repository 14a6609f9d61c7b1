"""The latency the OpenAI-compatible API adds over `starter.py start --wait`.

One council (4 simulated members, 1 refinement round, no early stop: every run makes the
same calls) asked the same question three ways, side by side, in turns: `starter.py start
--council bench --wait` as a user runs it (a new process each time: its start-up, the
connection to Temporal, following the progress), a chat completion of the model
`council/bench` through the openai SDK against `python -m web` (plain, then streamed:
to its first chunk and to `[DONE]`), and, beside them, the same start and result from a
warm in-process client (what the deliberation itself takes). One warm-up run of each,
then the medians of --runs runs.

    .venv/bin/python -m bench.api_latency [--runs 5] [--latency 0]

It starts its own Temporal dev server, simulator, worker and web server, and stops them
at the end; their logs go to bench/out/api_latency/.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Any

import openai

from app.settings import councils
from bench.stack import models
from council.config import parse_config
from council.validation import validate_request
from harness import processes
from harness.processes import ROOT, Process, free_port
from harness.stack import Stack, WorkerProcess
from runs import starting

OUT = ROOT / "bench" / "out" / "api_latency"
COUNCIL = "bench"
MODELS = models(4)  # its last member never meets the threshold: no early stop
COUNCIL_TOML = f"""
[councils.{COUNCIL}]
models = {json.dumps(MODELS)}
max_rounds = 1
quality_threshold = 5
stop_on_convergence = false
"""
STARTER = "starter.py start --wait"
STARTED = re.compile(r"deliberation (\S+) started")
QUESTION = "How should a small team choose between SQLite and PostgreSQL for a new service?"


def start_web(stack: Stack, worker: WorkerProcess, config: Path) -> tuple[Process, str]:
    env = {
        "TEMPORAL_ADDRESS": stack.address,
        "COUNCIL_TASK_QUEUE": worker.queue,
        "COUNCIL_CONFIG": str(config),
        **stack.store_env,
    }
    process = processes.start_web(env, port=free_port(), log_path=OUT / "web.log", ready_timeout=60)
    return process, process.extra["url"]


@dataclass
class Run:
    """One way's run: its wall time as the client saw it, and the deliberation's id."""

    wall: float
    workflow: str
    first_chunk: float | None = None
    own: float = 0.0  # the deliberation's own time, from its start to its close


class Ways:
    """The ways of asking."""

    def __init__(self, stack: Stack, worker: WorkerProcess, config: Path, url: str) -> None:
        self.stack = stack
        self.worker = worker
        self.config = config
        self.api = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", timeout=600)
        self.messages: Any = [{"role": "user", "content": QUESTION}]

    async def starter(self) -> Run:
        env = {
            **os.environ,
            "TEMPORAL_ADDRESS": self.stack.address,
            "COUNCIL_TASK_QUEUE": self.worker.queue,
            "COUNCIL_CONFIG": str(self.config),
            **self.stack.store_env,
        }
        started = time.monotonic()
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "starter.py",
            "start",
            QUESTION,
            "--council",
            COUNCIL,
            "--wait",
            cwd=ROOT,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await process.communicate()
        wall = time.monotonic() - started
        found = STARTED.search(err.decode())
        if process.returncode != 0 or found is None:
            raise RuntimeError(f"starter.py start --wait failed: {err.decode()[-500:]}")
        return Run(wall, found.group(1))

    async def api_plain(self) -> Run:
        started = time.monotonic()
        completion = await self.api.chat.completions.create(
            model=f"council/{COUNCIL}", messages=self.messages
        )
        return Run(time.monotonic() - started, completion.id)

    async def api_streamed(self) -> Run:
        started = time.monotonic()
        stream = await self.api.chat.completions.create(
            model=f"council/{COUNCIL}", messages=self.messages, stream=True
        )
        first: float | None = None
        workflow = ""
        async for chunk in stream:
            if first is None:
                first, workflow = time.monotonic() - started, chunk.id
        return Run(time.monotonic() - started, workflow, first)

    async def in_process(self) -> Run:
        assert self.stack.client is not None
        started = time.monotonic()
        options = councils.council_options(parse_config(COUNCIL_TOML), COUNCIL)
        request = validate_request({**options, "question": QUESTION})
        handle = await starting.start(self.stack.client, request, self.worker.queue)
        await handle.result()
        return Run(time.monotonic() - started, handle.id)

    async def own_time(self, run: Run) -> None:
        """The deliberation's time from its start to its close, as the server recorded it."""
        assert self.stack.client is not None
        described = await self.stack.client.get_workflow_handle(run.workflow).describe()
        assert described.start_time and described.close_time
        run.own = (described.close_time - described.start_time).total_seconds()


async def measure(runs: int, latency: float) -> dict[str, list[Run]]:
    OUT.mkdir(parents=True, exist_ok=True)
    config = OUT / "council.toml"
    config.write_text(COUNCIL_TOML)
    stack = await Stack(OUT).start()
    web: Process | None = None
    try:
        assert stack.sim is not None
        stack.sim.set_latency(latency)
        worker = await asyncio.to_thread(stack.start_worker)
        web, url = await asyncio.to_thread(start_web, stack, worker, config)
        ways = Ways(stack, worker, config, url)
        order: dict[str, Callable[[], Awaitable[Run]]] = {
            STARTER: ways.starter,
            "API, plain": ways.api_plain,
            "API, streamed": ways.api_streamed,
            "in-process client": ways.in_process,
        }
        for ask in order.values():  # warm-up
            await ask()
        found: dict[str, list[Run]] = {name: [] for name in order}
        for _ in range(runs):
            for name, ask in order.items():
                found[name].append(await ask())
        for run in (run for each in found.values() for run in each):
            await ways.own_time(run)
        await ways.api.close()
        return found
    finally:
        if web is not None:
            web.stop()
        stack.close()


def report(found: dict[str, list[Run]], runs: int, latency: float) -> str:
    base = median([run.wall for run in found[STARTER]])
    lines = [
        f"council {COUNCIL}: {len(MODELS)} simulated members, 1 round, every call "
        f"{latency:g} s; medians of {runs} runs, the ways in turns",
        "wall: as the client saw it; deliberation: its workflow's start to close; added: "
        "wall - deliberation",
        "",
        f"{'way':<24} {'wall':>7} {'deliberation':>13} {'added':>7} {'wall vs starter':>16}",
    ]
    for name, each in found.items():
        wall = median([run.wall for run in each])
        own = median([run.own for run in each])
        added = median([run.wall - run.own for run in each])
        lines.append(
            f"{name:<24} {wall:>6.2f}s {own:>12.2f}s {added:>6.2f}s {wall - base:>+15.2f}s"
        )
    firsts = [run.first_chunk for run in found["API, streamed"] if run.first_chunk is not None]
    if firsts:
        lines.append(f"\nAPI, streamed: its first chunk after {median(firsts) * 1000:.0f} ms")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.api_latency", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--runs", type=int, default=5, help="runs of each way (default 5)")
    parser.add_argument(
        "--latency", type=float, default=0.0, help="seconds each model call takes (default 0)"
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    found = asyncio.run(measure(args.runs, args.latency))
    print(report(found, args.runs, args.latency))
    return 0


if __name__ == "__main__":
    sys.exit(main())
