"""Anonymous labels: which answer is "Response A", decided by a seeded shuffle."""

from __future__ import annotations

import random
import string

LABEL_PREFIX = "Response "


def label_for(index: int) -> str:
    return f"{LABEL_PREFIX}{string.ascii_uppercase[index]}"


def assign_labels(models: list[str], rng: random.Random) -> dict[str, str]:
    """Label -> model, in a shuffled order so that a label says nothing of who wrote it.

    In a workflow, rng is workflow.random(), so the shuffle replays identically.
    """
    order = list(models)
    rng.shuffle(order)
    return {label_for(i): model for i, model in enumerate(order)}


def labels_shown_to(reviewer: str, label_to_model: dict[str, str]) -> list[str]:
    """Every label but the reviewer's own: no model reviews itself."""
    return [label for label, model in label_to_model.items() if model != reviewer]


def presentation_orders(label_to_model: dict[str, str], rng: random.Random) -> dict[str, list[str]]:
    """Reviewer -> the order it is shown the other answers in, to control position bias.

    The labels go round a circle in a seeded shuffle; each reviewer reads the circle from
    the answer after its own. Every answer is then shown first to exactly one reviewer
    and last to exactly one, and reviewers disagree on which of two answers comes first.
    Labels stay the same for everyone: only the order of presentation differs.
    """
    circle = list(label_to_model)
    rng.shuffle(circle)
    orders = {}
    for position, label in enumerate(circle):
        after = circle[position + 1 :] + circle[:position]
        orders[label_to_model[label]] = after
    return orders
