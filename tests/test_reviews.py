"""parse_review on realistic review texts (tests/review_cases.py) and on its edge rules."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from council.reviews import INFERRED_BEST, INFERRED_WORST, parse_review
from tests.review_cases import CASES, ReviewCase

pytestmark = pytest.mark.fast

A, B, C, D = (f"Response {x}" for x in "ABCD")


def test_there_are_enough_realistic_cases():
    assert len(CASES) >= 20
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_realistic_review(case: ReviewCase):
    parsed = parse_review(case.text, case.shown)

    assert parsed.ranking == case.ranking
    assert parsed.ratings == pytest.approx(case.ratings)
    assert parsed.ratings_inferred is case.inferred
    assert parsed.found_final_section is case.final_section
    assert set(parsed.ranking) <= set(case.shown)
    assert set(parsed.ratings) <= set(case.shown)
    assert set(parsed.critiques) <= set(case.shown)
    if case.critiqued is not None:
        assert set(parsed.critiques) == case.critiqued
    for label, phrases in case.says.items():
        for phrase in phrases:
            assert phrase in parsed.critiques.get(label, ""), (label, phrase, parsed.critiques)
    for label, phrases in case.never.items():
        for phrase in phrases:
            assert phrase not in parsed.critiques.get(label, ""), (label, phrase, parsed.critiques)


def test_none_is_an_empty_review():
    parsed = parse_review(None, [A, B])
    assert (parsed.ranking, parsed.ratings, parsed.critiques) == ([], {}, {})
    assert not parsed.ratings_inferred


def test_inferred_ratings_run_from_best_to_worst_evenly():
    text = "FINAL RANKING:\n1. Response D\n2. Response B\n3. Response A\n4. Response C"
    parsed = parse_review(text, [A, B, C, D])
    assert parsed.ratings_inferred
    assert [parsed.ratings[label] for label in parsed.ranking] == pytest.approx(
        [INFERRED_BEST, 10 / 3, 8 / 3, INFERRED_WORST], abs=0.01
    )


def test_a_single_ranked_answer_gets_the_middle_rating():
    parsed = parse_review("FINAL RANKING:\n1. Response B", [B])
    assert parsed.ranking == [B]
    assert parsed.ratings == {B: (INFERRED_BEST + INFERRED_WORST) / 2}
    assert parsed.ratings_inferred


def test_partial_ratings_are_not_inferred_for_the_rest():
    text = "FINAL RANKING:\n1. Response A (5/5)\n2. Response B\n3. Response C"
    parsed = parse_review(text, [A, B, C])
    assert parsed.ranking == [A, B, C]
    assert parsed.ratings == {A: 5}
    assert not parsed.ratings_inferred


@pytest.mark.parametrize(
    ("line", "rating"),
    [
        ("1. Response A (4/5)", 4),
        ("1. Response A - 4.5/5", 4.5),
        ("1. Response A: 4 out of 5", 4),
        ("1. Response A - Rating: 3/5", 3),
        ("1. Response A - Score: 2", 2),
        ("1. Response A - Rating: 4. Strong.", 4),
        ("1. Response A - rated 3.5 overall", 3.5),
        ("1. Response A (7/10)", 3.5),
        ("1. Response A (0/5) - nothing usable", 1),
        ("1. Response A **4/5**", 4),
    ],
)
def test_rating_forms_on_a_ranking_line(line: str, rating: float):
    parsed = parse_review(f"FINAL RANKING:\n{line}\n2. Response B (3/5)", [A, B])
    assert parsed.ratings[A] == pytest.approx(rating)


@pytest.mark.parametrize(
    "line",
    [
        "1. Response A (6/5) - impossible",
        "1. Response A - released 4/5/2024",
        "1. Response A - passes 4/50 tests",
        "1. Response A - 12/5 stars",
        "1. Response A - scored 10 points higher",
    ],
)
def test_numbers_that_are_not_ratings_are_ignored(line: str):
    parsed = parse_review(f"FINAL RANKING:\n{line}\n2. Response B (3/5)", [A, B])
    assert A not in parsed.ratings
    assert parsed.ranking == [A, B]


def test_the_last_final_ranking_outside_quotations_wins():
    text = (
        "FINAL RANKING:\n1. Response A\n2. Response B\n\n"
        "On reflection I change my mind.\n\n"
        "FINAL RANKING:\n1. Response B (4/5)\n2. Response A (3/5)\n"
    )
    parsed = parse_review(text, [A, B])
    assert parsed.ranking == [B, A]
    assert parsed.ratings == {B: 4, A: 3}


def test_a_final_ranking_heading_naming_no_shown_label_is_not_a_section():
    text = (
        "**Response A** (4/5): fine.\n**Response B** (2/5): weak.\n\n"
        "FINAL RANKING:\n1. Response C (5/5)\n"
    )
    parsed = parse_review(text, [A, B])
    assert not parsed.found_final_section
    assert parsed.ranking == [A, B]


def test_final_ranking_heading_beats_an_earlier_plain_ranking_heading():
    text = (
        "Ranking:\n1. Response A\n2. Response B\n\n"
        "Some more thoughts about both.\n\n"
        "FINAL RANKING:\n1. Response B\n2. Response A\n\n"
        "Ranking: not that it matters, Response A was close.\n"
    )
    assert parse_review(text, [A, B]).ranking == [B, A]


def test_prose_that_starts_with_rankings_is_not_a_heading():
    text = (
        "FINAL RANKING:\n1. Response A (4/5)\n2. Response B (3/5)\n\n"
        "Rankings aside, Response B was close to Response A.\n"
    )
    assert parse_review(text, [A, B]).ranking == [A, B]


def test_unclosed_fence_hides_everything_after_it():
    # A quotation the reviewer never closed cannot be told from its own words: the parser
    # errs on the side of ignoring it rather than letting quoted text rank answers.
    text = (
        "Response A is fine (4/5).\n```\nFINAL RANKING:\n1. Response B (5/5)\n2. Response A (1/5)\n"
    )
    parsed = parse_review(text, [A, B])
    assert parsed.ranking == [A]
    assert parsed.ratings == {A: 4}


def test_quoted_label_is_still_the_reviewers_own_wording():
    text = (
        '"Response A" (4/5): clear.\n'
        '"Response B" (2/5): vague.\n'
        'FINAL RANKING: "Response A" > "Response B"'
    )
    parsed = parse_review(text, [A, B])
    assert parsed.ranking == [A, B]
    assert parsed.ratings == {A: 4, B: 2}


def test_critique_is_capped():
    text = "**Response A** (3/5): " + "word " * 2000 + "\nFINAL RANKING:\n1. Response A"
    parsed = parse_review(text, [A])
    assert 0 < len(parsed.critiques[A]) <= 1500


def _parse_seconds(text: str) -> float:
    """The least CPU time of three parses: what the parse costs, not what the machine's
    other work costs it."""
    import time

    spent = []
    for _ in range(3):
        started = time.process_time()
        parse_review(text, [A, B])
        spent.append(time.process_time() - started)
    return min(spent)


@pytest.mark.parametrize(
    "nasty",
    [
        lambda n: (" " * n + "*" * n + "response" + "-" * n + "\n") * 5,
        lambda n: "1" * (4 * n) + "/5\n" + '"' * (2 * n + 1),
        lambda n: "\u201c" * (13 * n),  # opening quotes that never close
        lambda n: "FINAL RANKING: Response Z\n" * (n // 2),  # headings no shown label follows
        lambda n: "FINAL RANKING" + " " * (12 * n),
        lambda n: "**Response A** " * (n * 4 // 5),
    ],
    ids=[
        "markup-runs",
        "digits-and-quotes",
        "open-curly-quotes",
        "many-headings",
        "heading-spaces",
        "bold-labels",
    ],
)
def test_pathological_reviews_parse_in_linear_time(nasty: Callable[[int], str]):
    # Eight times the text costs about eight times the time when the parse is linear, 64
    # times when it is quadratic: the ratio, not a time, so that a busy machine passes.
    # 2,500 is about the size of a long reply.
    small, large = _parse_seconds(nasty(2500)), _parse_seconds(nasty(20000))
    assert large < 24 * max(small, 1e-3), (small, large)


# --- noise is no critique: replies a small real model gave -----------------------------------


def test_a_line_that_only_lists_labels_is_no_critique():
    # The reviewer wrote Response A; it was shown B and C. A real 135M model's whole review.
    reply = "1. Response C, Response B\n2. Response A, Response B"
    parsed = parse_review(reply, ["Response B", "Response C"])
    assert parsed.critiques == {}
    assert all("Response A" not in text for text in parsed.critiques.values())


def test_a_passing_mention_is_no_critique():
    reply = (
        "Both answers explain the idea. After reading them both, my preference is given to "
        "Response B."
    )
    parsed = parse_review(reply, ["Response B", "Response C"])
    assert parsed.critiques == {}


def test_a_comparison_with_the_reviewers_own_answer_reaches_no_one():
    reply = "Response A is better than Response B because it has examples. Response B is short."
    parsed = parse_review(reply, ["Response B", "Response C"])
    assert parsed.critiques == {"Response B": "Response B is short."}


def test_a_sentence_about_the_reviewers_own_answer_reaches_no_one():
    reply = (
        "**Response B** (3/5): Response B copies Response A, the best of the three. It "
        "misses the units.\n\n**Response C** (4/5): Clear, with an example."
    )
    parsed = parse_review(reply, ["Response B", "Response C"])
    assert parsed.critiques == {
        "Response B": "It misses the units.",
        "Response C": "Clear, with an example.",
    }
    assert parsed.ratings == {"Response B": 3.0, "Response C": 4.0}


@pytest.mark.parametrize("reason", ["4.0", "(4/5)", "Response C", "-", "5 out of 5"])
def test_a_score_or_a_label_alone_is_no_critique(reason: str):
    parsed = parse_review(f"FINAL RANKING:\n1. Response C (4/5) {reason}", ["Response C"])
    assert parsed.ranking == ["Response C"] and parsed.critiques == {}
