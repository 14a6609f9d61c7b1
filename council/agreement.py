"""Where the council agrees and where it does not, from one review round's ratings.

The figures, over the 1-5 ratings (reviewer x answer; a reviewer never rates its own
answer, and a reviewer that failed leaves its row empty):

- **alpha**: Krippendorff's alpha with the ordinal metric, which allows missing cells.
  Each answer is a unit, each reviewer a coder; an answer rated once pairs with nothing
  and does not count. alpha is 1 when the reviewers agree on every answer, about 0 when
  their ratings agree no better than chance, negative when they disagree
  systematically. It is None when no answer has two ratings (nothing to compare) and
  when every rating that pairs is the same value (no disagreement is expected, so the
  ratio is 0/0; the level then says `high`).
- **kendall_w**: Kendall's coefficient of concordance over the rankings (each reviewer
  ranks the answers it saw, never its own: incomplete rankings): see `kendall_w`.
- **dissent**: a reviewer whose rating of an answer is at least 2 points from the median
  of the other ratings of that answer (see `dissents`).
- **level**: `high`, `medium` or `low` (see `level_of`). It is computed from the peer
  ratings only, never from any confidence a model reports about itself.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Mapping, Sequence
from statistics import median
from typing import Literal

from pydantic import BaseModel, Field

Level = Literal["high", "medium", "low"]
LEVELS: tuple[Level, ...] = ("low", "medium", "high")  # from least to most agreement

# Krippendorff's customary limits: alpha >= 0.800 for data one can rely on, 0.667 the
# lowest from which tentative conclusions may be drawn.
RELIABLE_ALPHA = 0.8
TENTATIVE_ALPHA = 0.667
# Ratings this far apart (or further) are a disagreement about an answer.
DISSENT_POINTS = 2.0
MIN_RATING, MAX_RATING = 1.0, 5.0
# An answer a reviewer ranks, or several it ranks as equal (a tie), in a ranking best first.
Ranking = Sequence[str | Collection[str]]

_EPSILON = 1e-9


class Dissent(BaseModel):
    """A reviewer whose rating of an answer stands apart from the others' ratings of it."""

    reviewer: str  # model id
    author: str  # model id of the answer's author
    rating: float
    others_median: float
    critique: str = ""  # what the reviewer wrote about that answer


class AnswerAgreement(BaseModel):
    """One answer's peer ratings and how far apart they are."""

    author: str  # model id
    ratings: dict[str, float] = Field(default_factory=dict)  # reviewer model id -> rating
    median: float | None = None  # None: not rated
    spread: float | None = None  # highest minus lowest rating; None: fewer than two


class Agreement(BaseModel):
    """How far one review round's reviewers agree. Every field has a default, so a
    record written before agreement was measured still reads."""

    level: Level | None = None  # None: no answer has two ratings, nothing to compare
    alpha: float | None = None  # Krippendorff's alpha, ordinal (3 decimals)
    kendall_w: float | None = None  # Kendall's W over the rankings (3 decimals)
    reviewers: list[str] = Field(default_factory=list)  # model ids that rated an answer
    answers: list[AnswerAgreement] = Field(default_factory=list)
    dissent: list[Dissent] = Field(default_factory=list)


class AgreementTrend(BaseModel):
    """Agreement round after round (the first review, then each refinement's review)."""

    levels: list[Level | None] = Field(default_factory=list)
    alphas: list[float | None] = Field(default_factory=list)
    # The last measured round against the first: up, down or flat; None: fewer than two
    # rounds measured.
    direction: Literal["up", "down", "flat"] | None = None

    @property
    def raised(self) -> bool | None:
        """Whether refinement raised agreement; None when it cannot be told."""
        return None if self.direction is None else self.direction == "up"


def measure_agreement(
    ratings: Mapping[str, Mapping[str, float]],
    rankings: Mapping[str, Ranking] | None = None,
    critiques: Mapping[tuple[str, str], str] | None = None,
) -> Agreement:
    """The agreement of one review round.

    ratings: reviewer model id -> author model id -> rating 1-5. rankings: reviewer ->
    the authors it ranked, best first. critiques: (reviewer, author) -> what the reviewer
    wrote about that answer, carried into each dissent. A rating or ranking of the
    reviewer's own answer does not count.
    """
    table = rating_table(ratings)
    answers = [
        AnswerAgreement(
            author=author,
            ratings=given,
            median=median(given.values()) if given else None,
            spread=max(given.values()) - min(given.values()) if len(given) > 1 else None,
        )
        for author, given in table.items()
    ]
    alpha = ordinal_alpha(ratings)
    dissent = dissents(ratings, critiques)
    w = kendall_w(rankings or {})
    return Agreement(
        level=level_of(alpha, answers, dissent),
        alpha=None if alpha is None else round(alpha, 3),
        kendall_w=None if w is None else round(w, 3),
        reviewers=[r for r, row in ratings.items() if any(a != r for a in row)],
        answers=answers,
        dissent=dissent,
    )


