"""The Council command line: start, stop, watch, show and list deliberations.

    python starter.py start "QUESTION" [--model M]... [--wait] [--json]
    python starter.py start "QUESTION" --follow-up ID [--context-tokens N]
    python starter.py extend ID --rounds N
    python starter.py critique ID --model M "TEXT"
    python starter.py stop ID [--reason TEXT]
    python starter.py watch ID
    python starter.py show ID [--json | --markdown]
    python starter.py list [--filter TEXT | --thread ID]
    python starter.py eval DATASET.jsonl [--concurrency N] [--limit N] [--out DIR] [--judge M]
                                         [--arms {council,all}] [--max-samples N]
    python starter.py mcp [--http HOST:PORT]
    python starter.py doctor [--json]
    python starter.py store prune [--grace SECONDS] [--dry-run] [--json]

Exit status: 0 done, 1 the deliberation (for eval: any problem's; for doctor: any check)
failed or its texts cannot be read from the payload store, 2 bad input or the server is
unreachable.
"""

from __future__ import annotations

# First: a Python without Council's packages is told so in one line, and the fix.
from app.installation import dependencies  # noqa: F401  # isort: skip

import argparse
import json
import sys
from collections.abc import Callable, Coroutine
from typing import Any, NoReturn

from rich.console import Console
from temporalio.client import WorkflowFailureError
from temporalio.service import RPCError

from app.installation import commands
from app.requests import front_door
from app.settings import config as app_config
from app.settings import environment as app_settings
from app.settings import flags
from app.store import store
from app.temporal import connection
from app.views.record_view import record_view
from app.views.render import event_line, record_markdown
from council import numbers
from council.config import ConfigProblem
from council.ids import id_problem, tenant_problem
from council.models import DeliberationRecord, DeliberationRequest
from council.steering import HumanCritique, reason_problem, rounds_problem, text_problem
from evaluation import cli as evaluation
from runs import finding, following, listing, starting, steering
from runs.priority import Launch, Urgency
from runs.stuck import RunStuck

MAX_LIST_LIMIT = 1_000

err = Console(stderr=True, highlight=False, soft_wrap=True)


class UsageError(Exception):
    """Bad input or an unreachable server: exit status 2 with a one-line reason."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_request(args: argparse.Namespace) -> DeliberationRequest:
    """The request, through the front door: the council's options (--council, else the
    default council), with the flags given on top."""
    follow_up = flags.FOLLOW_UP_FLAGS if hasattr(args, "follow_up") else ()
    try:
        given = flags.options(args, (*flags.FLAGS, *follow_up))
        return front_door.compose(
            question_of(args), given, council=args.council, attachments=flags.attachments(args)
        )
    except flags.FlagError as error:
        raise UsageError(str(error)) from None
    except front_door.Refused as refused:
        raise UsageError(refused.line(flags.flag_of)) from None


async def check_tools(request: DeliberationRequest) -> None:
    """A usage error when an MCP entry the request names offers none of its tools (asked
    of its server now, as a run would: app.requests.front_door.check_tools)."""
    if not request.tools:
        return
    # Imported here: only a start with tools asks their servers.
    from doctor.tools import offer_problem

    try:
        await front_door.check_tools(request, app_config.load(), offer_problem)
    except front_door.Refused as refused:
        raise UsageError(refused.line(flags.flag_of)) from None


def add_launch_flags(parser: argparse.ArgumentParser, batch_only: bool = False) -> None:
    """--priority and --tenant: how urgent a run is and whose (runs.priority)."""
    if not batch_only:
        parser.add_argument(
            "--priority",
            choices=[u.value for u in Urgency],
            default=Urgency.INTERACTIVE.value,
            help="interactive (the default: a person waits) goes ahead of batch work when "
            "workers are busy",
        )
    parser.add_argument(
        "--tenant",
        metavar="NAME",
        type=tenant_argument,
        help="whose run: runs of different tenants share busy workers fairly (default: "
        "COUNCIL_TENANT, else none)",
    )


def tenant_argument(value: str) -> str:
    problem = tenant_problem(value)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def launch_of(args: argparse.Namespace) -> Launch:
    urgency = Urgency(getattr(args, "priority", Urgency.BATCH.value))
    return Launch(urgency, args.tenant or app_settings.current().tenant)


def question_of(args: argparse.Namespace) -> str:
    """The question as given, or, for "-", read from standard input (a long question:
    the command line takes at most 128 KB in one argument)."""
    if args.question != "-":
        return str(args.question)
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError("QUESTION: standard input is not UTF-8 text") from None


async def follow(handle: Any) -> bool:
    """Print progress events to stderr until the deliberation closes; False (said in one
    line) when its workflow task keeps failing: it would never close on its own."""
    try:
        async for event in following.events(handle):
            if isinstance(event, str):
                err.print(f"[dim]{event}[/dim]")
            else:
                err.print(event_line(event), markup=False)
    except RunStuck as problem:
        err.print(f"{handle.id}: running, but {stuck_hint(handle.id, problem)}", markup=False)
        return False
    return True


def stuck_hint(workflow: str, problem: Exception) -> str:
    """A stuck run's failure, and what ends it."""
    return f"{problem} ({command()} stop {workflow} ends it)"


