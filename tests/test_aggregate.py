"""Aggregate rankings: average rank (lower is better), mean peer rating, counts, order."""

from __future__ import annotations

import pytest

from council.aggregate import aggregate_rankings, mean_ratings
from council.stages import Stage2Result

pytestmark = pytest.mark.fast

A, B, C = "Response A", "Response B", "Response C"
LABELS = {A: "m1", B: "m2", C: "m3"}


def review(model: str, ranking: list[str], ratings: dict[str, float]) -> Stage2Result:
    return Stage2Result(model=model, ranking="(text)", parsed_ranking=ranking, ratings=ratings)


def by_model(rows):
    return {row.model: row for row in rows}


def test_average_rank_mean_rating_and_counts():
    reviews = [
        review("m1", [B, C], {B: 5, C: 3}),
        review("m2", [A, C], {A: 4, C: 2}),
        review("m3", [B, A], {B: 4, A: 3}),
    ]
    rows = by_model(aggregate_rankings(reviews, LABELS))

    # m1 (A): ranked 1st by m2 and 2nd by m3; rated 4 and 3.
    assert (rows["m1"].average_rank, rows["m1"].mean_rating) == (1.5, 3.5)
    # m2 (B): 1st and 1st; 5 and 4.
    assert (rows["m2"].average_rank, rows["m2"].mean_rating) == (1.0, 4.5)
    # m3 (C): 2nd and 2nd; 3 and 2.
    assert (rows["m3"].average_rank, rows["m3"].mean_rating) == (2.0, 2.5)
    assert all(row.rankings_count == 2 and row.ratings_count == 2 for row in rows.values())
    assert rows["m1"].label == A


def test_best_first_by_average_rank():
    reviews = [
        review("m1", [B, C], {}),
        review("m2", [A, C], {}),
        review("m3", [B, A], {}),
    ]
    assert [row.model for row in aggregate_rankings(reviews, LABELS)] == ["m2", "m1", "m3"]


def test_ties_on_rank_go_to_the_higher_mean_rating_then_the_label():
    reviews = [review("m1", [B, C], {B: 3}), review("m2", [A, C], {A: 3})]
    rows = aggregate_rankings(reviews, LABELS)
    # A and B are both ranked first once and rated 3: the label decides.
    assert rows[0].average_rank == rows[1].average_rank == 1.0
    assert [row.label for row in rows] == [A, B, C]

    reviews[0] = review("m1", [B, C], {B: 5})
    assert [row.label for row in aggregate_rankings(reviews, LABELS)] == [B, A, C]


def test_self_reviews_never_count_even_when_parsed():
    # A parser bug or a hand-built record lets m1 rank and rate its own answer first.
    reviews = [
        review("m1", [A, B, C], {A: 5, B: 1, C: 1}),
        review("m2", [C, A], {C: 4, A: 2}),
    ]
    rows = by_model(aggregate_rankings(reviews, LABELS))

    assert (rows["m1"].average_rank, rows["m1"].mean_rating) == (2.0, 2.0)
    assert (rows["m1"].rankings_count, rows["m1"].ratings_count) == (1, 1)
    # Nor does m1's self-entry push B and C down its list: they are its 1st and 2nd.
    assert rows["m2"].average_rank == 1.0
    assert rows["m3"].average_rank == 1.5  # (2 + 1) / 2
    assert rows["m3"].mean_rating == 2.5


def test_unknown_and_repeated_labels_are_ignored():
    reviews = [review("m1", ["Response Z", B, C, B], {"Response Z": 5, B: 4})]
    rows = by_model(aggregate_rankings(reviews, LABELS))
    assert (rows["m2"].average_rank, rows["m2"].rankings_count) == (1.0, 1)
    assert rows["m3"].average_rank == 2.0
    assert rows["m2"].mean_rating == 4.0
    assert len(rows) == 3


def test_unranked_models_come_last_with_empty_figures():
    reviews = [review("m1", [B], {B: 4}), review("m3", [], {A: 2})]
    rows = aggregate_rankings(reviews, LABELS)

    assert [row.model for row in rows] == ["m2", "m1", "m3"]
    unranked = by_model(rows)["m3"]
    assert (unranked.average_rank, unranked.mean_rating) == (None, None)
    assert (unranked.rankings_count, unranked.ratings_count) == (0, 0)
    # Rated but never ranked: a mean rating and no average rank.
    assert (by_model(rows)["m1"].average_rank, by_model(rows)["m1"].mean_rating) == (None, 2.0)


def test_figures_are_rounded_to_two_places():
    reviews = [
        review("m2", [A], {A: 4}),
        review("m3", [B, A], {A: 4}),
        review("m3", [B, A], {A: 5}),  # a second review stage
    ]
    row = by_model(aggregate_rankings(reviews, LABELS))["m1"]
    assert row.average_rank == 1.67
    assert row.mean_rating == 4.33


def test_no_reviews():
    rows = aggregate_rankings([], LABELS)
    assert [row.label for row in rows] == [A, B, C]
    assert mean_ratings(rows) == {}


def test_mean_ratings_lists_only_rated_models():
    reviews = [review("m1", [B, C], {B: 4.5}), review("m2", [A], {A: 2})]
    assert mean_ratings(aggregate_rankings(reviews, LABELS)) == {"m2": 4.5, "m1": 2.0}


def test_presentation_order_changes_neither_the_parse_nor_the_aggregate():
    """A reviewer shown the answers in another order rates them the same way, and the
    aggregate is computed from labels, never from positions."""
    from council.prompts import review_prompt
    from council.reviews import read_review
    from simulator.personas import persona_for
    from simulator.personas import review as simulated_review
    from simulator.reading import read_prompt

    answers = {
        A: "[simulated] Short: it depends.",
        B: "[simulated] A longer answer, because reasons matter; for example, this one.",
        C: "[simulated] - one\n- two\n- three\nHowever, a caveat applies.",
    }
    labels = {A: "m1", B: "m2", C: "m3"}
    reviewer = "sim/borealis"
    results = []
    for order in ([A, B, C], [C, A, B], [B, C, A]):
        prompt = review_prompt("Why?", {label: answers[label] for label in order}, 64_000)
        text = simulated_review(persona_for(reviewer), read_prompt(prompt[0].content))
        results.append(read_review(reviewer, text, {**labels, "Response D": reviewer}, order)[0])
    assert results[0].ratings == results[1].ratings == results[2].ratings
    assert [r.presented_order for r in results] == [[A, B, C], [C, A, B], [B, C, A]]
    aggregates = [aggregate_rankings([r], {**labels, "Response D": reviewer}) for r in results]
    assert aggregates[0] == aggregates[1] == aggregates[2]


def test_lowest_rating_is_the_lowest_individual_peer_rating():
    reviews = [
        review("m1", [B, C], {B: 5, C: 1}),
        review("m2", [A, C], {A: 4, C: 5}),
        review("m3", [B, A], {B: 4, A: 4}),
    ]
    rows = by_model(aggregate_rankings(reviews, LABELS))
    assert (rows["m3"].mean_rating, rows["m3"].lowest_rating) == (3.0, 1)
    assert rows["m1"].lowest_rating == 4 and rows["m2"].lowest_rating == 4