def rating_table(ratings: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Author -> reviewer -> rating, without self-ratings; each rating checked."""
    table: dict[str, dict[str, float]] = {}
    for reviewer, row in ratings.items():
        for author, rating in row.items():
            if isinstance(rating, bool) or not isinstance(rating, int | float):
                raise ValueError(
                    f"ratings[{reviewer!r}][{author!r}] must be a number from 1 to 5, "
                    f"got {rating!r}"
                )
            if not MIN_RATING <= rating <= MAX_RATING:  # NaN fails this too
                raise ValueError(
                    f"ratings[{reviewer!r}][{author!r}] must be from 1 to 5, got {rating!r}"
                )
            if author != reviewer:
                table.setdefault(author, {})[reviewer] = float(rating)
    # Answers in the order their authors first appear: as reviewers, then as authors.
    return {
        author: table[author] for author in dict.fromkeys([*ratings, *table]) if author in table
    }


def ordinal_alpha(ratings: Mapping[str, Mapping[str, float]]) -> float | None:
    """Krippendorff's alpha, ordinal metric, over reviewer -> author -> rating.

    As in Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": the values
    that pair (those of answers rated at least twice) fill a coincidence matrix o, each
    answer's m ratings adding 1/(m-1) per ordered pair of them; n_c counts value c among
    them, n their total. The ordinal difference of values c <= k is
    (n_c/2 + n_{c+1} + ... + n_{k-1} + n_k/2)^2, and alpha = 1 - (n - 1) *
    sum(o_ck * d_ck) / sum(n_c * n_k * d_ck). None when no answer has two ratings, or
    when all values that pair are the same (the expected disagreement is 0).
    """
    units = [list(given.values()) for given in rating_table(ratings).values() if len(given) > 1]
    values = sorted({value for unit in units for value in unit})
    if len(values) < 2:
        return None
    index = {value: i for i, value in enumerate(values)}
    size = len(values)
    coincidences = [[0.0] * size for _ in range(size)]
    for unit in units:
        weight = 1.0 / (len(unit) - 1)
        for a, first in enumerate(unit):
            for b, second in enumerate(unit):
                if a != b:
                    coincidences[index[first]][index[second]] += weight
    counts = [sum(row) for row in coincidences]
    total = sum(counts)
    # Cumulative counts: below[c] = n_0 + ... + n_{c-1}.
    below = [0.0]
    for count in counts:
        below.append(below[-1] + count)
    observed = expected = 0.0
    for c in range(size):
        for k in range(c + 1, size):
            difference = (below[k + 1] - below[c] - (counts[c] + counts[k]) / 2) ** 2
            observed += 2 * coincidences[c][k] * difference
            expected += 2 * counts[c] * counts[k] * difference
    return 1.0 - (total - 1) * observed / expected


def kendall_w(rankings: Mapping[str, Ranking]) -> float | None:
    """Kendall's coefficient of concordance W over the reviewers' rankings, 0 to 1.

    Each reviewer ranks the answers it saw, best first; an entry that is a collection of
    authors is a tie among them. The reviewer's own answer and repeated answers (after
    their first place) are left out, and so is a reviewer left with fewer than two.
    Each reviewer's ranks become midranks centred on its own mean, c = rank - (k + 1) / 2
    over the k answers it ranked; each answer's centred ranks are summed (C), S = sum(C^2).

    W is defined where the design is balanced, as in the textbooks:
    - complete rankings (every reviewer ranks the same n answers): Kendall's W,
      12 S / (m^2 (n^3 - n) - m sum(T)), with Kendall's correction T = t^3 - t for each
      group of t tied answers (written here as S / (m sum(c^2)), the same figure);
    - balanced incomplete rankings (every two answers ranked together by the same number
      lambda of reviewers, as in a full council where each member ranks the others):
      Durbin's W, 12 S / (lambda^2 n (n^2 - 1)). A tie there keeps its midranks without
      a correction, so it counts as half agreement and W stays at most 1.
    When a review failed the design is unbalanced; W is then taken over the answers of
    the reviewers that ranked (each of them ranks all the others', a balanced design),
    and is None when that is unbalanced too (a reviewer left answers unranked).

    Without ties, W is 1 exactly when one shared order of the answers fits every
    ranking; it is 0 when the answers' rank sums are all equal (a cycle, or reviewers
    that cancel out). None also where no two rankings could contradict each other (one
    reviewer left, or two members each ranking one answer) and where every ranking ties
    all its answers.
    """
    blocks = _blocks(rankings)
    together = _together(blocks.values())
    if together is None:  # the answers of the reviewers that ranked
        blocks = _blocks(rankings, keep=set(blocks))
        together = _together(blocks.values())
    if not together or not _can_contradict(blocks.values()):
        return None
    sums: dict[str, float] = {}
    for block in blocks.values():
        for author, score in block.items():
            sums[author] = sums.get(author, 0.0) + score
    s = sum(value * value for value in sums.values())
    n = len(sums)
    if all(len(block) == n for block in blocks.values()):  # complete: Kendall's, tie-corrected
        largest = len(blocks) * sum(c * c for block in blocks.values() for c in block.values())
    else:  # balanced incomplete: Durbin's
        largest = together * together * n * (n * n - 1) / 12
    if largest <= _EPSILON:
        return None
    return min(1.0, s / largest)  # the min only absorbs rounding


def _blocks(
    rankings: Mapping[str, Ranking], keep: set[str] | None = None
) -> dict[str, dict[str, float]]:
    """Reviewer -> author -> centred midrank, for each reviewer that ranked two answers or
    more (of those in keep, if given)."""
    blocks: dict[str, dict[str, float]] = {}
    for reviewer, ranking in rankings.items():
        seen: set[str] = set()
        groups: list[list[str]] = []
        for entry in ranking:
            members = [entry] if isinstance(entry, str) else list(entry)
            group = [
                a
                for a in dict.fromkeys(members)
                if a != reviewer and a not in seen and (keep is None or a in keep)
            ]
            seen.update(group)
            if group:
                groups.append(group)
        if len(seen) < 2:
            continue
        mean = (len(seen) + 1) / 2
        block: dict[str, float] = {}
        place = 1
        for group in groups:
            for author in group:
                block[author] = place + (len(group) - 1) / 2 - mean
            place += len(group)
        blocks[reviewer] = block
    return blocks


def _together(blocks: Collection[Mapping[str, float]]) -> int | None:
    """How many reviewers ranked each two answers together, when that is the same for every
    two (a balanced design); None otherwise, 0 when nothing was ranked."""
    answers = sorted({author for block in blocks for author in block})
    counts = {
        sum(a in block and b in block for block in blocks)
        for a, b in itertools.combinations(answers, 2)
    }
    if len(counts) > 1:
        return None
    return counts.pop() if counts else 0


def _can_contradict(blocks: Collection[Mapping[str, float]]) -> bool:
    """Whether some rankings over these answer sets could disagree: the graph joining each
    reviewer to the answers it ranked has a cycle (a forest can always be agreed on)."""
    parent: dict[tuple[int, str], tuple[int, str]] = {}

    def root(node: tuple[int, str]) -> tuple[int, str]:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for number, block in enumerate(blocks):
        for author in block:
            a, b = root((0, str(number))), root((1, author))
            if a == b:
                return True
            parent[a] = b
    return False


def dissents(
    ratings: Mapping[str, Mapping[str, float]],
    critiques: Mapping[tuple[str, str], str] | None = None,
) -> list[Dissent]:
    """The reviewers whose rating of an answer is at least DISSENT_POINTS from the median
    of the other ratings of that answer (an answer rated once has no dissent).

    When every rating of an answer is that far from the others (the council split on it,
    as with a 1 and a 4 from two reviewers, or two 1s against two 4s), nobody holds the
    common ground the others stand on: the smaller camp dissents, and when the camps are
    the same size, the lower one, whose critique holds the objection the chairman must
    not miss. Dissents come answer by answer, in the order the answers' authors first
    appear in ratings (as reviewers, then as authors).
    """
    critiques = critiques or {}
    found: list[Dissent] = []
    for author, given in rating_table(ratings).items():
        apart: list[Dissent] = []
        for reviewer, rating in given.items():
            others = [r for other, r in given.items() if other != reviewer]
            if not others:
                continue
            middle = median(others)
            if abs(rating - middle) >= DISSENT_POINTS - _EPSILON:
                apart.append(
                    Dissent(
                        reviewer=reviewer,
                        author=author,
                        rating=rating,
                        others_median=middle,
                        critique=critiques.get((reviewer, author), ""),
                    )
                )
        if apart and len(apart) == len(given):
            midpoint = (max(given.values()) + min(given.values())) / 2
            low = [d for d in apart if d.rating < midpoint]
            high = [d for d in apart if d.rating > midpoint]
            apart = low if len(low) <= len(high) else high
        found.extend(apart)
    return found


def level_of(
    alpha: float | None, answers: Sequence[AnswerAgreement], dissent: Sequence[Dissent]
) -> Level | None:
    """The agreement level from the figures.

    An answer is disputed when two of its ratings are DISSENT_POINTS or more apart.

    - `high`: no dissent, and either no answer is disputed (every answer's ratings lie
      within a point of each other; all ratings equal is the extreme case) or alpha is at
      least 0.800, Krippendorff's limit for data one can rely on.
    - `low`: alpha is below 0.667, the lowest limit he allows for tentative conclusions,
      and the disagreement is broad: dissents on two answers or more, or at least half of
      the answers rated twice disputed.
    - `medium`: anything between, such as one dissent on one answer.
    - None: no answer has two ratings (two members, or one reviewer left), so nothing
      can be compared.

    alpha alone would mislead on a council's few ratings: when nearly all ratings are 4
    and one is 5, the ratings barely vary and alpha is about 0 although the reviewers
    agree; hence the closeness of the ratings weighs first. Kendall's W is reported
    beside the level but does not set it: a reviewer's ranking mostly follows its
    ratings (the review parser derives one from the other when one is missing), so it
    would count the same judgement twice.
    """
    compared = [answer for answer in answers if answer.spread is not None]
    if not compared:
        return None
    disputed = [a for a in compared if (a.spread or 0.0) >= DISSENT_POINTS - _EPSILON]
    reliable = alpha is None or alpha >= RELIABLE_ALPHA  # None here: all ratings equal
    if not dissent and (not disputed or reliable):
        return "high"
    broad = len({d.author for d in dissent}) >= 2 or 2 * len(disputed) >= len(compared)
    if alpha is not None and alpha < TENTATIVE_ALPHA and broad:
        return "low"
    return "medium"


def compare_rounds(rounds: Sequence[Agreement]) -> AgreementTrend:
    """Agreement over the rounds, oldest first, and whether it went up: the last measured
    round against the first, by level, then by alpha (all ratings equal counts as 1)."""

    def standing(level: Level, alpha: float | None) -> tuple[int, float]:
        return LEVELS.index(level), 1.0 if alpha is None else alpha

    measured = [standing(r.level, r.alpha) for r in rounds if r.level is not None]
    direction: Literal["up", "down", "flat"] | None = None
    if len(measured) > 1:
        first, last = measured[0], measured[-1]
        direction = "up" if last > first else "down" if last < first else "flat"
    return AgreementTrend(
        levels=[r.level for r in rounds], alphas=[r.alpha for r in rounds], direction=direction
    )


def figure(agreement: Agreement) -> str:
    """The figure beside a measured level: alpha, or why there is none."""
    if agreement.alpha is not None:
        return f"alpha {agreement.alpha:.2f}"
    # Measured without alpha: every rating that pairs is the same.
    return "all ratings equal" if agreement.level == "high" else "alpha undefined"


# What the agreement measures: the reviewers' ratings, not the members' answers.
OF_RATINGS = "reviewers' agreement on their ratings"


def verdict(agreement: Agreement, most: int = 3) -> str:
    """One line: `reviewers' agreement on their ratings: high (alpha 0.91) · no dissent`, or
    `...: low (alpha 0.12) · 1 dissent: gamma rated alpha's answer 1/5 against a median of
    4`; at most `most` dissents are spelled out. It says how alike the reviewers rated the
    answers (not whether the members' answers agree)."""
    if agreement.level is None:
        return f"{OF_RATINGS}: not measured (no answer has two ratings)"
    head = f"{OF_RATINGS}: {agreement.level} ({figure(agreement)})"
    if not agreement.dissent:
        return f"{head} · no dissent"
    count = len(agreement.dissent)
    told = "; ".join(
        f"{d.reviewer} rated {d.author}'s answer {_number(d.rating)}/5 "
        f"against a median of {_number(d.others_median)}"
        for d in agreement.dissent[:most]
    )
    more = f"; and {count - most} more" if count > most else ""
    return f"{head} · {count} dissent{'s' if count > 1 else ''}: {told}{more}"


def independent_votes(agreement: Agreement) -> float | None:
    """How many independent votes the reviewers are worth: n / (1 + (n - 1) x alpha), the
    design effect of n raters whose ratings agree as Krippendorff's alpha says (alpha at
    most 0: n, as many as the reviewers; 1: one vote, every reviewer saying the same). One
    decimal; None without alpha or with fewer than two reviewers."""
    n = len(agreement.reviewers)
    if agreement.alpha is None or n < 2:
        return None
    alike = min(1.0, max(0.0, agreement.alpha))
    return round(n / (1 + (n - 1) * alike), 1)


def votes_note(agreement: Agreement) -> str | None:
    """`the 4 reviewers count as 1.4 independent opinions: ...`, in one plain sentence; None
    when it cannot be told."""
    votes = independent_votes(agreement)
    if votes is None:
        return None
    n = len(agreement.reviewers)
    plural = "" if votes == 1 else "s"
    return (
        f"the {n} reviewers count as {_number(votes)} independent opinion{plural}: the more "
        f"alike their ratings, the fewer (1 when all rate alike, {n} when no more alike than "
        "chance)"
    )


def _number(value: float) -> str:
    return str(int(value)) if math.isclose(value, round(value)) else f"{value:.2f}".rstrip("0")
