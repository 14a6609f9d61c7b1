"""The command line in this process: `starter.main(argv)` with stdout and stderr captured,
as simonw/llm's CLI tests call their command, against the test's dev server, in-process
worker and simulator (tests/test_starter.py runs `python starter.py` itself, as a user
does). The options of `start` are derived from the request's fields (app.settings.flags): every
flag of the interface contract is there, reaches its field, and names itself in a
refusal."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import io
import json
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

import starter
from app.requests.front_door import bounds
from app.settings import environment as app_settings
from app.settings import flags
from app.temporal import connection
from council import limits
from council.models import DeliberationRecord
from runs import finding, following
from tests.attachment_files import encrypted_pdf, pdf, png
from tests.sim_fixtures import wait_until
from tests.temporal_fixtures import Council, temporal_address

Cli = Callable[..., Awaitable[tuple[int, str, str]]]
UNREACHABLE = {"TEMPORAL_ADDRESS": "127.0.0.1:1"}
# The flags of `start` in the interface contract (docs and README), each a field's.
CONTRACT = (
    "--id",
    "--model",
    "--chairman",
    "--max-rounds",
    "--min-rounds",
    "--quality-threshold",
    "--token-budget",
    "--max-cost",
    "--follow-up",
    "--context-tokens",
    "--wait",
    "--json",
    "--criterion",
    "--no-convergence-stop",
    "--temperature",
    "--max-tokens",
    "--call-timeout",
    "--heartbeat-timeout",
    "--max-attempts",
    "--wait-for-all",
    "--straggler-grace",
    "--straggler-factor",
    "--council",
    "--attach",
)


@pytest.fixture(autouse=True)
def settings_read_again() -> Iterator[None]:
    """After the test (and its changes to the environment are undone), the process's
    settings are the environment's again."""
    yield
    app_settings.load()


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Cli:
    """`starter.main(argv)` in a thread (the test's worker keeps this loop), its progress
    polled often: (exit status, stdout, stderr)."""
    monkeypatch.setattr(following, "POLL_SECONDS", 0.05)

    async def run(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        for name, value in (env or {}).items():
            monkeypatch.setenv(name, value)
        code = await asyncio.to_thread(starter.main, list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


# ---- the options, derived from the request ------------------------------------------------


def start_parser() -> argparse.ArgumentParser:
    commands = next(
        action
        for action in starter.parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    return commands.choices["start"]


@pytest.mark.fast
def test_every_contract_flag_is_an_option_of_start() -> None:
    options = {name for action in start_parser()._actions for name in action.option_strings}
    assert set(CONTRACT) <= options


@pytest.mark.fast
def test_each_flag_is_a_field_of_the_request_and_its_help_comes_from_it() -> None:
    parser = start_parser()
    helps = {
        name: action.help or "" for action in parser._actions for name in action.option_strings
    }
    for flag in (*flags.FLAGS, *flags.FOLLOW_UP_FLAGS):
        field = flags.field_at(flag.loc)  # a KeyError: no such field
        assert flags.flag_of(flag.loc) == flag.name
        if not flag.help:
            assert field.description and field.description in helps[flag.name].replace("%%", "%")
        span = bounds(field.metadata)
        if span:
            assert span.lstrip(",") in helps[flag.name], flag.name
    assert f"from {limits.MIN_ROUNDS} to {limits.MAX_ROUNDS} (default 2)" in helps["--max-rounds"]


@pytest.mark.fast
def test_the_flags_given_reach_their_fields() -> None:
    args = start_parser().parse_args(
        [
            "Q?",
            *("--model", "a/1", "--model", "a/2", "--chairman", "a/2"),
            *("--max-rounds", "4", "--min-rounds", "2", "--quality-threshold", "3.5"),
            *("--token-budget", "9000", "--max-cost", "0.25", "--no-convergence-stop"),
            *("--criterion", "accuracy:facts right", "--criterion", "brevity"),
            *("--temperature", "0.3", "--max-tokens", "answer=300", "--max-tokens", "review=200"),
            *("--call-timeout", "45", "--heartbeat-timeout", "5", "--max-attempts", "2"),
            *("--wait-for-all", "--straggler-grace", "1.5", "--straggler-factor", "3"),
            *("--context-tokens", "1000"),
        ]
    )
    request = starter.build_request(args)
    assert (request.models, request.chairman) == (["a/1", "a/2"], "a/2")
    assert (request.max_rounds, request.min_rounds, request.quality_threshold) == (4, 2, 3.5)
    assert (request.token_budget, request.max_cost_usd) == (9000, 0.25)
    assert request.stop_on_convergence is False and request.temperature == 0.3
    assert request.criteria is not None
    assert [(c.name, c.description) for c in request.criteria.criteria] == [
        ("accuracy", "facts right"),
        ("brevity", ""),
    ]
    assert (request.max_tokens.answer, request.max_tokens.review) == (300, 200)
    policy = request.policy
    assert (policy.call_timeout_seconds, policy.heartbeat_timeout_seconds) == (45, 5)
    assert policy.max_attempts == 2
    stragglers = request.stragglers
    assert (stragglers.wait_for_all, stragglers.grace_seconds, stragglers.factor) == (True, 1.5, 3)
    assert request.context_tokens == 1000


@pytest.mark.fast
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["", "--model", "a/b", "--model", "c/d"], "QUESTION must not be empty"),
        (["Q?", "--model", "a/b"], "--model: need 2 to 12 models, got 1"),
        (["Q?", "--model", "a/b", "--model", "a/b"], "'a/b' is listed twice"),
        (["Q?", "--model", "a/b", "--model", "no way"], "--model: 'no way' is not a model id"),
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
        (["Q?", "--temperature", "2.5"], "--temperature must be between 0 and 2 (got 2.5)"),
        (
            ["Q?", "--max-tokens", "answer=²"],
            "--max-tokens answer=N: N must be a whole number (got '²')",
        ),
        (["Q?", "--max-tokens", "answers=9"], "--max-tokens must be STAGE=N, STAGE one of"),
        (["Q?", "--max-tokens", "review=3"], "--max-tokens review=N must be between 16 and"),
        (["Q?", "--criterion", ":why"], "--criterion name must not be empty"),
        (
            ["Q?", "--min-rounds", "3"],
            "--min-rounds must be between 0 and 2, the maximum rounds (got 3)",
        ),
        (["Q?", "--min-rounds", "-1"], "--min-rounds must be between 0 and 5 (got -1)"),
        (["Q?", "--max-cost", "0"], "--max-cost must be more than 0 and at most 10000.0 (got 0.0)"),
        (["Q?", "--max-cost", "lots"], "argument --max-cost: must be a number (got 'lots')"),
        (["Q?", "--call-timeout", "0.5"], "--call-timeout must be between 1 and 3600"),
        (["Q?", "--max-attempts", "99"], "--max-attempts must be between 1 and 20 (got 99)"),
        (["Q?", "--straggler-factor", "0.5"], "--straggler-factor must be between 1.0 and"),
        (["Q?", "--context-tokens", "99999"], "--context-tokens must be between 0 and 32000"),
        (["Q?", "--council", "nope"], "--council: no council 'nope' (known: default)"),
        (["Q?", "--id", "bad id!"], "--id: "),
    ],
)
async def test_bad_input_exits_2_with_one_line_naming_the_flag(
    cli: Cli, args: list[str], message: str
) -> None:
    # An unreachable server proves that validation happens before anything starts.
    code, out, err = await cli("start", *args, env=UNREACHABLE)
    assert (code, out) == (2, "")
    assert err.startswith("starter: ") and err.count("\n") == 1 and message in err, err


