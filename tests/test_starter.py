"""The command line as a user runs it: `python starter.py ...` in a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid

import pytest

from council.models import DeliberationRecord
from harness.processes import ROOT
from tests.sim_fixtures import wait_until
from tests.temporal_fixtures import Council, starter, temporal_address


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["", "--model", "a/b", "--model", "c/d"], "QUESTION must not be empty"),
        (["Q?", "--model", "a/b"], "--model: need 2 to 12 models, got 1"),
        (["Q?", "--model", "a/b", "--model", "a/b"], "'a/b' is listed twice"),
        (["Q?", "--max-rounds", "9"], "--max-rounds must be between 1 and 5 (got 9)"),
        (
            ["Q?", "--quality-threshold", "7.5"],
            "--quality-threshold must be between 0.0 and 5.0 (got 7.5)",
        ),
        (["Q?", "--token-budget", "0"], "--token-budget must be between 1 and"),
        (
            ["Q?", "--max-rounds", "two"],
            "argument --max-rounds: must be a whole number (got 'two')",
        ),
        # Only ASCII digits are numbers: "²".isdigit() holds but int("²") fails, and int()
        # would read Arabic-Indic digits.
        (["Q?", "--max-rounds", "²"], "argument --max-rounds: must be a whole number (got '²')"),
        (["Q?", "--max-rounds", "١"], "argument --max-rounds: must be a whole number (got '١')"),
        (["Q?", "--temperature", "nan"], "argument --temperature: must be a number (got 'nan')"),
        (
            ["Q?", "--max-tokens", "answer=²"],
            "--max-tokens answer=N: N must be a whole number (got '²')",
        ),
        (
            ["Q?", "--min-rounds", "3"],
            "--min-rounds must be between 0 and 2, the maximum rounds (got 3)",
        ),
        (["Q?", "--min-rounds", "-1"], "--min-rounds must be between 0 and 5 (got -1)"),
        (["Q?", "--max-cost", "0"], "--max-cost must be more than 0 and at most 10000.0 (got 0.0)"),
        (["Q?", "--max-cost", "lots"], "argument --max-cost: must be a number (got 'lots')"),
        (["x" * 20_001], "QUESTION is too long: at most 20000 characters"),
    ],
)
async def test_bad_input_exits_2_with_one_line(args: list[str], message: str) -> None:
    # An unreachable server proves that validation happens before anything starts.
    code, out, err = await starter("start", *args, env={"TEMPORAL_ADDRESS": "127.0.0.1:1"})
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and message in err, err


async def test_unreachable_server_names_the_address() -> None:
    code, out, err = await starter("start", "Q?", env={"TEMPORAL_ADDRESS": "127.0.0.1:1"})
    assert code == 2 and out == ""
    assert err.startswith("starter: cannot reach the Temporal server at 127.0.0.1:1")
    assert err.count("\n") == 1
    code, _, err = await starter("list", env={"TEMPORAL_ADDRESS": "127.0.0.1:1"})
    assert code == 2 and "127.0.0.1:1" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["list", "--limit", "²"], "argument --limit: must be a whole number (got '²')"),
        (["eval", "x.jsonl", "--limit", "١"], "argument --limit: must be a whole number (got '١')"),
        (["extend", "any-id", "--rounds", "³"], "argument --rounds: must be a whole number"),
        (["mcp", "--http", "127.0.0.1:⁸⁰"], "--http must be HOST:PORT, such as 127.0.0.1:8765"),
    ],
)
async def test_a_number_in_other_digits_exits_2_naming_the_flag(
    args: list[str], message: str
) -> None:
    code, out, err = await starter(*args, env={"TEMPORAL_ADDRESS": "127.0.0.1:1"})
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err


# What the command line's connection does with a start input over the SDK's 512 KiB
# warning size (the same client code as `start`, on a task queue no worker polls).
BIG_START = """
import sys
from app import connection

async def main():
    client = await connection.connect()
    await client.start_workflow(
        "Nothing", "x" * 600_000, id=sys.argv[1], task_queue="nobody-polls-this"
    )
    print('{"started": true}')

