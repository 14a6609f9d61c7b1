"""The statistics of an evaluation report: how sure an accuracy is, and whether two ways of
answering the same problems really differ. Pure functions, standard library only.

- `wilson_interval`: a confidence interval (95 % by default) for an accuracy measured on
  `total` problems. Wilson's score interval stays inside [0, 1] and keeps a sensible width
  at 0 or all correct and on small sets, where the textbook "p ± z·√(p(1-p)/n)" collapses
  to a single point or overshoots.
- `mcnemar_exact`: whether two answerers (a model at stage 1 and the chairman, say) differ
  in accuracy on the same problems. Only the problems they disagree on tell them apart:
  `b` where the first is right and the second wrong, `c` the reverse. If both were equally
  good, each of those b + c problems would go either way with even odds, so the smaller
  count follows a binomial with p = 1/2; the p-value is twice its lower tail (at most 1),
  computed exactly. A small p-value says the difference is unlikely to be luck.
- `paired` counts the 2x2 table of two answerers' right and wrong answers over the same
  problems, as a `Paired`, whose `mcnemar` is the test above on its discordant counts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from pydantic import BaseModel, ConfigDict, Field

Z_95 = 1.959963984540054  # the standard normal's 97.5th percentile: a two-sided 95 % interval


def wilson_interval(correct: int, total: int, z: float = Z_95) -> tuple[float, float] | None:
    """Wilson's score interval for the proportion correct/total, as (low, high) within
    [0, 1]; None when total is 0 (no problem, no accuracy)."""
    if not 0 <= correct <= total:
        raise ValueError(f"need 0 <= correct <= total, got {correct} of {total}")
    if z <= 0:
        raise ValueError(f"z must be positive, got {z}")
    if total == 0:
        return None
    p = correct / total
    z2 = z * z
    denominator = 1 + z2 / total
    centre = (p + z2 / (2 * total)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / total + z2 / (4 * total * total))
    # At 0 or all correct the bound is exactly 0 or 1; floating point may miss it by an ulp.
    low = 0.0 if correct == 0 else max(0.0, centre - half)
    high = 1.0 if correct == total else min(1.0, centre + half)
    return low, high


def mcnemar_exact(b: int, c: int) -> float:
    """The two-sided exact McNemar p-value for the discordant counts b and c:
    min(1, 2 · Σ_{i ≤ min(b, c)} C(b + c, i) / 2^(b + c)); 1.0 when b + c is 0."""
    if b < 0 or c < 0:
        raise ValueError(f"counts must not be negative, got b={b}, c={c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**n)))


class Paired(BaseModel):
    """Two answerers' results on the same problems, as a 2x2 table."""

    model_config = ConfigDict(frozen=True)

    both_right: int = Field(ge=0)
    only_first: int = Field(ge=0)  # the first right, the second wrong
    only_second: int = Field(ge=0)  # the second right, the first wrong
    both_wrong: int = Field(ge=0)

    @property
    def total(self) -> int:
        return self.both_right + self.only_first + self.only_second + self.both_wrong

    @property
    def first_right(self) -> int:
        return self.both_right + self.only_first

    @property
    def second_right(self) -> int:
        return self.both_right + self.only_second

    @property
    def mcnemar(self) -> float:
        """The exact McNemar p-value of the difference between the two."""
        return mcnemar_exact(self.only_first, self.only_second)


def paired(first: Sequence[bool], second: Sequence[bool]) -> Paired:
    """Count the 2x2 table of two answerers' outcomes, problem by problem (True: right)."""
    if len(first) != len(second):
        raise ValueError(f"paired outcomes need equal lengths, got {len(first)} and {len(second)}")
    pairs = [(bool(a), bool(b)) for a, b in zip(first, second, strict=True)]
    return Paired(
        both_right=pairs.count((True, True)),
        only_first=pairs.count((True, False)),
        only_second=pairs.count((False, True)),
        both_wrong=pairs.count((False, False)),
    )