@pytest.mark.fast
async def test_a_long_question_comes_from_standard_input(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One argument on the command line is at most 128 KB: "-" reads the question instead.
    too_long = "x" * (limits.QUESTION_MAX_CHARS + 1)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(too_long.encode())))
    code, out, err = await cli("start", "-", env=UNREACHABLE)
    assert (code, out) == (2, "")
    limit = f"QUESTION is too long: at most {limits.QUESTION_MAX_CHARS} characters"
    assert err.count("\n") == 1 and limit in err, err
    # What is not text is refused before anything starts.
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\xff\xfe")))
    code, _, err = await cli("start", "-", env=UNREACHABLE)
    assert code == 2 and "QUESTION: standard input is not UTF-8 text" in err, err


@pytest.mark.fast
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["list", "--limit", "²"], "argument --limit: must be a whole number (got '²')"),
        (["list", "--limit", "0"], "--limit must be between 1 and 1000 (got 0)"),
        (["eval", "x.jsonl", "--limit", "١"], "argument --limit: must be a whole number (got '١')"),
        (["extend", "any-id", "--rounds", "³"], "argument --rounds: must be a whole number"),
        (["extend", "any-id", "--rounds", "9"], "--rounds: "),
        (["stop", "any-id", "--reason", "r" * 501], "--reason: "),
        (["mcp", "--http", "127.0.0.1:⁸⁰"], "--http must be HOST:PORT, such as 127.0.0.1:8765"),
    ],
)
async def test_other_commands_refuse_bad_input_the_same_way(
    cli: Cli, args: list[str], message: str
) -> None:
    code, out, err = await cli(*args, env=UNREACHABLE)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err