connection.run(main())
"""


async def test_sdk_warnings_go_to_stderr_and_stdout_stays_json(temporal) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        BIG_START,
        f"big-{uuid.uuid4().hex[:8]}",
        cwd=ROOT,
        env={**os.environ, "TEMPORAL_ADDRESS": temporal_address(temporal)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    assert json.loads(out) == {"started": True}  # nothing but the command's own output
    assert "TMPRL1103" in err.decode()  # the warning is still there to see


async def test_start_wait_json_prints_the_record(council: Council, cli_env: dict[str, str]) -> None:
    code, out, err = await starter(
        "start", "Is a hot dog a sandwich?", "--wait", "--json", env=cli_env
    )
    assert code == 0, err
    record = DeliberationRecord.model_validate_json(out)
    assert record.query == "Is a hot dog a sandwich?"
    assert record.stage3 is not None and record.status == "completed"
    assert json.loads(out)["role"] == "assistant"
    # Progress went to stderr, the record alone to stdout.
    assert "stage 1 answer" in err and "finished" in err


async def test_the_cost_line_says_when_the_provider_reports_no_cost(
    council: Council, cli_env: dict[str, str]
) -> None:
    council.sim.set_faults({"*": {"cost_per_million_tokens": None}})
    code, _, err = await starter(
        "start", "Cats or dogs?", "--wait", "--max-cost", "0.5", env=cli_env
    )
    assert code == 0, err
    assert "cost not reported" in err and "$0.0000" not in err
    assert "! the provider reports no cost: the cost budget cannot end the loop" in err
    council.sim.set_faults({"*": {"cost_per_million_tokens": 1000.0}})
    code, _, err = await starter("start", "Cats or dogs?", "--wait", env=cli_env)
    assert code == 0 and "cost not reported" not in err
    assert "· cost $" in err


async def test_start_watch_show_list(council: Council, cli_env: dict[str, str]) -> None:
    code, out, err = await starter(
        "start", "Why is the sky blue?", "--id", "sky-blue-1", env=cli_env
    )
    assert code == 0 and out == "sky-blue-1\n", err

    code, _, err = await starter("watch", "sky-blue-1", env=cli_env)
    assert code == 0
    assert "round_start" not in err  # rendered lines, not raw kinds
    assert "▶ stage 2 review" in err and "✔ finished" in err
    assert "↻ review round 1: every member reviews" in err
    assert "↳ sim/cirrus changed its answer" in err

    code, out, _ = await starter("show", "sky-blue-1", env=cli_env)
    assert code == 0
    assert out.startswith("# Council deliberation `sky-blue-1`")
    assert "## Final answer (chairman: sim/atlas)" in out and "## Round 1" in out

    code, out, _ = await starter("show", "sky-blue-1", "--json", env=cli_env)
    assert code == 0 and DeliberationRecord.model_validate_json(out).id == "sky-blue-1"

    code, out, _ = await starter("list", "--json", env=cli_env)
    rows = {row["id"]: row for row in json.loads(out)}
    assert rows["sky-blue-1"]["status"] == "completed"
    assert rows["sky-blue-1"]["reason"] == "quality_threshold_met"

    code, _, err = await starter("show", "no-such-run", env=cli_env)
    assert code == 2 and "no deliberation with id 'no-such-run'" in err


async def test_stop_from_the_command_line(council: Council, cli_env: dict[str, str]) -> None:
    # Slow calls: the run is still in its first stages when the second CLI process starts.
    council.sim.set_faults({"*": {"latency": 1.5}})
    code, _out, _ = await starter("start", "Tabs or spaces?", "--id", "tabs-1", env=cli_env)
    assert code == 0
    await wait_until(lambda: council.sim.log()["total"] >= 4, timeout=10)
    code, _, err = await starter("stop", "tabs-1", "--reason", "seen enough", env=cli_env)
    assert code == 0, err
    handle = council.client.get_workflow_handle("tabs-1", result_type=DeliberationRecord)
    record = await handle.result()
    assert record.iteration.terminated_reason == "user_stopped"
    assert record.stop_reason == "seen enough"
    code, _, err = await starter("stop", "tabs-1", env=cli_env)
    assert code == 1 and "tabs-1: this deliberation has already finished" in err


async def test_a_failing_run_ends_watch_and_wait_with_status_1(
    council: Council, cli_env: dict[str, str]
) -> None:
    council.sim.set_faults({"*": {"errors": {"401": 1.0}}})
    code, _, err = await starter(
        "start", "Doomed?", "--id", "doomed-1", "--wait", env=cli_env, timeout=30
    )
    assert code == 1
    assert "✗ sim/atlas failed" in err
    assert "deliberation doomed-1 failed: fewer than two models answered (0 of 4)" in err, err[
        err.index("deliberation doomed-1 failed") :
    ][:200]
    code, _, err = await starter("watch", "doomed-1", env=cli_env, timeout=30)
    assert code == 1 and "doomed-1: failed" in err


async def test_start_on_a_server_no_worker_has_used_yet() -> None:
    """A fresh server lacks Council's search attributes until a worker registers them: the
    starter registers them itself rather than failing with a traceback."""
    from temporalio.testing import WorkflowEnvironment

    from harness.processes import temporal_binary

    fresh = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(), dev_server_log_level="error"
    )
    try:
        env = {"TEMPORAL_ADDRESS": temporal_address(fresh), "COUNCIL_MODELS": "sim/a,sim/b"}
        code, out, err = await starter("start", "Does a fresh server take it?", env=env)
        assert code == 0, err
        assert out.startswith("council-does-a-fresh-server-take-it"), out
    finally:
        await fresh.shutdown()
