"""The statistics of an evaluation report (evaluation.statistics), against values worked
out by hand and published ones."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from evaluation.statistics import Z_95, Paired, mcnemar_exact, paired, wilson_interval

pytestmark = pytest.mark.fast

# ---- Wilson's score interval ------------------------------------------------------------


def wilson(k: int, n: int) -> tuple[float, float]:
    interval = wilson_interval(k, n)
    assert interval is not None
    return interval


def wilson_by_hand(k: int, n: int, z: float = Z_95) -> tuple[float, float]:
    # (p + z²/2n ± z·√(p(1-p)/n + z²/4n²)) / (1 + z²/n), written out again.
    p = k / n
    centre = (p + z**2 / (2 * n)) / (1 + z**2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z**2 / (4 * n**2)) / (1 + z**2 / n)
    return centre - half, centre + half


def test_wilson_at_none_and_all_correct_has_a_closed_form() -> None:
    # At k = 0 the interval is (0, z²/(n + z²)); at k = n it is (n/(n + z²), 1).
    # z² = 3.841459, so for n = 10: 3.841459/13.841459 = 0.277533 and 10/13.841459 = 0.722467.
    low, high = wilson(0, 10)
    assert low == 0.0
    assert high == pytest.approx(Z_95**2 / (10 + Z_95**2)) == pytest.approx(0.277533, abs=1e-6)
    low, high = wilson(10, 10)
    assert high == 1.0
    assert low == pytest.approx(10 / (10 + Z_95**2)) == pytest.approx(0.722467, abs=1e-6)


def test_wilson_at_one_half() -> None:
    # 50/100: centre 0.5; half-width z·√(0.0025 + 3.841459/40000)/1.0384146
    # = 1.887459 · 0.0509513 = 0.096168, so (0.4038, 0.5962).
    low, high = wilson(50, 100)
    assert (round(low, 4), round(high, 4)) == (0.4038, 0.5962)
    assert (low, high) == pytest.approx(wilson_by_hand(50, 100))
    assert low + high == pytest.approx(1.0)  # symmetric about 1/2


@pytest.mark.parametrize(
    ("k", "n", "expected"),
    [
        # Newcombe (1998), "Two-sided confidence intervals for the single proportion",
        # Statistics in Medicine 17:857-872, table I, the score method.
        (81, 263, (0.2553, 0.3662)),
        (15, 148, (0.0624, 0.1605)),
        (0, 20, (0.0, 0.1611)),
        (1, 29, (0.0061, 0.1718)),
    ],
)
def test_wilson_matches_published_values(k: int, n: int, expected: tuple[float, float]) -> None:
    interval = wilson_interval(k, n)
    assert interval is not None
    assert tuple(round(bound, 4) for bound in interval) == expected
    assert interval == pytest.approx(wilson_by_hand(k, n), abs=1e-12)


def test_wilson_edges() -> None:
    assert wilson_interval(0, 0) is None
    for k in range(0, 8):
        low, high = wilson(k, 7)
        assert 0.0 <= low <= k / 7 <= high <= 1.0
    # A wider z gives a wider interval around the same proportion.
    narrow, wide = wilson_interval(3, 10, z=1.0), wilson_interval(3, 10, z=3.0)
    assert narrow is not None and wide is not None
    assert wide[0] < narrow[0] < 0.3 < narrow[1] < wide[1]
    for bad in ((-1, 5), (6, 5), (1, -1)):
        with pytest.raises(ValueError):
            wilson_interval(*bad)
    with pytest.raises(ValueError):
        wilson_interval(1, 2, z=0.0)


# ---- McNemar's exact test -----------------------------------------------------------------


def test_mcnemar_exact_known_values() -> None:
    # n = 7: 2·(C(7,0) + C(7,1))/2^7 = 2·(1 + 7)/128 = 0.125.
    assert mcnemar_exact(1, 6) == 0.125
    # n = 22: C(22,0..6) = 1, 22, 231, 1540, 7315, 26334, 74613, summing to 110056;
    # 2·110056/2^22 = 220112/4194304 = 0.0524788 (just above 0.05).
    assert mcnemar_exact(6, 16) == pytest.approx(220112 / 4194304, rel=1e-15)
    assert round(mcnemar_exact(6, 16), 6) == 0.052479
    # n = 10, one side empty: 2/2^10.
    assert mcnemar_exact(0, 10) == 2 / 1024


def test_mcnemar_exact_edges_and_symmetry() -> None:
    assert mcnemar_exact(0, 0) == 1.0  # no discordant pair: no evidence of a difference
    assert mcnemar_exact(0, 1) == 1.0  # 2·1/2 = 1
    for b in range(0, 12):
        assert mcnemar_exact(b, b) == 1.0  # the doubled tail passes 1: clamped
        for c in range(0, 12):
            assert mcnemar_exact(b, c) == mcnemar_exact(c, b)
            assert 0.0 < mcnemar_exact(b, c) <= 1.0
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 3)


def test_mcnemar_exact_stays_exact_for_large_counts() -> None:
    assert mcnemar_exact(1000, 1000) == 1.0
    assert mcnemar_exact(0, 60) == 2.0**-59  # 2/2^60, exactly representable
    # n = 2000, 900 against 1100: the normal approximation with continuity correction,
    # z = (|1100 - 900| - 1)/√2000 = 4.4498, gives a two-sided p of about 8.6e-6.
    p = mcnemar_exact(900, 1100)
    assert 5e-6 < p < 1.2e-5
    assert mcnemar_exact(899, 1101) < p < mcnemar_exact(901, 1099)


# ---- the paired table ---------------------------------------------------------------------


def test_paired_counts_the_two_by_two_table() -> None:
    first = [True, True, True, False, False, True, False]
    second = [True, False, False, True, False, True, False]
    table = paired(first, second)
    assert table == Paired(both_right=2, only_first=2, only_second=1, both_wrong=2)
    assert (table.total, table.first_right, table.second_right) == (7, 4, 3)
    assert table.mcnemar == mcnemar_exact(2, 1) == 1.0  # 2·(1 + 3)/8 = 1
    assert paired([], []) == Paired(both_right=0, only_first=0, only_second=0, both_wrong=0)


def test_paired_mcnemar_uses_the_discordant_counts() -> None:
    # b = 1, c = 6 among 30 problems: p = 0.125, as above; the concordant ones do not count.
    first = [True] * 20 + [True] + [False] * 6 + [False] * 3
    second = [True] * 20 + [False] + [True] * 6 + [False] * 3
    table = paired(first, second)
    assert (table.only_first, table.only_second) == (1, 6)
    assert table.mcnemar == 0.125
    assert paired(second, first).mcnemar == 0.125


def test_paired_rejects_unequal_lengths_and_negative_counts() -> None:
    with pytest.raises(ValueError, match="equal lengths"):
        paired([True, False], [True])
    with pytest.raises(ValidationError):
        Paired(both_right=-1, only_first=0, only_second=0, both_wrong=0)