@pytest.mark.fast
async def test_an_unreachable_server_is_one_line_naming_it(cli: Cli) -> None:
    for command in (["start", "Q?"], ["list"], ["show", "some-run"], ["watch", "some-run"]):
        code, out, err = await cli(*command, env=UNREACHABLE)
        assert (code, out) == (2, "")
        assert err.startswith("starter: cannot reach the Temporal server at 127.0.0.1:1")
        assert err.count("\n") == 1
    # The reason in a person's words, not the SDK's debug text.
    assert err.endswith("(namespace default): connection refused\n"), err


@pytest.mark.fast
async def test_why_a_server_cannot_be_reached_is_said_plainly(cli: Cli) -> None:
    code, _, err = await cli("list", env={"TEMPORAL_ADDRESS": "council-test.invalid:7233"})
    assert code == 2 and "council-test.invalid:7233 (namespace default): the name does not" in err
    assert "tonic" not in err and "ConnectError" not in err, err
    # Something that is not a Temporal server answers the port (an HTTP server, the Web UI).
    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]

        def answer_http() -> None:
            with contextlib.suppress(OSError):
                while True:
                    conn, _ = listening.accept()
                    with conn:
                        conn.recv(1024)
                        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi")

        threading.Thread(target=answer_http, daemon=True).start()
        code, _, err = await cli("list", env={"TEMPORAL_ADDRESS": f"127.0.0.1:{port}"})
    assert code == 2 and "something answers there, but not a Temporal server's gRPC" in err, err


# ---- against the server -------------------------------------------------------------------


async def test_start_watch_show_list(cli: Cli, council: Council, cli_env: dict[str, str]) -> None:
    code, out, err = await cli("start", "Why is the sky blue?", "--id", "sky-blue-1", env=cli_env)
    assert code == 0 and out == "sky-blue-1\n", err
    assert "watch: python starter.py watch sky-blue-1" in err

    code, _, err = await cli("watch", "sky-blue-1")
    assert code == 0
    assert "round_start" not in err  # rendered lines, not raw kinds
    assert "▶ stage 2 review" in err and "✔ finished" in err
    assert "↻ review round 1: every member reviews" in err
    assert "↳ sim/cirrus changed its answer" in err

    code, out, _ = await cli("show", "sky-blue-1")
    assert code == 0
    assert out.startswith("# Council deliberation `sky-blue-1`")
    assert "## Final answer (chairman: sim/atlas)" in out and "## Round 1" in out

    code, out, _ = await cli("show", "sky-blue-1", "--json")
    assert code == 0 and DeliberationRecord.model_validate_json(out).id == "sky-blue-1"

    code, out, _ = await cli("list", "--json")
    rows = {row["id"]: row for row in json.loads(out)}
    assert rows["sky-blue-1"]["status"] == "completed"
    assert rows["sky-blue-1"]["reason"] == "quality_threshold_met"

    code, _, err = await cli("show", "no-such-run")
    assert code == 2 and "no deliberation with id 'no-such-run'" in err

    # The id names one deliberation for good.
    code, out, err = await cli("start", "Again?", "--id", "sky-blue-1")
    assert (code, out) == (2, "") and err.startswith("starter: --id: 'sky-blue-1' already names")


async def test_start_wait_prints_the_answer_and_what_it_cost(
    cli: Cli, council: Council, cli_env: dict[str, str]
) -> None:
    council.sim.set_faults({"*": {"cost_per_million_tokens": None}})
    code, out, err = await cli(
        "start", "Cats or dogs?", "--wait", "--max-cost", "0.5", "--max-rounds", "1", env=cli_env
    )
    assert code == 0, err
    assert out.strip() and "stage 1 answer" in err and "finished" in err
    assert "cost not reported" in err and "$0.0000" not in err
    assert "! the provider reports no cost: the cost budget cannot end the loop" in err
    council.sim.set_faults({"*": {"cost_per_million_tokens": 1000.0}})
    code, out, err = await cli("start", "Cats or dogs?", "--wait", "--json")
    assert code == 0 and "cost not reported" not in err
    record = DeliberationRecord.model_validate_json(out)
    assert record.usage.cost_usd is not None and record.status == "completed"


