"""The fast tier holds only what it promises: a test marked fast that uses a fixture
starting a dev server, a browser or a process stops the collection, naming it."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.fast

SUITE = """
import pytest

@pytest.fixture
def temporal():
    yield "a dev server"

@pytest.fixture
def council(temporal):
    yield temporal

@pytest.fixture
def numbers():
    yield [1, 2]

@pytest.mark.fast
def test_quick(numbers):
    assert numbers

def test_on_the_dev_server(council):
    assert council
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(
        """
        [pytest]
        asyncio_default_fixture_loop_scope = function
        markers =
            fast: the fast tier
        """
    )
    pytester.makeconftest('pytest_plugins = ["tests.tiers"]\n')
    return pytester


def test_a_fast_test_on_quick_fixtures_and_a_slow_one_unmarked_are_collected(
    suite: pytest.Pytester,
) -> None:
    suite.makepyfile(test_suite=SUITE)
    result = suite.runpytest("-p", "no:cacheprovider", "-m", "fast")
    result.assert_outcomes(passed=1, deselected=1)


def test_a_fast_test_on_a_fixture_built_on_the_dev_server_stops_the_collection(
    suite: pytest.Pytester,
) -> None:
    suite.makepyfile(
        test_suite=SUITE + "\n@pytest.mark.fast\ndef test_misplaced(council):\n    pass\n"
    )
    result = suite.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*marked fast but needs a dev server, browser or process:*test_misplaced (uses temporal)*"]
    )
    assert "test_quick" not in result.stderr.str()
