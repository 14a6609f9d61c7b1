"""Shared fixtures (the plugin modules listed below) and the fast tier.

The fast tier (`make test-fast`, `pytest -m fast`) is every test that needs no Temporal
dev server of the session, no browser and no process of its own: the protocol's unit and
property tests, the replay of the committed histories, the specification's tests, the
model call against the in-process simulator, and the workflow's rules on Temporal's
time-skipping test environment with a fake model call (test_workflow_rules.py). Each
test module declares it: `pytestmark = pytest.mark.fast` where every test qualifies,
`@pytest.mark.fast` on each test that does where only some do. Nothing chooses
for them; tests/tiers.py checks: collection stops with an error naming the test
when one marked fast uses a fixture that starts a dev server, a browser or a process.
A test that starts a process in its own body, or through the code it tests, stays
unmarked. `make test` runs every test, these included, and each property test's every
example (the fast tier tries a quarter of those a test names: tests/tiers.py).

The Python processes the suite starts (`starter.py`, `worker.py`, `python -m web`, the
simulator and codec servers) are forked from a process that has made the imports already
(tests/forked_cli.py); tests/test_starter.py and tests/test_durability.py start new
interpreters as well.

The suite runs through the payload store (app.store): a directory of the session's, in
COUNCIL_STORE for every client, worker and process a test starts, with a threshold low
enough that a run's reviews, refinements and record travel by reference.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile

import pytest
from hypothesis import settings

from harness import processes
from tests.forked_cli import fork_python

pytest_plugins = [
    "tests.sim_fixtures",
    "tests.temporal_fixtures",
    "tests.web_fixtures",
    "tests.history_bounds",
    "tests.tiers",
    "pytester",
]

SUITE_STORE_THRESHOLD = "4096"

# No property test has a time limit per example: hypothesis's default (200 ms) fails a test
# whose example a busy machine ran slower, whatever it checked.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


def pytest_configure(config: pytest.Config) -> None:
    # The Python processes the tests start through harness.processes (workers, simulators,
    # codec servers) are forked from a process that has made the imports already.
    processes.python_launcher = fork_python
    store = tempfile.mkdtemp(prefix="council-store-")
    config.stash[_STORE] = store
    os.environ["COUNCIL_STORE"] = store
    os.environ["COUNCIL_STORE_THRESHOLD"] = SUITE_STORE_THRESHOLD


def pytest_collection_finish(session: pytest.Session) -> None:
    # What is alive once the tests are collected (the modules, the test items) stays alive
    # to the end: kept out of every later full collection, which would otherwise go through
    # it each time (the CLI's own, at the end of each command run in this process).
    gc.collect()
    gc.freeze()


def pytest_unconfigure(config: pytest.Config) -> None:
    store = config.stash.get(_STORE, None)
    if store is not None:
        shutil.rmtree(store, ignore_errors=True)


_STORE = pytest.StashKey[str]()