async def test_waiting_for_a_worker_is_said_once(
    cli: Cli,
    council: Council,
    cli_env: dict[str, str],
    temporal: WorkflowEnvironment,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run on a task queue no worker polls: `start --wait` says so once, and goes on when
    a worker comes."""
    from tests.temporal_fixtures import council_worker

    monkeypatch.setattr(finding, "QUERY_TIMEOUT", timedelta(seconds=0.3))
    queue = "cli-waits-for-a-worker"
    env = {**cli_env, "COUNCIL_TASK_QUEUE": queue}
    waiting = asyncio.create_task(
        cli("start", "Anyone there?", "--id", "waits-1", "--wait", "--max-rounds", "1", env=env)
    )
    for _ in range(200):  # until the run exists
        try:
            await finding.find(temporal.client, "waits-1")
            break
        except finding.NoSuchDeliberation:
            await asyncio.sleep(0.05)
    await asyncio.sleep(1.5)  # queries that no worker answers (each given up after 0.3 s)
    assert not waiting.done()
    # A worker comes: the queries are answered again, the last one (the closed run's final
    # events) within the production timeout, however slow the machine.
    monkeypatch.setattr(finding, "QUERY_TIMEOUT", timedelta(seconds=5))
    async with council_worker(temporal.client, council.sim, queue=queue):
        code, out, err = await asyncio.wait_for(waiting, 60)
    assert out.strip()  # the answer
    assert code == 0, err
    assert err.count(following.WAITING) == 1 and "✔ finished" in err, err


async def test_stop_from_the_command_line(
    cli: Cli, council: Council, cli_env: dict[str, str]
) -> None:
    # Slow calls: the run is still in its first stages when the stop comes.
    council.sim.set_faults({"*": {"latency": 1.5}})
    code, _, _ = await cli("start", "Tabs or spaces?", "--id", "tabs-1", env=cli_env)
    assert code == 0
    await wait_until(lambda: council.sim.log()["total"] >= 4, timeout=10)
    code, _, err = await cli("stop", "tabs-1", "--reason", "seen enough")
    assert code == 0, err
    handle = council.client.get_workflow_handle("tabs-1", result_type=DeliberationRecord)
    record = await handle.result()
    assert record.iteration.terminated_reason == "user_stopped"
    assert record.stop_reason == "seen enough"
    # A finished run: refused in one line with status 2, as extend and critique refuse.
    code, _, err = await cli("stop", "tabs-1")
    assert code == 2 and err == (
        "starter: tabs-1: this deliberation has already finished (completed): nothing to stop\n"
    ), err
    code, _, err = await cli("extend", "tabs-1", "--rounds", "4")
    assert code == 2 and err.startswith("starter: ") and err.count("\n") == 1, err
    # watch and list say the same of a run the user stopped.
    code, _, err = await cli("watch", "tabs-1")
    assert code == 0 and err.endswith(
        "tabs-1: stopped (the record: python starter.py show tabs-1)\n"
    )
    code, out, _ = await cli("list", "--json", "--filter", "tabs-1")
    assert [row["status"] for row in json.loads(out)] == ["stopped"]


async def test_a_failing_run_ends_watch_and_wait_with_status_1(
    cli: Cli, council: Council, cli_env: dict[str, str]
) -> None:
    council.sim.set_faults({"*": {"errors": {"401": 1.0}}})
    code, _, err = await cli("start", "Doomed?", "--id", "doomed-1", "--wait", env=cli_env)
    assert code == 1
    assert "✗ sim/atlas failed" in err
    assert "deliberation doomed-1 failed: fewer than two models answered (0 of 4)" in err
    code, _, err = await cli("watch", "doomed-1")
    assert code == 1 and "doomed-1: failed" in err
    code, _, err = await cli("show", "doomed-1")
    assert code == 1 and err.startswith("doomed-1: failed: fewer than two models answered")


async def test_a_follow_up_that_cannot_be_made_names_the_flag(
    cli: Cli, council: Council, cli_env: dict[str, str]
) -> None:
    code, _, err = await cli("start", "Why?", "--follow-up", "no-such-run", env=cli_env)
    assert code == 2 and err.count("\n") == 1
    assert err == "starter: --follow-up: no deliberation with id 'no-such-run' to follow up\n"


async def test_start_on_a_server_no_worker_has_used_yet(cli: Cli) -> None:
    """A fresh server lacks Council's search attributes until a worker registers them: the
    starter registers them itself rather than failing with a traceback."""
    from harness.processes import temporal_binary

    fresh = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(), dev_server_log_level="error"
    )
    try:
        env = {"TEMPORAL_ADDRESS": temporal_address(fresh), "COUNCIL_MODELS": "sim/a,sim/b"}
        code, out, err = await cli("start", "Does a fresh server take it?", env=env)
        assert code == 0, err
        assert out.startswith("council-does-a-fresh-server-take-it"), out
    finally:
        await fresh.shutdown()


@pytest.mark.fast
def test_a_temporal_error_has_one_description() -> None:
    """What every surface says of a Temporal error (the CLI's line, the page's notice,
    the API's 503 and 502, MCP's tool error): the server's address, and whether it did not
    answer or refused."""
    down = RPCError("connection refused", RPCStatusCode.UNAVAILABLE, b"")
    refused = RPCError("no", RPCStatusCode.PERMISSION_DENIED, b"")
    assert connection.unavailable(down) and not connection.unavailable(refused)
    assert connection.described(down, "temporal.internal:7233") == (
        "the Temporal server at temporal.internal:7233 does not answer: start it (make server) "
        "or check TEMPORAL_ADDRESS"
    )
    assert connection.described(refused, "temporal.internal:7233") == (
        "the Temporal server at temporal.internal:7233 refused the request (PERMISSION_DENIED)"
    )


# ---- attachments ------------------------------------------------------------------------


async def test_start_attach_reads_text_csv_a_pdf_and_an_image(
    cli: Cli, council: Council, cli_env: dict[str, str], tmp_path: Path
) -> None:
    files = {
        "brief.md": b"# Brief\nShip on Friday.\n",
        "sales.csv": b"month,units\njan,12\nfeb,30\n",
        "report.pdf": pdf("Quarterly revenue rose 12 percent"),
        "chart.png": png(),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    attached = [arg for name in files for arg in ("--attach", str(tmp_path / name))]
    code, out, err = await cli(
        "start",
        "What do these files say?",
        *attached,
        "--max-rounds",
        "1",
        "--wait",
        "--json",
        env=cli_env,
    )
    assert code == 0, err
    record = DeliberationRecord.model_validate_json(out)
    assert [(a.name, a.media_type, a.size, a.sha256) for a in record.attachments] == [
        (name, kind, len(data), hashlib.sha256(data).hexdigest())
        for (name, data), kind in zip(
            files.items(),
            ["text/markdown", "text/csv", "application/pdf", "image/png"],
            strict=True,
        )
    ]
    # Every call showed them: the texts whole, the PDF as its text, the image named to the
    # members (the default provider takes no images).
    for call in council.sim.log()["entries"]:
        shown = {a["name"]: a for a in call["attachments"]}
        assert shown["sales.csv"]["sha256"] == hashlib.sha256(files["sales.csv"]).hexdigest()
        text = b"Quarterly revenue rose 12 percent"
        assert shown["report.pdf"]["sha256"] == hashlib.sha256(text).hexdigest()
        assert shown["chart.png"]["shown"] == "unseen"
    code, out, _ = await cli("show", record.id)
    assert "## Attachments" in out and "report.pdf (application/pdf" in out


async def test_start_attach_refuses_in_one_line_before_anything_starts(
    cli: Cli, tmp_path: Path
) -> None:
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)))
    locked = tmp_path / "locked.pdf"
    locked.write_bytes(encrypted_pdf("secret"))
    small = tmp_path / "a.txt"
    small.write_text("a")
    cases = [
        (["--attach", str(binary)], "--attach: blob.bin is a binary file that is neither a PDF"),
        (["--attach", str(locked)], "--attach: locked.pdf is an encrypted PDF"),
        (["--attach", str(tmp_path / "missing.txt")], "--attach: cannot read"),
        (
            ["--attach", "https://example.com/memo.pdf"],
            "--attach: https://example.com/memo.pdf is a URL, and the council does not fetch "
            "URLs: download it first and give the file's path",
        ),
        (
            ["--attach", str(small)] * (limits.MAX_ATTACHMENTS + 1),
            f"--attach: at most {limits.MAX_ATTACHMENTS} files per run (got 11)",
        ),
    ]
    for args, message in cases:
        code, out, err = await cli("start", "Q?", *args, env=UNREACHABLE)
        assert (code, out) == (2, "")
        assert err.startswith(f"starter: {message}") and err.count("\n") == 1, err
