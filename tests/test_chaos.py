"""`make chaos`, short: a few deliberations while the worker is killed twice, the Temporal
server is stopped and restarted once and the simulator storms with 429s, 5xx, hangs and
cut streams. It runs the harness a user runs (bench.chaos, as a subprocess), so that
neither the harness nor the straggler rule can break it unseen: every record must be
whole (no member cut or failed), no completed call made again and no run's history holds a
failed workflow task."""

from __future__ import annotations

import asyncio
import json
import sys

from harness.processes import DATA, ROOT

RUNS = 6


async def test_a_short_chaos_run_keeps_every_record_whole() -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.chaos",
        "--runs",
        str(RUNS),
        "--kills",
        "2",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 600)
    report = out.decode()
    assert process.returncode == 0, report + err.decode()[-3000:]
    table = json.loads((DATA / "chaos" / "results.json").read_text())["table"]
    assert table["runs completed / started"] == f"{RUNS} / {RUNS}"
    assert table["records complete (4 answers, 2 rounds, synthesis, no errors)"] == (
        f"{RUNS} / {RUNS}"
    )
    assert table["worker SIGKILLs / server restarts"] == "2 / 1"
    assert table["completed calls made again"] == "0"
    assert table["runs with a failed workflow task"] == "0"
