"""The benchmark runner: `python -m bench` (what `make bench` runs).

    python -m bench                       every benchmark; writes bench/RESULTS.md
    python -m bench --quick               small sizes, for development (prints only)
    python -m bench --only throughput     a selection (comma-separated or repeated)
    python -m bench --only throughput --profile   also profile the worker with py-spy
    python -m bench --only throughput --pin       the worker on a core of its own (bench.pinning)
    python -m bench --only throughput --sandbox   every row's workflows in the sandbox
    python -m bench --only redaction              the redaction rule alone (no server)

It starts its own Temporal dev server (headless, a scratch SQLite file), simulator and
workers, so nothing else needs to run, and stops them at the end (a selection of
benchmarks that need none of them starts none). Process logs (and
profiles) go to bench/out/.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from app.temporal import connection
from bench import (
    crash,
    critical_path,
    growth,
    payloads,
    priority,
    providers,
    redaction,
    report,
    scale,
    stragglers,
    throughput,
    watchers,
)
from bench.pinning import Pinning, PinningError
from bench.stack import BenchStack
from harness.processes import ROOT

Benchmark = Callable[..., Awaitable[report.Section]]
BENCHMARKS: dict[str, Benchmark] = {
    "critical_path": critical_path.run,
    "throughput": throughput.run,
    "growth": growth.run,
    "crash": crash.run,
    "stragglers": stragglers.run,
    "scale": scale.run,
    "payloads": payloads.run,
    "watchers": watchers.run,
    "priority": priority.run,
    "providers": providers.run,
    "redaction": redaction.run,
}
# The benchmarks that measure code alone: no server, simulator or worker.
STACKLESS = frozenset({"redaction"})
RESULTS = ROOT / "bench" / "RESULTS.md"
OUT = ROOT / "bench" / "out"


def _names(values: list[str]) -> list[str]:
    names = []
    for value in values:
        for name in value.split(","):
            name = name.strip().replace("-", "_")
            if not name:
                continue
            if name not in BENCHMARKS:
                raise argparse.ArgumentTypeError(
                    f"unknown benchmark {name!r} (choose from {', '.join(BENCHMARKS)})"
                )
            names.append(name)
    return names


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for development")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help=f"run only these benchmarks: {', '.join(BENCHMARKS)}",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="throughput: profile the council worker with py-spy (pip install py-spy)",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="throughput: the worker process on a core of its own, the dev server, simulator "
        "and driver on the others (Linux), so that the worker is the limit as on a big machine",
    )
    parser.add_argument(
        "--rows",
        metavar="KIND[,KIND]",
        help="throughput: measure only these rows, of "
        f"{', '.join(throughput.KINDS)} (default all; Council / the same calls needs "
        "council,same)",
    )
    parser.add_argument(
        "--window",
        type=float,
        metavar="SECONDS",
        help="throughput and scale: the measured window of the closed loop (default "
        f"{throughput.FULL.window:.0f} s with 200 runs in flight; {throughput.QUICK.window:.0f} s "
        "with --quick's 50)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        metavar="N",
        help="throughput: measure each row N times, in turn, and report the medians "
        "(default 1; 1 to 20)",
    )
    parser.add_argument(
        "--sandbox",
        action="store_true",
        help="throughput: every row's workflows in the SDK's sandbox with narrow pass-through "
        "(service.worker.SANDBOX), not under the runner of production",
    )
    parser.add_argument(
        "--sqlite-file",
        action="store_true",
        help="keep the dev server's state in a SQLite file (as `make demo` does), not in memory",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="write the results here (default: bench/RESULTS.md for a full run, nothing otherwise)",
    )
    args = parser.parse_args(argv)
    if args.window is not None:
        if not 5 <= args.window <= 3600:
            parser.error(f"--window must be 5 to 3600 seconds (got {args.window:g})")
        # The quick sizes take it too: a longer window there evens out the closed loop's waves.
        throughput.FULL = scale.FULL = dataclasses.replace(throughput.FULL, window=args.window)
        throughput.QUICK = dataclasses.replace(throughput.QUICK, window=args.window)
        scale.QUICK = dataclasses.replace(scale.QUICK, window=args.window)
    throughput.SANDBOXED = args.sandbox
    if args.repeat is not None:
        if not 1 <= args.repeat <= 20:
            parser.error(f"--repeat must be 1 to 20 (got {args.repeat})")
        throughput.REPEAT = args.repeat
    try:
        args.only = _names(args.only)
    except argparse.ArgumentTypeError as err:
        parser.error(str(err))
    if args.rows is not None:
        try:
            throughput.ROWS = throughput.rows(args.rows)
        except ValueError as err:
            parser.error(str(err))
    for flag in ("pin", "sandbox"):
        if getattr(args, flag) and args.only != ["throughput"]:
            parser.error(
                f"--{flag} applies to the throughput benchmark only: add --only throughput"
            )
    return args


def render(
    sections: list[report.Section],
    machine: str,
    load: str,
    command: str,
    elapsed: float,
    quick: bool,
    storage: str,
) -> str:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    minutes, secs = divmod(int(elapsed), 60)
    parts = [
        "# Benchmarks",
        f"Generated by `{command}` on {when} in {minutes} min {secs} s"
        + (" (quick sizes: development figures only)." if quick else "."),
        f"Machine: {machine}.  \nLoad average at the start (1, 5, 15 min): {load}.",
        "Every figure is measured in this one run, side by side: the Temporal dev server "
        f"(SQLite {storage}), the simulator (which supplies model latency) and the workers "
        "all run on this machine and share its cores.",
        "## Summary",
        report.summary(sections).markdown(),
    ]
    parts += [section.markdown() for section in sections]
    return "\n\n".join(parts) + "\n"


async def run(args: argparse.Namespace) -> str:
    names = args.only or list(BENCHMARKS)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    workdir = OUT / f"run-{stamp}"
    machine = report.describe_machine()
    load = report.load_average()
    started = time.monotonic()
    pinned = None
    if args.pin:
        try:
            pinned = Pinning.split(worker_cores=1)
        except PinningError as err:
            raise SystemExit(f"python -m bench: {err}") from None
        pinned.apply()
    stack = BenchStack(workdir, db_file=workdir / "temporal.db" if args.sqlite_file else None)
    sections = []
    ok = False
    try:
        if not STACKLESS.issuperset(names):
            await stack.start()
        for name in names:
            print(f"bench: {name} ...", file=sys.stderr, flush=True)
            t0 = time.monotonic()
            options = {"profile": args.profile, "pin": pinned} if name == "throughput" else {}
            sections.append(await BENCHMARKS[name](stack, quick=args.quick, **options))
            print(
                f"bench: {name} done in {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True
            )
        ok = True
    finally:
        stack.close()
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"bench: process logs in {workdir}", file=sys.stderr)
    command = "python -m bench" + (" --quick" if args.quick else "")
    command += "".join(f" --only {name}" for name in args.only)
    command += " --sqlite-file" if args.sqlite_file else ""
    command += " --pin" if args.pin else ""
    command += " --sandbox" if args.sandbox else ""
    command += f" --rows {','.join(throughput.ROWS)}" if args.rows is not None else ""
    command += f" --window {args.window:g}" if args.window is not None else ""
    command += f" --repeat {args.repeat}" if args.repeat is not None else ""
    storage = "in a file" if args.sqlite_file else "in memory"
    return render(sections, machine, load, command, time.monotonic() - started, args.quick, storage)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    text = connection.run(run(args))
    print(text)
    out = args.out or (RESULTS if not args.only and not args.quick else None)
    if out is not None:
        out.write_text(text)
        print(f"bench: wrote {out}", file=sys.stderr)
    return 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
