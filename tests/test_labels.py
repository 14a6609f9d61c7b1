"""Anonymous labels and each reviewer's presentation order (position-bias control)."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from council.labels import assign_labels, labels_shown_to, presentation_orders

pytestmark = pytest.mark.fast


def orders_for(models: list[str], seed: int) -> tuple[dict[str, str], dict[str, list[str]]]:
    rng = random.Random(seed)
    labels = assign_labels(models, rng)
    return labels, presentation_orders(labels, rng)


@given(size=st.integers(min_value=2, max_value=12), seed=st.integers())
def test_each_reviewer_sees_every_other_answer_once(size: int, seed: int) -> None:
    models = [f"m{i}" for i in range(size)]
    labels, orders = orders_for(models, seed)
    assert set(orders) == set(models)
    for reviewer, order in orders.items():
        assert sorted(order) == sorted(labels_shown_to(reviewer, labels))


@given(size=st.integers(min_value=2, max_value=12), seed=st.integers())
def test_every_answer_is_shown_first_once_and_last_once(size: int, seed: int) -> None:
    labels, orders = orders_for([f"m{i}" for i in range(size)], seed)
    assert sorted(order[0] for order in orders.values()) == sorted(labels)
    assert sorted(order[-1] for order in orders.values()) == sorted(labels)


@pytest.mark.parametrize("seed", range(50))
def test_over_four_members_two_reviewers_disagree_on_an_order(seed: int) -> None:
    _, orders = orders_for(["a", "b", "c", "d"], seed)
    disagreements = 0
    for first, second in itertools.combinations(orders.values(), 2):
        common = [label for label in first if label in second]
        disagreements += common != [label for label in second if label in common]
    assert disagreements >= 1


def test_orders_are_deterministic_for_a_seed_and_change_from_round_to_round() -> None:
    labels = {"Response A": "a", "Response B": "b", "Response C": "c", "Response D": "d"}
    assert presentation_orders(labels, random.Random(5)) == presentation_orders(
        labels, random.Random(5)
    )
    rng = random.Random(5)
    rounds = [presentation_orders(labels, rng) for _ in range(4)]
    assert len({str(r) for r in rounds}) > 1
