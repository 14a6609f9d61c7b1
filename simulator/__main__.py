"""python -m simulator --port N [--host H] [--faults JSON-or-file] [--latency S] [--seed N]"""

from __future__ import annotations

import argparse
import os
import sys

from simulator.config import FaultConfigError, SimulatorConfig, parse_faults, with_default_latency
from simulator.personas import ALL_PERSONAS


def _latency(value: str) -> float:
    seconds = float(value)
    if seconds < 0:
        raise argparse.ArgumentTypeError("latency must not be negative")
    return seconds


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m simulator",
        description="Council simulator: an OpenAI-compatible server with simulated models.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8800)
    parser.add_argument(
        "--faults",
        help="fault config as JSON or a path to a JSON file, "
        'e.g. \'{"*": {"errors": {"500": 0.1}}}\'',
    )
    parser.add_argument(
        "--latency", type=_latency, help="default latency of every reply, in seconds"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault injection")
    parser.add_argument(
        "--api-key",
        default=os.environ.get("COUNCIL_SIMULATOR_API_KEY") or None,
        help="answer only requests with this key (others get a 401); default: any",
    )
    parser.add_argument("--log-level", default="warning", help="uvicorn log level")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        faults = with_default_latency(parse_faults(args.faults), args.latency)
    except FaultConfigError as err:
        print(f"simulator: {err}", file=sys.stderr)
        return 2
    config = SimulatorConfig(faults=faults, seed=args.seed, api_key=args.api_key)

    import uvicorn

    from simulator.server import build_app

    base = f"http://{args.host}:{args.port}/v1"
    print(
        f"Council simulator (simulated models, no real LLM) on {base}\n"
        f"  models: {', '.join(p.model for p in ALL_PERSONAS)} (any other name maps to one of the "
        "first four)\n"
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