async def print_outcome(handle: Any, as_json: bool) -> int:
    try:
        record: DeliberationRecord = await handle.result()
    except Exception as error:  # the workflow failed: say why in one line
        reason = finding.failure_reason(error)
        err.print(f"deliberation {handle.id} failed: {reason}", markup=False)
        return 1
    if as_json:
        print(record.model_dump_json(indent=2))
    else:
        answer = record.stage3.response if record.stage3 else "(no synthesis)"
        print(answer)
        ended = record.iteration.terminated_reason
        view = record_view(record)
        said = [view.answers_agree, view.agreement.verdict if view.agreement else None]
        said += [view.gate.saved] if view.gate and view.gate.saved else []
        if any(said):
            err.print("\n" + "\n".join(line for line in said if line), markup=False)
        err.print(
            f"\nended: {ended} · {record.usage.total_tokens:,} tokens in {record.usage.calls} "
            "calls"
            f" · {record.usage.cost_line()} · full record: {command()} show {record.id}",
            markup=False,
        )
    return 0


async def cmd_start(args: argparse.Namespace) -> int:
    request = build_request(args)
    await check_tools(request)
    if args.id is not None and id_problem(args.id):
        raise UsageError(f"--id: {id_problem(args.id)}")
    client = await connection.connect()
    if args.follow_up:
        try:
            thread = await starting.thread_of(client, args.follow_up, request.context_tokens)
            request = front_door.in_thread(request, thread)
        except starting.FollowUpError as error:
            raise UsageError(f"--follow-up: {error}") from None
        except front_door.Refused as refused:
            raise UsageError(f"--follow-up: {refused}") from None
    try:
        handle = await starting.start(
            client, request, connection.task_queue(), args.id, launch_of(args)
        )
    except starting.IdTaken as taken:
        raise UsageError(f"--id: {taken}") from None
    wid = handle.id
    ui = starting.ui_url(client, wid, app_settings.current().ui_url)
    if not args.wait:
        print(wid)
        err.print(f"watch: {command()} watch {wid}\nUI:    {ui}", markup=False)
        return 0
    err.print(f"deliberation {wid} started · UI: {ui}", markup=False)
    if not await follow(handle):
        return 1
    return await print_outcome(handle, args.json)


async def _find(workflow: str) -> finding.Found:
    """The deliberation with this id; a usage error if there is none."""
    client = await connection.connect()
    try:
        return await finding.find(client, workflow)
    except finding.NoSuchDeliberation as missing:
        raise UsageError(f"{missing} on {connection.address()}") from None


async def cmd_stop(args: argparse.Namespace) -> int:
    if reason_problem(args.reason):
        raise UsageError(f"--reason: {reason_problem(args.reason)}")
    found = await _find(args.id)
    try:
        stopped = await steering.stop(found, args.reason)
    except steering.AlreadyFinished as finished:
        # A command that cannot act on a finished run is refused as extend and critique are.
        raise UsageError(f"{args.id}: {finished}") from None
    err.print(f"{args.id}: {stopped.line}", markup=False)
    return 0


