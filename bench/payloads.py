"""7. Payloads: what texts by reference cost, for the largest council (12 members, 5 rounds).

Zero-latency models, a fresh worker. Each row is one deliberation that goes every round:
without attachments, with a 400 KB text attachment, and with the most a run may attach
(10 files of 800 KB of text). For each, from its history: the events, their total size,
the largest payload left in it and the largest workflow task's commands (with, beside
them, what that task would have weighed had nothing been stored); the bytes the run wrote
to the payload store (the store directory before and after) and the run's wall time.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from app.requests import attachments
from app.store import store
from bench import report
from bench.stack import BenchStack, council_request, history_size
from council import limits
from harness.history import inline_size, task_commands
from harness.stack import Stack

MODELS = 12
ROUNDS = 5


def store_bytes(stack: Stack) -> int:
    """Bytes in the stack's directory store."""
    root = stack.store_dir
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.exists() else 0


def text_of(size: int, part: int = 0) -> str:
    line = f"part {part}: a line of a long document that every member reads whole.\n"
    return (line * (size // len(line) + 1))[:size]


def files(count: int, size: int) -> list[dict[str, Any]]:
    return [
        attachments.from_bytes(f"part-{n}.txt", text_of(size, n).encode()).model_dump()
        for n in range(count)
    ]


async def run(stack: BenchStack, quick: bool = False) -> report.Section:
    stack.sim.set_latency(0)
    models, rounds = (4, 2) if quick else (MODELS, ROUNDS)
    most = limits.MAX_ATTACHMENTS_TOTAL_BYTES // limits.MAX_ATTACHMENTS
    cases: list[tuple[str, list[dict[str, Any]]]] = [
        ("none", []),
        ("one 400 KB text", files(1, 400_000)),
        (f"{limits.MAX_ATTACHMENTS} x {most // 1000} KB of text (the most)", []),
    ]
    if not quick:
        cases[2] = (cases[2][0], files(limits.MAX_ATTACHMENTS, most))
    else:
        cases.pop()
    table = report.Table(
        [
            "attachments",
            "rounds",
            "model calls",
            "history events",
            "history size",
            "largest payload in history",
            "largest task's commands",
            "same task, nothing stored",
            "written to the store",
            "wall time",
        ]
    )
    worker = await asyncio.to_thread(stack.start_council_worker)
    try:
        for name, attached in cases:
            request = {
                **council_request(models, rounds),
                "token_budget": limits.MAX_TOKEN_BUDGET,
                "attachments": attached,
            }
            before = store_bytes(stack)
            stack.sim.reset()
            started = time.monotonic()
            handle = await stack.start_council(worker.queue, request, prefix="payloads")
            record = await handle.result()
            wall = time.monotonic() - started
            if record.errors or record.stage3 is None:
                raise RuntimeError(f"{name}: not a clean run: {record.errors[:3]}")
            events, size = await history_size(handle)
            history = await handle.fetch_history()
            largest = max(p.ByteSize() for e in history.events for p in store.payloads_in(e))
            task, inline = task_sizes(list(history.events))
            table.add(
                name,
                f"{len(record.rounds)} ({record.iteration.terminated_reason})"
                if record.iteration
                else len(record.rounds),
                record.usage.calls,
                events,
                report.kilobytes(size),
                report.kilobytes(largest),
                report.kilobytes(task),
                report.kilobytes(inline),
                report.megabytes((store_bytes(stack) - before) / 1024 / 1024),
                report.seconds(wall),
            )
    finally:
        await asyncio.to_thread(worker.stop)
    return report.Section(
        f"7. Payloads by reference: {models} members, {rounds} rounds (zero-latency models)",
        [table],
        [
            f"Each run may go {rounds} rounds with a token budget of "
            f"{limits.MAX_TOKEN_BUDGET:,} (the most): with the most a run may attach, every "
            "call's prompt is about 2 million tokens, and the budget ends the refinement "
            "first (context_limit_reached).",
            "Every payload of at least COUNCIL_STORE_THRESHOLD bytes (32 KiB) is written to "
            "the payload store (a directory here) and the history holds a reference of a few "
            "hundred bytes: the history's size does not grow with the attachments, and no "
            "workflow task's commands come near gRPC's 4 MiB.",
            "'same task, nothing stored' adds back the stored payloads' sizes: what that "
            "workflow task would have sent before texts travelled by reference.",
            "Each model call carries the attachments as its own argument, the same payload "
            "for every call of a run: the content-addressed store keeps it once (without "
            "COUNCIL_PAYLOAD_KEY; an encrypted payload differs each time it is sealed, and is "
            "then stored once per call until pruned).",
        ],
    )


def task_sizes(events: list[Any]) -> tuple[int, int]:
    """The largest workflow task's commands, and the same had nothing been stored."""
    tasks = task_commands(events)
    largest = max(sum(e.ByteSize() for e in task) for task in tasks)
    inline = max(sum(inline_size(e) for e in task) for task in tasks)
    return largest, inline
