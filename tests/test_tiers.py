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


def test_the_fast_tier_does_not_import_a_module_without_a_fast_test(
    suite: pytest.Pytester,
) -> None:
    suite.makepyfile(test_suite=SUITE, test_slow="raise ImportError('imported')\n")
    suite.runpytest("-p", "no:cacheprovider", "-m", "fast").assert_outcomes(passed=1, deselected=1)
    suite.runpytest("-p", "no:cacheprovider").assert_outcomes(errors=1)


def test_property_tests_try_a_quarter_of_their_examples_in_the_fast_tier_only(
    suite: pytest.Pytester,
) -> None:
    suite.makepyfile(
        test_examples="import pytest\nfrom tests.tiers import examples\n\n"
        "@pytest.mark.fast\ndef test_examples():\n    print('examples:', examples(100))\n"
    )
    fast = suite.runpytest("-p", "no:cacheprovider", "-s", "-m", "fast")
    fast.stdout.fnmatch_lines(["*examples: 25*"])
    suite.runpytest("-p", "no:cacheprovider", "-s").stdout.fnmatch_lines(["*examples: 100*"])
