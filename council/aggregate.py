"""Aggregate rankings: average rank, mean peer rating and counts per model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean

from council.agreement import MAX_RATING, MIN_RATING, Agreement, measure_agreement
from council.stages import AggregateRanking, Stage2Result


def aggregate_rankings(
    reviews: Sequence[Stage2Result], label_to_model: Mapping[str, str]
) -> list[AggregateRanking]:
    """Best first: by average rank (lower is better), then by mean rating.

    A review of a model's own answer never counts, whatever the parser let through: nor
    does it push the other answers down that reviewer's list. Positions are counted among
    the labels that count, each once.
    """
    positions: dict[str, list[int]] = {label: [] for label in label_to_model}
    ratings: dict[str, list[float]] = {label: [] for label in label_to_model}

    def counts(label: str, reviewer: str) -> bool:
        return label in label_to_model and label_to_model[label] != reviewer

    for review in reviews:
        ranked = [
            label for label in dict.fromkeys(review.parsed_ranking) if counts(label, review.model)
        ]
        for position, label in enumerate(ranked, start=1):
            positions[label].append(position)
        for label, rating in review.ratings.items():
            if counts(label, review.model):
                ratings[label].append(rating)
    entries = [
        AggregateRanking(
            model=model,
            label=label,
            average_rank=round(fmean(positions[label]), 2) if positions[label] else None,
            mean_rating=round(fmean(ratings[label]), 2) if ratings[label] else None,
            lowest_rating=min(ratings[label]) if ratings[label] else None,
            rankings_count=len(positions[label]),
            ratings_count=len(ratings[label]),
        )
        for label, model in label_to_model.items()
    ]
    return sorted(
        entries,
        key=lambda e: (
            e.average_rank if e.average_rank is not None else float("inf"),
            -(e.mean_rating or 0.0),
            e.label,
        ),
    )


def settled_leader(
    reviews: Sequence[Stage2Result],
    outstanding: Sequence[str],
    label_to_model: Mapping[str, str],
) -> str | None:
    """The label first in the aggregate ranking (aggregate_rankings) whatever the
    `outstanding` reviewers (by model) will say, when the reviews in hand settle it; None
    when one of them could still change it.

    Exact, not a bound: for each rival of the leader, the outstanding reviews worst for the
    leader are tried (each reviewer ranks the rival first and the leader last among the
    answers it may rank, and rates them MAX_RATING and MIN_RATING); the leader is settled
    when it is still first in every such case. No other review is worse for it: a
    position or rating it does not get (a review that fails, or leaves it out) moves it
    less than the last position and the lowest rating, and the rival gains most from the
    first position and the highest rating."""
    if not label_to_model:
        return None
    leader = aggregate_rankings(reviews, label_to_model)[0].label
    for rival in label_to_model:
        if rival == leader:
            continue
        worst = [
            _review_against(reviewer, leader, rival, label_to_model) for reviewer in outstanding
        ]
        if aggregate_rankings([*reviews, *worst], label_to_model)[0].label != leader:
            return None
    return leader


def _review_against(
    reviewer: str, leader: str, rival: str, label_to_model: Mapping[str, str]
) -> Stage2Result:
    """The review by `reviewer` worst for `leader` against `rival`."""
    others = [label for label, model in label_to_model.items() if model != reviewer]
    middle = [label for label in others if label not in (leader, rival)]
    ranked = [label for label in (rival, *middle, leader) if label in others]
    ratings = {label: MAX_RATING if label == rival else MIN_RATING for label in (rival, leader)}
    return Stage2Result(
        model=reviewer,
        ranking="",
        parsed_ranking=ranked,
        ratings={label: value for label, value in ratings.items() if label in others},
    )


def mean_ratings(rankings: Sequence[AggregateRanking]) -> dict[str, float]:
    """Model -> mean peer rating, for the models that were rated at all."""
    return {e.model: e.mean_rating for e in rankings if e.mean_rating is not None}


def lowest_ratings(rankings: Sequence[AggregateRanking]) -> dict[str, float]:
    """Model -> its lowest individual peer rating, for the models that were rated at all."""
    return {e.model: e.lowest_rating for e in rankings if e.lowest_rating is not None}


def review_agreement(
    reviews: Sequence[tuple[Stage2Result, Mapping[str, str]]], label_to_model: Mapping[str, str]
) -> Agreement:
    """The agreement of one review round (council.agreement), by model id, from each
    review and the critiques read from it (label -> text). Ratings a reviewer did not give
    (inferred from its ranking's positions) do not count as ratings; its ranking does."""
    ratings: dict[str, dict[str, float]] = {}
    rankings: dict[str, list[str]] = {}
    critiques: dict[tuple[str, str], str] = {}
    for review, texts in reviews:
        author = {label: model for label, model in label_to_model.items() if model != review.model}
        if not review.ratings_inferred:
            ratings[review.model] = {
                author[label]: value for label, value in review.ratings.items() if label in author
            }
        rankings[review.model] = [
            author[label] for label in dict.fromkeys(review.parsed_ranking) if label in author
        ]
        for label, text in texts.items():
            if label in author:
                critiques[(review.model, author[label])] = text
    return measure_agreement(ratings, rankings, critiques)
