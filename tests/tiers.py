"""The fast tier's guard: a test marked fast may not use a fixture that starts a Temporal
dev server, a browser or a process of its own, nor one built on such a fixture. Which
tests are fast is declared by each test module (tests/conftest.py says how); this only
refuses a declaration that cannot hold.

The property tests that name how many examples they try, `examples(n)`, try a quarter of
them in the fast tier (`-m fast`) and all of them everywhere else (`make test`, a module run
alone).
"""

from __future__ import annotations

from pathlib import Path

import pytest

FAST_SHARE = 4
# Whether each run under way (the suite's, a pytester run inside it) is the fast tier.
_fast_tier: list[bool] = []


def pytest_configure(config: pytest.Config) -> None:
    _fast_tier.append(config.option.markexpr == "fast")


def pytest_unconfigure() -> None:
    _fast_tier.pop()


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    """In the fast tier, a test module that marks no test fast is not imported: what only
    the slow tests import (the SDKs of the clients they drive) costs each process nothing."""
    if (
        _fast_tier[-1]
        and collection_path.name.startswith("test_")
        and collection_path.suffix == ".py"
    ):
        return "pytest.mark.fast" not in collection_path.read_text() or None
    return None


def examples(thorough: int) -> int:
    """How many examples a property test tries (read as its module is collected)."""
    return thorough // FAST_SHARE if _fast_tier[-1:] == [True] else thorough


SLOW_FIXTURES = frozenset({"temporal", "browser", "web_without_temporal"})


def slow_fixtures_of(item: pytest.Item) -> set[str]:
    info = getattr(item, "_fixtureinfo", None)
    return set(SLOW_FIXTURES & set(info.names_closure)) if info is not None else set()


@pytest.hookimpl(tryfirst=True)  # on every test collected, before `-m` deselects any
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    misplaced = [
        f"{item.nodeid} (uses {', '.join(sorted(slow))})"
        for item in items
        if item.get_closest_marker("fast") and (slow := slow_fixtures_of(item))
    ]
    if misplaced:
        raise pytest.UsageError(
            "marked fast but needs a dev server, browser or process: " + "; ".join(misplaced)
        )


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def slow_tests_first(items: list[pytest.Item]) -> None:
    """The slow tests first, each module's in its order, the fast tier after them: the many
    quick tests fill the end of a run in several processes, where a long test picked up last
    would keep one process busy while the others wait."""
    items.sort(key=lambda item: item.get_closest_marker("fast") is not None)
