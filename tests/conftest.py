"""Shared fixtures (the plugin modules listed below) and the fast tier.

The fast tier (`make test-fast`, `pytest -m fast`) is every test that needs no Temporal
dev server of the session, no browser and no process of its own: the protocol's unit and
property tests, the replay of the committed histories, the specification's tests, the
model call against the in-process simulator, and the workflow's rules on Temporal's
time-skipping test environment with a fake model call (test_workflow_rules.py). The
marker is given here, not by hand: a test is in the tier unless it uses the `temporal`
or `browser` fixture (or one built on them), or its module or one of its fixtures' modules
starts processes (names `subprocess` or one of the process starters below). `make test`
runs every test, these included.

The suite runs through the payload store (app.store): a directory of the session's, in
COUNCIL_STORE for every client, worker and process a test starts, with a threshold low
enough that a run's reviews, refinements and record travel by reference.
"""

from __future__ import annotations

import inspect
import os
import re
import shutil
import tempfile
from functools import cache
from pathlib import Path

import pytest

pytest_plugins = [
    "tests.sim_fixtures",
    "tests.temporal_fixtures",
    "tests.web_fixtures",
    "tests.history_bounds",
]

FAST = "fast"
REAL_COMPONENTS = frozenset({"temporal", "browser"})
# harness.processes's starters and the fixtures' `starter` (the CLI as a subprocess).
STARTS_PROCESSES = re.compile(
    r"\bsubprocess\b|\b(?:spawn|start_temporal|start_worker|start_web|start_simulator|"
    r"start_codec_server|starter)\("
)


SUITE_STORE_THRESHOLD = "4096"


def pytest_configure(config: pytest.Config) -> None:
    store = tempfile.mkdtemp(prefix="council-store-")
    config.stash[_STORE] = store
    os.environ["COUNCIL_STORE"] = store
    os.environ["COUNCIL_STORE_THRESHOLD"] = SUITE_STORE_THRESHOLD


def pytest_unconfigure(config: pytest.Config) -> None:
    store = config.stash.get(_STORE, None)
    if store is not None:
        shutil.rmtree(store, ignore_errors=True)


_STORE = pytest.StashKey[str]()


@cache
def starts_processes(path: str) -> bool:
    return bool(STARTS_PROCESSES.search(Path(path).read_text(encoding="utf-8")))


def in_fast_tier(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    if info is None or REAL_COMPONENTS & set(info.names_closure):
        return False
    sources = {str(item.path)}
    for definitions in info.name2fixturedefs.values():
        for definition in definitions:
            source = inspect.getsourcefile(definition.func)
            if source and Path(source).is_relative_to(Path(__file__).parent):
                sources.add(source)
    return not any(starts_processes(source) for source in sources)


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if in_fast_tier(item):
            item.add_marker(FAST)
