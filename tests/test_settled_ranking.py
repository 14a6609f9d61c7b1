"""The settled leader (council.aggregate.settled_leader): the answer first in the aggregate
ranking whatever the outstanding reviews say. Property tests against every review the
outstanding reviewers could write (each order of the answers it may rank, ratings at
either end, a review left out or failed) on small councils, and against random reviews on
larger ones."""

from __future__ import annotations

import itertools
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from council.aggregate import aggregate_rankings, settled_leader
from council.stages import Stage2Result
from tests.tiers import examples

pytestmark = pytest.mark.fast

# A council (label -> model), the reviews in hand, and the reviewers still outstanding.
Round = tuple[dict[str, str], list[Stage2Result], list[str]]


def council(size: int) -> dict[str, str]:
    return {f"Response {string.ascii_uppercase[i]}": f"m{i}" for i in range(size)}


def leader(reviews: list[Stage2Result], labels: dict[str, str]) -> str:
    return aggregate_rankings(reviews, labels)[0].label


def review(model: str, ranked: list[str], ratings: dict[str, float]) -> Stage2Result:
    return Stage2Result(model=model, ranking="(text)", parsed_ranking=ranked, ratings=ratings)


def reviews_of(model: str, labels: dict[str, str]) -> list[Stage2Result | None]:
    """Every review `model` could write, up to what moves the leader: each order of the
    answers it may rank, each at the lowest or highest rating, and none at all."""
    others = [label for label, author in labels.items() if author != model]
    possible: list[Stage2Result | None] = [None]
    for order in itertools.permutations(others):
        for ends in itertools.product((1.0, 5.0), repeat=len(order)):
            possible.append(review(model, list(order), dict(zip(order, ends, strict=True))))
    return possible


@st.composite
def a_review(draw: st.DrawFn, model: str, labels: dict[str, str]) -> Stage2Result:
    """A review `model` could write: some of the others' answers, in some order, rated or
    not (a review that ranks few answers, or rates without ranking, counts too)."""
    others = [label for label, author in labels.items() if author != model]
    order = draw(st.permutations(others))
    ranked = list(order[: draw(st.integers(0, len(order)))])
    rated = draw(st.lists(st.sampled_from(others), unique=True)) if others else []
    ratings = {label: draw(st.floats(1.0, 5.0)) for label in rated}
    return review(model, ranked, ratings)


@st.composite
def a_review_round(draw: st.DrawFn, max_size: int) -> Round:
    """A council, the reviews in hand, and the reviewers still outstanding."""
    labels = council(draw(st.integers(2, max_size)))
    members = list(labels.values())
    outstanding = draw(st.lists(st.sampled_from(members), unique=True))
    received = [
        draw(a_review(model, labels))
        for model in members
        if model not in outstanding and draw(st.booleans())  # some reviews failed
    ]
    return labels, received, outstanding


@settings(max_examples=examples(150), deadline=None)
@given(a_review_round(max_size=3))
def test_settled_exactly_when_no_outstanding_review_can_change_the_leader(
    round_: Round,
) -> None:
    labels, received, outstanding = round_
    first = leader(received, labels)
    leaders = {
        leader([*received, *(r for r in completion if r is not None)], labels)
        for completion in itertools.product(*(reviews_of(m, labels) for m in outstanding))
    }
    settled = settled_leader(received, outstanding, labels)
    if leaders == {first}:
        assert settled == first
    else:
        assert settled is None, (settled, leaders)


@settings(max_examples=examples(200), deadline=None)
@given(a_review_round(max_size=6), st.data())
def test_a_settled_leader_stays_first_whatever_the_outstanding_reviews_say(
    round_: Round, data: st.DataObject
) -> None:
    labels, received, outstanding = round_
    settled = settled_leader(received, outstanding, labels)
    if settled is None:
        return
    assert settled == leader(received, labels)
    late = [data.draw(a_review(model, labels)) for model in outstanding]
    assert leader([*received, *late], labels) == settled


def test_with_no_review_outstanding_the_leader_is_settled() -> None:
    labels = council(3)
    a, b, c = labels
    received = [review("m0", [b, c], {b: 4, c: 3}), review("m1", [a, c], {a: 5, c: 2})]
    assert settled_leader(received, [], labels) == leader(received, labels)


def test_a_lead_one_review_can_overturn_is_not_settled_and_a_lead_it_cannot_is() -> None:
    labels = council(4)
    a, b, c, d = labels
    # Three of four reviews: A first in all three (the one it may not rank: its own).
    received = [
        review("m1", [a, c, d], {a: 5, c: 2, d: 1}),
        review("m2", [a, b, d], {a: 5, b: 2, d: 1}),
        review("m3", [a, b, c], {a: 5, b: 2, c: 1}),
    ]
    # m0 (A's author) cannot rank A: whatever it says, A keeps 1.0 and leads.
    assert settled_leader(received, ["m0"], labels) == a
    # With only one review in hand, one more that ranks A last can overturn it.
    assert settled_leader(received[:1], ["m2", "m3"], labels) is None