async def cmd_watch(args: argparse.Namespace) -> int:
    found = await _find(args.id)
    # A closed run replays its events, if a worker answers queries.
    if not await follow(found.handle):
        return 1
    status = await finding.shown_status_of(found.handle)  # as `list` shows it
    err.print(f"{args.id}: {status} (the record: {command()} show {args.id})", markup=False)
    return 0 if status in ("completed", "stopped", "running") else 1


async def cmd_show(args: argparse.Namespace) -> int:
    found = await _find(args.id)
    try:
        record = await finding.read_record(found.handle)
    except RPCError:
        raise  # the server: main says so
    except RunStuck as problem:
        err.print(f"{args.id}: running, but {stuck_hint(args.id, problem)}", markup=False)
        return 1
    except Exception as error:
        err.print(f"{args.id}: {found.status}: {finding.failure_reason(error)}", markup=False)
        # What a failed or terminated run had, where it ended with its record.
        failed = error if isinstance(error, WorkflowFailureError) else None
        kept = finding.failed_record(failed) if failed else None
        if kept is not None:
            print(kept.model_dump_json(indent=2) if args.json else record_markdown(kept))
        return 1
    print(record.model_dump_json(indent=2) if args.json else record_markdown(record))
    return 0


async def cmd_list(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= MAX_LIST_LIMIT:
        raise UsageError(f"--limit must be between 1 and {MAX_LIST_LIMIT} (got {args.limit})")
    client = await connection.connect()
    if args.thread:
        rows = await listing.list_thread(client, args.thread)
    else:
        rows = await listing.list_deliberations(client, args.limit, args.filter or "")
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "id": row.id,
                        "status": row.shown,
                        "stuck": row.stuck,
                        "round": row.round,
                        "reason": row.where,
                        "agreement": row.agreement,
                        "started": row.started.isoformat() if row.started else None,
                        "question": row.question,
                    }
                    for row in rows
                ],
                indent=2,
            )
        )
        return 0
    if not rows:
        err.print("no deliberations yet", markup=False)
        return 0
    width = max(len(r.id) for r in rows)
    print(
        f"{'ID':<{width}}  {'STATUS':<10} {'ROUND':<5} {'REASON / STAGE':<24} "
        f"{'AGREEMENT':<9} STARTED"
    )
    for row in rows:
        started = row.started.strftime("%Y-%m-%d %H:%M:%S") if row.started else "-"
        rnd = "-" if row.round is None else str(row.round)
        agreed = row.agreement or "-"
        print(f"{row.id:<{width}}  {row.shown:<10} {rnd:<5} {row.where:<24} {agreed:<9} {started}")
    for row in rows:
        if row.stuck:
            err.print(f"{row.id}: {row.stuck} ({command()} stop {row.id} ends it)", markup=False)
    return 0


async def _steer(workflow: str, steer: Any, argument: Any) -> Any:
    """A steering update (steering.set_max_rounds or add_critique) that applies
    within seconds or not at all; a usage error when it is refused or no worker takes it."""
    found = await _find(workflow)
    try:
        return await steer(found, argument)
    except steering.SteeringRefused as refused:
        raise UsageError(str(refused)) from None


async def cmd_extend(args: argparse.Namespace) -> int:
    problem = rounds_problem(args.rounds)
    if problem:
        raise UsageError(f"--rounds: {problem}")
    rounds = await _steer(args.id, steering.set_max_rounds, args.rounds)
    print(rounds)
    err.print(f"{args.id}: the maximum is now {rounds} refinement round(s)", markup=False)
    return 0


async def cmd_critique(args: argparse.Namespace) -> int:
    problem = text_problem(args.text)
    if problem:
        raise UsageError(problem)
    critique = HumanCritique(model=args.model, text=args.text)
    print(await _steer(args.id, steering.add_critique, critique))
    return 0


async def cmd_eval(args: argparse.Namespace) -> int:
    template = build_request(
        argparse.Namespace(**{**vars(args), "question": evaluation.TEMPLATE_QUESTION})
    )
    await check_tools(template)
    try:
        plan = evaluation.prepare(args, template, connection.task_queue())
    except evaluation.BadInput as error:
        raise UsageError(str(error)) from None
    client = await connection.connect()
    return await evaluation.execute(client, plan, args.json, err)


