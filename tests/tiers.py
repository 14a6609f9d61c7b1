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
