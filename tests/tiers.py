"""The fast tier's guard: a test marked fast may not use a fixture that starts a Temporal
dev server, a browser or a process of its own, nor one built on such a fixture. Which
tests are fast is declared by each test module (tests/conftest.py says how); this only
refuses a declaration that cannot hold.
"""

from __future__ import annotations

import pytest

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