async def cmd_doctor(args: argparse.Namespace) -> int:
    # Imported here: the provider checks' HTTP client would slow every other command's start.
    import doctor

    checks = await doctor.diagnose()
    if args.json:
        print(json.dumps([check.model_dump(mode="json") for check in checks], indent=2))
    else:
        for check in checks:
            print(doctor.line(check))
    return 0 if doctor.healthy(checks) else 1


async def cmd_mcp(args: argparse.Namespace) -> int:
    # Imported here: the MCP SDK would slow every other command's start.
    from mcp_server import serve
    from mcp_server.inputs import Problem

    try:
        await serve.serve(args.http)
    except Problem as problem:
        raise UsageError(str(problem)) from None
    return 0


async def cmd_store_prune(args: argparse.Namespace) -> int:
    from app.store import prune

    warning = prune.grace_floor_warning(args.grace)
    if warning:
        print(f"{command().removeprefix('python ')}: {warning}", file=sys.stderr)
    client = await connection.connect()
    try:
        pruned = await prune.prune(client, args.grace, dry_run=args.dry_run)
    except prune.PruneError as error:
        print(f"{command().removeprefix('python ')}: {error}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(pruned.as_json(), indent=2))
    else:
        print(pruned.summary())
    return 0


async def cmd_providers(args: argparse.Namespace) -> int:
    """The model calls paused while their provider is down; `resume` unpauses them."""
    from activities import outage
    from workflows.registry import MODEL_CALLS

    client = await connection.connect()
    paused = await outage.paused_calls(client, MODEL_CALLS, args.provider)
    if args.action == "resume":
        resumed = await outage.resume(client, paused)
        print(f"resumed {resumed} paused call(s)")
        return 0
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "provider": call.provider,
                        "workflow_id": call.workflow_id,
                        "activity_id": call.activity_id,
                        "paused_since": call.since.isoformat() if call.since else None,
                    }
                    for call in paused
                ],
                indent=2,
            )
        )
        return 0
    if not paused:
        print("no call is paused: every provider answers (or none has failed enough)")
        return 0
    for provider in sorted({call.provider for call in paused}):
        mine = [call for call in paused if call.provider == provider]
        since = min((c.since for c in mine if c.since), default=None)
        when = f" since {since:%Y-%m-%d %H:%M:%S} UTC" if since else ""
        runs = sorted({call.workflow_id for call in mine})
        print(f"{provider}: {len(mine)} call(s) paused{when}, in {', '.join(runs)}")
    print(f"resume by hand: {command()} providers resume [PROVIDER]")
    return 0


def command() -> str:
    """How the user runs this CLI, as help and hints name it: `council` once installed."""
    return commands.invoked_as(commands.CLI, "python starter.py")


