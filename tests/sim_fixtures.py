"""Simulator fixtures, loaded by tests/conftest.py as a pytest plugin.

- `simulator`: one in-process simulator for the whole session (SimulatorServer; its
  `.url` is the OpenAI-compatible base URL to give a ModelGateway or a worker).
- `sim`: the same server, with no faults and an empty log at the start of the test and
  no faults after it.
- `sim_faults`: a function that replaces the fault config for this test, e.g.
  `sim_faults({"sim/cirrus": {"errors": {"500": 1.0}, "max_faults": 1}})`.
- `wait_until(predicate, timeout)`: poll a condition (such as a log count) briefly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from simulator import SimulatorConfig, SimulatorServer

SESSION_SEED = 20240601


@pytest.fixture(scope="session")
def simulator() -> Iterator[SimulatorServer]:
    with SimulatorServer(SimulatorConfig(seed=SESSION_SEED, keepalive_seconds=0.2)) as server:
        yield server


@pytest.fixture
def sim(simulator: SimulatorServer) -> Iterator[SimulatorServer]:
    simulator.set_faults(None)
    simulator.reset()
    yield simulator
    simulator.set_faults(None)


@pytest.fixture
def sim_faults(sim: SimulatorServer) -> Callable[[dict[str, Any]], Any]:
    return sim.set_faults


async def wait_until(
    predicate: Callable[[], bool], timeout: float = 3.0, step: float = 0.01
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        await asyncio.sleep(step)
