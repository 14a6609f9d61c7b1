"""The command line as a user runs it: `python starter.py ...` in a subprocess, for what
only a real process shows (its exit status, stdout and stderr kept apart, nothing after
the intended exit). Everything else about the CLI is tested in this process:
tests/test_cli.py."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid

import pytest

from council.models import DeliberationRecord
from harness.processes import ROOT
from tests.temporal_fixtures import Council, temporal_address
from tests.temporal_fixtures import exec_starter as starter  # the interpreter started anew


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["start", "", "--model", "a/b", "--model", "c/d"], "QUESTION must not be empty"),
        (["start", "Q?", "--max-rounds", "²"], "argument --max-rounds: must be a whole number"),
        (["list", "--limit", "١"], "argument --limit: must be a whole number (got '١')"),
    ],
)
async def test_bad_input_exits_2_with_one_line(args: list[str], message: str) -> None:
    # An unreachable server proves that validation happens before anything starts.
    code, out, err = await starter(*args, env={"TEMPORAL_ADDRESS": "127.0.0.1:1"})
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


# What the command line's connection does with the SDK core's own log lines, such as its
# warning for a start input over 512 KiB (the same runtime as `start`, on a task queue no
# worker polls; without the payload store, which would keep the input small).
BIG_START = """
import sys
from temporalio.contrib.pydantic import pydantic_data_converter
from app.temporal import connection

async def main():
    # Without the payload store, so that the input stays in the request and is large.
    client = await connection.connect(data_converter=pydantic_data_converter)
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
