"""python -m simulator --port N [--host H] [--faults JSON-or-file] [--latency S|MIN-MAX] [--seed N]

The latency defaults to COUNCIL_SIM_LATENCY (unset: replies come at once)."""

from __future__ import annotations

import argparse
import sys

from council import numbers
from council.numbers import whole_argument
from simulator.config import (
    LATENCY_VARIABLE,
    FaultConfigError,
    Latency,
    SimulatorConfig,
    describe_latency,
    parse_faults,
    parse_latency,
    with_default_latency,
)
from simulator.personas import ALL_PERSONAS
from simulator.settings import DISAGREE_VARIABLE, SimulatorSettings


def _latency(value: str) -> Latency:
    try:
        return parse_latency(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _share(value: str) -> float:
    share = numbers.decimal_argument(value)
    if not 0 <= share <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1 (got {value})")
    return share


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m simulator",
        description="Council simulator: an OpenAI-compatible server with simulated models.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=whole_argument, default=8800)
    parser.add_argument(
        "--faults",
        help="fault config as JSON or a path to a JSON file, "
        'e.g. \'{"*": {"errors": {"500": 0.1}}}\'',
    )
    parser.add_argument(
        "--latency",
        type=_latency,
        help="default latency of every reply: seconds (3), or a range each call is drawn from "
        f"(2-5); default {LATENCY_VARIABLE}, else none",
    )
    parser.add_argument(
        "--seed", type=whole_argument, default=0, help="seed of the fault injection"
    )
    parser.add_argument(
        "--api-key",
        default=SimulatorSettings.read().key(),
        help="answer only requests with this key (others get a 401); default: any",
    )
    parser.add_argument(
        "--disagree",
        type=_share,
        metavar="SHARE",
        help="the share (0-1) of known-answer problems on which the four personas' first "
        f"answers disagree; on the others all four answer right (default {DISAGREE_VARIABLE}, "
        "else each persona slips at its own rate)",
    )
    parser.add_argument("--log-level", default="warning", help="uvicorn log level")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    latency = args.latency
    try:
        given = SimulatorSettings.read().latency
        if latency is None and given:
            try:
                latency = parse_latency(given)
            except ValueError as error:
                raise FaultConfigError(f"{LATENCY_VARIABLE} {error}") from None
        faults = with_default_latency(parse_faults(args.faults), latency)
        disagree = args.disagree
        given_share = SimulatorSettings.read().disagree
        if disagree is None and given_share:
            try:
                disagree = _share(given_share)
            except argparse.ArgumentTypeError as error:
                raise FaultConfigError(f"{DISAGREE_VARIABLE} {error}") from None
    except FaultConfigError as err:
        print(f"simulator: {err}", file=sys.stderr)
        return 2
    config = SimulatorConfig(faults=faults, seed=args.seed, api_key=args.api_key, disagree=disagree)

    import uvicorn

    from simulator.server import build_app

    base = f"http://{args.host}:{args.port}/v1"
    print(
        f"Council simulator (simulated models, no real LLM) on {base}\n"
        f"  models: {', '.join(p.model for p in ALL_PERSONAS)} (any other name maps to one of the "
        "first four)\n"
        f"  pace: {describe_latency(latency or 0.0)} (--latency, {LATENCY_VARIABLE})\n"
        f"  point the worker at it: COUNCIL_LLM_BASE_URL={base}",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(
        build_app(config),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=2,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