def parser() -> argparse.ArgumentParser:
    top = Parser(
        prog=command().removeprefix("python "),
        description="Start and follow council deliberations.",
    )
    commands = top.add_subparsers(dest="command", required=True, parser_class=Parser)

    start = commands.add_parser("start", help="start a deliberation")
    start.add_argument("question", help='the question; "-" reads it from standard input')
    start.add_argument("--id", help="workflow id (default: council-<question>-<random>)")
    flags.add_council_flags(start)
    flags.add_attach_flag(start)
    start.add_argument(
        "--follow-up", metavar="ID", help="ask in the thread of this completed deliberation"
    )
    for flag in flags.FOLLOW_UP_FLAGS:
        flags.add_flag(start, flag)
    add_launch_flags(start)
    start.add_argument("--wait", action="store_true", help="follow progress and print the answer")
    start.add_argument("--json", action="store_true", help="with --wait: print the record as JSON")
    start.set_defaults(run=cmd_start)

    stop = commands.add_parser("stop", help="stop a running deliberation; it still synthesizes")
    stop.add_argument("id")
    stop.add_argument("--reason")
    stop.set_defaults(run=cmd_stop)

    extend = commands.add_parser(
        "extend", help="set a running deliberation's maximum rounds (raise or lower)"
    )
    extend.add_argument("id")
    extend.add_argument(
        "--rounds", type=numbers.whole_argument, required=True, help="the new maximum, 1 to 5"
    )
    extend.set_defaults(run=cmd_extend)

    critique = commands.add_parser(
        "critique", help="add your critique of a model's answer for the next round"
    )
    critique.add_argument("id")
    critique.add_argument("--model", required=True, help="the model whose answer it is about")
    critique.add_argument("text")
    critique.set_defaults(run=cmd_critique)

    watch = commands.add_parser("watch", help="stream a deliberation's progress")
    watch.add_argument("id")
    watch.set_defaults(run=cmd_watch)

    show = commands.add_parser("show", help="print a deliberation's record")
    show.add_argument("id")
    fmt = show.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--markdown", action="store_true")
    show.set_defaults(run=cmd_show)

    evaluate = commands.add_parser(
        "eval", help="deliberate on every problem of a dataset and score the answers"
    )
    evaluate.add_argument("dataset", help="a JSONL file: id, question, answer[, kind]")
    flags.add_council_flags(evaluate)
    evaluation.add_arguments(evaluate)
    evaluate.set_defaults(run=cmd_eval)

    list_ = commands.add_parser("list", help="list recent deliberations")
    list_.add_argument("--limit", type=numbers.whole_argument, default=20)
    list_.add_argument("--filter", help="only those whose id or question contains this")
    list_.add_argument("--thread", metavar="ID", help="a thread's deliberations, oldest first")
    list_.add_argument("--json", action="store_true")
    list_.set_defaults(run=cmd_list)

    mcp = commands.add_parser(
        "mcp", help="serve the council as MCP tools on stdio (or HTTP with --http)"
    )
    mcp.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve the streamable HTTP transport at http://HOST:PORT/mcp instead of stdio",
    )
    mcp.set_defaults(run=cmd_mcp)

    check = commands.add_parser(
        "doctor", help="check the setup: Temporal, a worker, the providers, the default council"
    )
    check.add_argument("--json", action="store_true", help="the checks as a JSON list")
    check.set_defaults(run=cmd_doctor)

    providers = commands.add_parser(
        "providers",
        help="the model calls paused while their provider is down; resume them by hand",
    )
    providers.add_argument(
        "action", nargs="?", choices=["list", "resume"], default="list", help="(default: list)"
    )
    providers.add_argument("provider", nargs="?", help="only this provider's calls")
    providers.add_argument("--json", action="store_true", help="the paused calls as JSON")
    providers.set_defaults(run=cmd_providers)

    kept = commands.add_parser("store", help="the payload store, where large texts are kept")
    actions = kept.add_subparsers(dest="action", required=True, parser_class=Parser)
    prune = actions.add_parser(
        "prune",
        help="delete the blobs no run of the namespace references any more (those of "
        "deleted runs), once older than the grace period",
    )
    prune.add_argument(
        "--grace",
        type=numbers.whole_argument,
        default=3600,
        metavar="SECONDS",
        help="keep blobs younger than this, whatever references them (default 3600; at "
        "least 600, the time a starting run's input may wait for the run)",
    )
    prune.add_argument("--dry-run", action="store_true", help="count, delete nothing")
    prune.add_argument("--json", action="store_true", help="the counts as JSON")
    prune.set_defaults(run=cmd_store_prune)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run one command: its exit status (0, 1, or 2 for bad input, a setting that cannot be
    used or a server that does not answer, with one line on stderr)."""
    name = command().removeprefix("python ").removesuffix(".py")  # council, or starter
    try:
        args = parser().parse_args(argv)
        app_settings.load()
        run: Callable[[argparse.Namespace], Coroutine[Any, Any, int]] = args.run
        return connection.run(run(args))
    except (
        UsageError,
        connection.ServerUnreachable,
        connection.ConfigError,
        ConfigProblem,
        app_settings.SettingsError,
    ) as error:
        print(f"{name}: {error}", file=sys.stderr)
        return 2
    except RPCError as error:
        print(f"{name}: {connection.described(error)}", file=sys.stderr)
        return 2
    except store.StoreError as error:
        print(f"{name}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def entry() -> None:
    """The `council` command."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
