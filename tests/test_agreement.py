"""Agreement from the rating matrix: Krippendorff's alpha (ordinal), Kendall's W over
incomplete rankings, dissents, the level, the trend over rounds and the verdict line.

The hand-computed figures are worked in the comments; alpha is also checked against
Krippendorff's own worked example and against the `krippendorff` package."""

from __future__ import annotations

import itertools
import math

import krippendorff
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from council.agreement import (
    Agreement,
    AnswerAgreement,
    compare_rounds,
    dissents,
    independent_votes,
    kendall_w,
    level_of,
    measure_agreement,
    ordinal_alpha,
    verdict,
    votes_note,
)
from tests.tiers import examples

pytestmark = pytest.mark.fast

FAST = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
NAN = math.nan


def matrix(rows: dict[str, dict[str, float | None]]) -> dict[str, dict[str, float]]:
    return {r: {a: v for a, v in row.items() if v is not None} for r, row in rows.items()}


# Three members, each rating the two others' answers (the diagonal is empty).
ONE_DISSENT = {
    "alpha": {"beta": 4, "gamma": 4},
    "beta": {"alpha": 4, "gamma": 4},
    "gamma": {"alpha": 1, "beta": 4},
}
HARSH_GAMMA = {
    "alpha": {"beta": 5, "gamma": 4},
    "beta": {"alpha": 4, "gamma": 5},
    "gamma": {"alpha": 1, "beta": 1},
}


# Alpha: worked examples.


def test_krippendorffs_published_example_ordinal():
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", the example with
    # 4 observers, 12 units and missing values: 40 pairable values (n_1..n_5 = 9, 13, 10,
    # 5, 3) and ordinal alpha = 0.815.
    data = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, NAN, NAN, NAN],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, NAN, 3],
        [NAN, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, NAN],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, NAN],
    ]
    ratings = {
        f"observer{i}": {f"unit{u}": v for u, v in enumerate(row) if not math.isnan(v)}
        for i, row in enumerate(data)
    }
    alpha = ordinal_alpha(ratings)
    assert round(alpha, 3) == 0.815
    assert alpha == pytest.approx(krippendorff.alpha(data, level_of_measurement="ordinal"))


def test_one_dissent_three_members_hand_computed():
    # Pairable values: one 1 and five 4s (n = 6). The only disagreeing pair is alpha's
    # answer (1, 4): o_14 = o_41 = 1, d_14 = (1/2 + 5/2)^2 = 9.
    # alpha = 1 - (n - 1) * 2*9 / (2 * 1*5*9) = 1 - 5*18/90 = 0.
    assert ordinal_alpha(ONE_DISSENT) == pytest.approx(0.0)


def test_harsh_reviewer_hand_computed():
    # Units: alpha's answer (4, 1), beta's (5, 1), gamma's (4, 5); n_1 = n_4 = n_5 = 2.
    # d_14 = (1 + 1)^2 = 4, d_15 = (1 + 2 + 1)^2 = 16, d_45 = 4.
    # observed: 2 * (4 + 16 + 4) = 48; expected: 2 * 4 * (4 + 16 + 4) = 192.
    # alpha = 1 - 5 * 48 / 192 = -0.25: systematic disagreement.
    assert ordinal_alpha(HARSH_GAMMA) == pytest.approx(-0.25)


def test_missing_cells_failed_reviewer_hand_computed():
    # Four members; delta's review failed, so its row is empty.
    ratings = {
        "alpha": {"beta": 4, "gamma": 2, "delta": 5},
        "beta": {"alpha": 3, "gamma": 2, "delta": 5},
        "gamma": {"alpha": 3, "beta": 5, "delta": 4},
    }
    # Units: alpha's (3, 3), beta's (4, 5), gamma's (2, 2), delta's (5, 5, 4).
    # n_2 = n_3 = n_4 = 2, n_5 = 3, n = 9. Off the diagonal only o_45 = o_54 = 1 + 1
    # (beta's pair, and delta's answer: 2 ordered pairs x 1/2); d_45 = (1 + 1.5)^2 = 6.25,
    # so observed = 2 * 2 * 6.25 = 25. d_23 = 4, d_24 = 16, d_25 = 42.25, d_34 = 4,
    # d_35 = 20.25: expected = 2 * (16 + 64 + 253.5 + 16 + 121.5 + 37.5) = 1017.
    # alpha = 1 - 8 * 25 / 1017.
    assert ordinal_alpha(ratings) == pytest.approx(1 - 200 / 1017)
    found = measure_agreement(ratings)
    assert found.reviewers == ["alpha", "beta", "gamma"]
    assert found.level == "high" and found.dissent == []
    assert found.alpha == round(1 - 200 / 1017, 3)


def test_all_equal_is_high_and_alpha_undefined_not_an_error():
    ratings = {m: {a: 3 for a in "xyz" if a != m} for m in "xyz"}
    found = measure_agreement(ratings)
    assert found.alpha is None
    assert found.level == "high" and found.dissent == []
    assert all(answer.spread == 0 for answer in found.answers)
    assert (
        verdict(found)
        == "reviewers' agreement on their ratings: high (all ratings equal) · no dissent"
    )


def test_two_members_nothing_to_compare():
    # Each answer has one rating, and each ranking one answer.
    ratings = {"alpha": {"beta": 5}, "beta": {"alpha": 1}}
    found = measure_agreement(ratings, {"alpha": ["beta"], "beta": ["alpha"]})
    assert (found.alpha, found.kendall_w, found.level, found.dissent) == (None, None, None, [])
    assert [a.spread for a in found.answers] == [None, None]
    assert (
        verdict(found)
        == "reviewers' agreement on their ratings: not measured (no answer has two ratings)"
    )


def test_self_ratings_do_not_count():
    with_self = {r: {**row, r: 5} for r, row in ONE_DISSENT.items()}
    assert ordinal_alpha(with_self) == ordinal_alpha(ONE_DISSENT)
    assert measure_agreement(with_self) == measure_agreement(ONE_DISSENT)


@pytest.mark.parametrize("bad", [0, 6, 5.5, NAN, "4", True, None])
def test_a_rating_out_of_range_is_a_one_line_error_naming_the_cell(bad):
    with pytest.raises(ValueError, match=r"ratings\['gamma'\]\['alpha'\] must be") as error:
        measure_agreement({"gamma": {"alpha": bad}, "alpha": {"gamma": 3}})
    assert "\n" not in str(error.value) and "1 to 5" in str(error.value)


# Dissent.


def test_one_vs_four_with_three_members_names_the_low_rater():
    # gamma rates alpha's answer 1, beta rates it 4: 3 points from the others' median.
    # beta is as far from gamma's 1, but with two reviewers the lower camp dissents.
    critiques = {("gamma", "alpha"): "The proof skips the base case.", ("beta", "alpha"): "Fine."}
    found = measure_agreement(ONE_DISSENT, critiques=critiques)
    assert [d.model_dump() for d in found.dissent] == [
        {
            "reviewer": "gamma",
            "author": "alpha",
            "rating": 1.0,
            "others_median": 4.0,
            "critique": "The proof skips the base case.",
        }
    ]
    # One dissent on one answer of three: medium, not high.
    assert found.level == "medium"
    assert verdict(found) == (
        "reviewers' agreement on their ratings: medium (alpha 0.00) · 1 dissent: gamma rated "
        "alpha's answer 1/5 "
        "against a median of 4"
    )


def test_harsh_reviewer_dissents_on_every_answer_it_rated_and_the_level_is_low():
    found = measure_agreement(HARSH_GAMMA)
    assert [(d.reviewer, d.author, d.others_median) for d in found.dissent] == [
        ("gamma", "alpha", 4.0),
        ("gamma", "beta", 5.0),
    ]
    assert found.level == "low"
    assert verdict(found) == (
        "reviewers' agreement on their ratings: low (alpha -0.25) · 2 dissents: gamma rated "
        "alpha's answer 1/5 against "
        "a median of 4; gamma rated beta's answer 1/5 against a median of 5"
    )


def test_dissent_needs_two_points_from_the_median_of_the_others():
    def who(ratings: dict[str, float]) -> list[str]:
        return [d.reviewer for d in dissents({r: {"x": v} for r, v in ratings.items()})]

    assert who({"a": 2, "b": 4, "c": 4}) == ["a"]  # 2 points: a dissent
    assert who({"a": 3, "b": 4, "c": 5}) == []  # 1 point from each median
    assert who({"a": 2.5, "b": 4, "c": 4}) == []  # 1.5 points
    assert who({"a": 1, "b": 3, "c": 5}) == ["a", "c"]  # both ends, b holds the middle
    assert who({"a": 4}) == []  # no other rating
    # Splits, where every rating is 2 points from the others' median: the smaller camp
    # dissents, the lower one when the camps are equal.
    assert who({"a": 1, "b": 1, "c": 4, "d": 4}) == ["a", "b"]
    assert who({"a": 5, "b": 5, "c": 1, "d": 1, "e": 1}) == ["a", "b"]
    assert who({"a": 4, "b": 1}) == ["b"]


def test_two_camps_four_members_hand_computed():
    # {alpha, beta} rate each other 5 and the other camp 1; {gamma, delta} the same.
    camps = {"alpha": "ab", "beta": "ab", "gamma": "gd", "delta": "gd"}
    ratings = {r: {a: 5 if camps[a] == camps[r] else 1 for a in camps if a != r} for r in camps}
    rankings = {
        "alpha": ["beta", "gamma", "delta"],
        "beta": ["alpha", "gamma", "delta"],
        "gamma": ["delta", "alpha", "beta"],
        "delta": ["gamma", "alpha", "beta"],
    }
    found = measure_agreement(ratings, rankings)
    # Each answer gets (5, 1, 1): n_1 = 8, n_5 = 4, n = 12; per answer o_15 = o_51 = 2 x
    # 1/2 = 1, so o_15 = 4 in all; d_15 = (8/2 + 4/2)^2 = 36.
    # alpha = 1 - 11 * 2*4*36 / (2 * 8*4*36) = 1 - 11/8 = -0.375.
    assert found.alpha == -0.375
    # Centred ranks (-1, 0, 1) summed per answer: alpha -1, beta 1, gamma -1, delta 1,
    # S = 4. Balanced incomplete design, t = 4, lambda = 2: S_max = 4 * 4 * 15 / 12 = 20.
    assert found.kendall_w == 0.2
    # On each answer the lone rater from the author's camp stands apart.
    assert [(d.reviewer, d.author) for d in found.dissent] == [
        ("beta", "alpha"),
        ("alpha", "beta"),
        ("delta", "gamma"),
        ("gamma", "delta"),
    ]
    assert found.level == "low"


# The level.


def test_near_equal_ratings_are_high_although_alpha_is_about_zero():
    # All 4s but one 5: the ratings barely vary, alpha is 0, the reviewers agree.
    ratings = {"a": {"b": 4, "c": 4}, "b": {"a": 4, "c": 5}, "c": {"a": 4, "b": 4}}
    found = measure_agreement(ratings)
    assert found.alpha == 0.0
    assert found.level == "high"


def test_level_rule():
    def answers(*spreads: float | None) -> list[AnswerAgreement]:
        return [AnswerAgreement(author=f"m{i}", spread=s) for i, s in enumerate(spreads)]

    dissent = dissents(ONE_DISSENT)
    other = dissents({"x": {"q": 1}, "y": {"q": 5}, "z": {"q": 5}})
    assert level_of(None, answers(0, 0), []) == "high"  # all equal
    assert level_of(0.1, answers(1, 0, 1), []) == "high"  # within a point everywhere
    assert level_of(0.85, answers(2, 0, 3), []) == "high"  # disputed, but alpha reliable
    assert level_of(0.7, answers(2, 0, 0), []) == "medium"  # tentative alpha, a dispute
    assert level_of(0.95, answers(3, 0, 0), dissent) == "medium"  # a dissent is never high
    assert level_of(0.1, answers(3, 0, 0), dissent) == "medium"  # one dissent on one answer
    assert level_of(0.1, answers(3, 0, 3), dissent + other) == "low"  # dissents on two
    assert level_of(0.5, answers(2, 2, 0, 0), []) == "low"  # half the answers disputed
    assert level_of(0.7, answers(3, 3, 0), dissent + other) == "medium"  # alpha tentative
    assert level_of(None, answers(None, None), []) is None  # nothing compared


# Kendall's W.


def test_kendall_w_complete_rankings_textbook():
    # Three judges rank four answers (none of them their own). Rank sums 4, 6, 8, 12,
    # mean 7.5, S = 35; W = 12 * 35 / (3^2 * (4^3 - 4)) = 7/9.
    rankings = {
        "j1": ["A", "B", "C", "D"],
        "j2": ["A", "C", "B", "D"],
        "j3": ["B", "A", "C", "D"],
    }
    assert kendall_w(rankings) == pytest.approx(7 / 9)
    assert kendall_w({"j1": list("ABCD"), "j2": list("ABCD")}) == pytest.approx(1.0)
    assert kendall_w({"j1": list("ABCD"), "j2": list("DCBA")}) == pytest.approx(0.0)


def test_kendall_w_ties_complete_matches_kendalls_tie_correction():
    # Midranks: j1 A 1, B 2.5, C 2.5, D 4; j2 D 1, A 2.5, B 2.5, C 4. Rank sums 3.5, 5,
    # 6.5, 5: S = 4.5. Each ranking has one tie of two: T = 2^3 - 2 = 6.
    # W = 12 * 4.5 / (2^2 * 60 - 2 * (6 + 6)) = 54 / 216 = 0.25.
    rankings = {"j1": ["A", ("B", "C"), "D"], "j2": ["D", ("A", "B"), "C"]}
    assert kendall_w(rankings) == pytest.approx(0.25)
    # The same ties and the same order: full agreement.
    assert kendall_w({"j1": ["A", ("B", "C"), "D"], "j2": ["A", ("C", "B"), "D"]}) == 1.0
    # A ranking that ties everything says nothing.
    assert kendall_w({"j1": [("A", "B", "C")], "j2": [("A", "B", "C")]}) is None


def test_kendall_w_full_council_of_three():
    # Each member ranks the two other answers: a balanced incomplete design, lambda = 1.
    # Consistent with alpha > beta > gamma: rank sums centred -1, 0, 1; S = 2 = S_max.
    consistent = {
        "alpha": ["beta", "gamma"],
        "beta": ["alpha", "gamma"],
        "gamma": ["alpha", "beta"],
    }
    assert kendall_w(consistent) == pytest.approx(1.0)
    # A cycle (beta > gamma, gamma > alpha, alpha > beta): every sum is 0.
    cycle = {"alpha": ["beta", "gamma"], "beta": ["gamma", "alpha"], "gamma": ["alpha", "beta"]}
    assert kendall_w(cycle) == pytest.approx(0.0)


def test_kendall_w_four_members_hand_computed():
    # Each member ranks the three others: balanced, every two answers ranked together by
    # lambda = 2 reviewers. Centred ranks -1, 0, 1; sums (from the other three, in
    # member order): alpha -1 + 0 + 1 = 0, beta -1 - 1 + 0 = -2, gamma 0 + 0 - 1 = -1,
    # delta 1 + 1 + 1 = 3: S = 14, S_max = 2^2 * 4 * (4^2 - 1) / 12 = 20, W = 0.7.
    rankings = {
        "alpha": ["beta", "gamma", "delta"],
        "beta": ["alpha", "gamma", "delta"],
        "gamma": ["beta", "alpha", "delta"],
        "delta": ["gamma", "beta", "alpha"],
    }
    assert kendall_w(rankings) == pytest.approx(0.7)


def test_kendall_w_failed_reviewer_takes_the_answers_of_those_that_ranked():
    # Four members, delta's review failed: alpha, beta and gamma ranked all three others,
    # delta's answer included, so delta's answer is ranked together with each other answer
    # twice and the others with each other once. W is taken over alpha's, beta's and
    # gamma's answers: a full council of three.
    agreeing = {
        "alpha": ["beta", "delta", "gamma"],
        "beta": ["alpha", "gamma", "delta"],
        "gamma": ["delta", "alpha", "beta"],  # delta's answer aside: alpha > beta > gamma
    }
    assert kendall_w(agreeing) == pytest.approx(1.0)
    cycle = {
        "alpha": ["beta", "gamma", "delta"],
        "beta": ["gamma", "alpha", "delta"],
        "gamma": ["alpha", "beta", "delta"],
    }
    assert kendall_w(cycle) == pytest.approx(0.0)
    # A reviewer that left an answer unranked: unbalanced either way.
    partial = {**agreeing, "delta": ["alpha", "beta"]}
    assert kendall_w(partial) is None


def test_kendall_w_undefined_when_rankings_cannot_contradict():
    assert kendall_w({}) is None
    assert kendall_w({"j1": ["A", "B", "C"]}) is None  # one reviewer
    # Three members, one failed: the two rankings share one answer.
    assert kendall_w({"alpha": ["beta", "gamma"], "beta": ["alpha", "gamma"]}) is None
    # Own answers and repeats are left out: each ranks one other answer.
    assert kendall_w({"alpha": ["alpha", "beta", "beta"], "beta": ["alpha", "beta"]}) is None


# Rounds and the record.


def test_compare_rounds():
    low = measure_agreement(HARSH_GAMMA)
    medium = measure_agreement(ONE_DISSENT)
    high = measure_agreement({m: {a: 4 for a in "xyz" if a != m} for m in "xyz"})
    unmeasured = measure_agreement({"a": {"b": 3}})

    one = compare_rounds([medium])
    assert (one.levels, one.alphas, one.direction, one.raised) == (["medium"], [0.0], None, None)
    rising = compare_rounds([low, medium, high])
    assert rising.levels == ["low", "medium", "high"]
    assert rising.alphas == [-0.25, 0.0, None]
    assert (rising.direction, rising.raised) == ("up", True)
    assert compare_rounds([high, low]).direction == "down"
    assert compare_rounds([medium, medium]).direction == "flat"
    assert compare_rounds([medium, medium]).raised is False
    # Same level: alpha decides.
    better = Agreement(level="medium", alpha=0.5)
    assert compare_rounds([medium, better]).direction == "up"
    # Rounds that measured nothing are skipped.
    assert compare_rounds([unmeasured, low, unmeasured]).direction is None
    assert compare_rounds([]).direction is None


def test_agreement_round_trips_through_json_and_old_records_read():
    found = measure_agreement(ONE_DISSENT, critiques={("gamma", "alpha"): 'Says "5/5". Wrong.'})
    assert Agreement.model_validate_json(found.model_dump_json()) == found
    assert Agreement.model_validate({}) == Agreement()
    assert Agreement().level is None and Agreement().dissent == []


def test_verdict_lists_at_most_three_dissents():
    many = Agreement(
        level="low",
        alpha=0.123,
        dissent=[
            {"reviewer": "r", "author": f"m{i}", "rating": 1.5, "others_median": 4.5}
            for i in range(5)
        ],
    )
    line = verdict(many)
    assert line.startswith(
        "reviewers' agreement on their ratings: low (alpha 0.12) · 5 dissents: r rated m0's "
        "answer 1.5/5"
    )
    assert line.endswith("against a median of 4.5; and 2 more")
    assert line.count("rated") == 3
    assert verdict(Agreement(level="medium")) == (
        "reviewers' agreement on their ratings: medium (alpha undefined) · no dissent"
    )


# Properties.

MEMBERS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
RATING = st.sampled_from([1, 2, 3, 4, 5, 1.5, 2.5, 3.5, 4.5])


@st.composite
def rating_matrices(draw) -> dict[str, dict[str, float]]:
    """Members rating each other's answers (never their own), with cells and rows missing."""
    members = MEMBERS[: draw(st.integers(2, len(MEMBERS)))]
    return {
        r: {
            a: draw(RATING)
            for a in members
            if a != r and draw(st.integers(0, 3)) > 0  # mostly present
        }
        for r in members
        if draw(st.integers(0, 5)) > 0  # a failed reviewer now and then
    }


def package_alpha(ratings: dict[str, dict[str, float]]) -> float | None:
    reviewers = list(ratings)
    authors = sorted({a for row in ratings.values() for a in row})
    data = np.array([[ratings[r].get(a, np.nan) for a in authors] for r in reviewers], dtype=float)
    try:
        with np.errstate(invalid="ignore"):  # 0/0 when every value that pairs is the same
            value = float(krippendorff.alpha(data, level_of_measurement="ordinal"))
    except ValueError:  # no unit rated twice, or one value only
        return None
    return None if math.isnan(value) else value


@FAST
@given(rating_matrices())
def test_alpha_matches_the_krippendorff_package(ratings):
    ours, theirs = ordinal_alpha(ratings), package_alpha(ratings)
    if theirs is None:
        assert ours is None
    else:
        assert ours == pytest.approx(theirs, abs=1e-9)


@FAST
@given(rating_matrices(), st.randoms(use_true_random=False))
def test_alpha_bounded_and_invariant_to_order_and_labels(ratings, random):
    alpha = ordinal_alpha(ratings)
    if alpha is not None:
        assert alpha <= 1.0 + 1e-12
    reviewers = list(ratings)
    random.shuffle(reviewers)
    reordered = {r: dict(reversed(ratings[r].items())) for r in reviewers}
    names = list(MEMBERS)
    random.shuffle(names)
    rename = dict(zip(MEMBERS, names, strict=True))
    relabelled = {rename[r]: {rename[a]: v for a, v in row.items()} for r, row in ratings.items()}
    for other in (reordered, relabelled):
        again = ordinal_alpha(other)
        assert (again is None) == (alpha is None)
        if alpha is not None:
            assert again == pytest.approx(alpha, abs=1e-12)
    found, again = measure_agreement(ratings), measure_agreement(reordered)
    assert (found.level, found.alpha, sorted(found.dissent, key=repr)) == (
        again.level,
        again.alpha,
        sorted(again.dissent, key=repr),
    )


@FAST
@given(rating_matrices())
def test_level_and_dissent_follow_their_rules(ratings):
    found = measure_agreement(ratings)
    for d in found.dissent:
        assert abs(d.rating - d.others_median) >= 2
    spreads = [a.spread for a in found.answers if a.spread is not None]
    if not spreads:
        assert found.level is None
    elif max(spreads) <= 1:
        assert found.dissent == [] and found.level == "high"
    if found.dissent:
        assert found.level in ("medium", "low")
    assert verdict(found).startswith("reviewers' agreement on their ratings: ")


@st.composite
def rankings(draw) -> dict[str, list[str | tuple[str, ...]]]:
    """Each reviewer ranks the other answers, best first, with ties now and then; now and
    then a review failed or left answers out."""
    members = MEMBERS[: draw(st.integers(2, len(MEMBERS)))]
    result: dict[str, list[str | tuple[str, ...]]] = {}
    for reviewer in members:
        if draw(st.integers(0, 5)) == 0:
            continue  # failed
        seen = draw(st.permutations([a for a in members if a != reviewer]))
        if draw(st.integers(0, 5)) == 0:
            seen = seen[: draw(st.integers(0, len(seen)))]
        ranking: list[str | tuple[str, ...]] = []
        for author in seen:
            if ranking and draw(st.integers(0, 4)) == 0:  # tied with the one before
                last = ranking.pop()
                ranking.append((*((last,) if isinstance(last, str) else last), author))
            else:
                ranking.append(author)
        result[reviewer] = ranking
    return result


def centred_sums(ranks: dict[str, list]) -> float:
    sums: dict[str, float] = {}
    for ranking in ranks.values():
        k = sum(1 if isinstance(e, str) else len(e) for e in ranking)
        place = 1
        for entry in ranking:
            group = [entry] if isinstance(entry, str) else list(entry)
            for author in group:
                sums[author] = sums.get(author, 0) + place + (len(group) - 1) / 2 - (k + 1) / 2
            place += len(group)
    return sum(v * v for v in sums.values())


@FAST
@given(rankings(), st.randoms(use_true_random=False))
def test_kendall_w_between_0_and_1_and_invariant_to_order_and_labels(ranks, random):
    w = kendall_w(ranks)
    if w is not None:
        assert 0.0 <= w <= 1.0
    reviewers = list(ranks)
    random.shuffle(reviewers)
    assert kendall_w({r: ranks[r] for r in reviewers}) == pytest.approx(w)
    names = list(MEMBERS)
    random.shuffle(names)
    rename = dict(zip(MEMBERS, names, strict=True))

    def relabel(entry):
        return rename[entry] if isinstance(entry, str) else tuple(rename[a] for a in entry)

    relabelled = {rename[r]: [relabel(e) for e in ranking] for r, ranking in ranks.items()}
    assert kendall_w(relabelled) == pytest.approx(w)


@FAST
@given(st.integers(2, 6), st.integers(2, 6), st.randoms(use_true_random=False))
def test_kendall_w_complete_rankings_is_the_textbook_formula(m, n, random):
    answers = [f"a{i}" for i in range(n)]
    ranks = {f"judge{j}": random.sample(answers, n) for j in range(m)}
    expected = 12 * centred_sums(ranks) / (m * m * (n**3 - n))
    assert kendall_w(ranks) == pytest.approx(expected)


def test_kendall_w_is_1_exactly_when_one_shared_order_fits():
    # Over every set of rankings a full council of four can give (6^4 of them).
    members = ["alpha", "beta", "gamma", "delta"]
    orders = list(itertools.permutations(members))
    for chosen in itertools.product(
        *(itertools.permutations([a for a in members if a != r]) for r in members)
    ):
        ranks = dict(zip(members, chosen, strict=True))
        fits = any(
            all([a for a in order if a in ranks[r]] == list(ranks[r]) for r in members)
            for order in orders
        )
        assert (kendall_w(ranks) == pytest.approx(1.0)) == fits


def test_independent_votes_follow_how_far_the_reviewers_agree() -> None:
    four = ["a", "b", "c", "d"]
    # Every reviewer saying the same is one vote; no more agreement than chance, four.
    assert independent_votes(Agreement(alpha=1.0, reviewers=four)) == 1.0
    assert independent_votes(Agreement(alpha=0.0, reviewers=four)) == 4.0
    assert independent_votes(Agreement(alpha=-0.4, reviewers=four)) == 4.0
    # Between: n / (1 + (n - 1) alpha), fewer votes as alpha rises.
    assert independent_votes(Agreement(alpha=0.5, reviewers=four)) == 1.6
    votes = [independent_votes(Agreement(alpha=a / 10, reviewers=four)) for a in range(11)]
    assert votes == sorted(votes, reverse=True)
    # Not told without alpha or a second reviewer.
    assert independent_votes(Agreement(alpha=None, reviewers=four)) is None
    assert independent_votes(Agreement(alpha=0.3, reviewers=["a"])) is None
    # Said in one plain sentence.
    assert votes_note(Agreement(alpha=0.5, reviewers=four)) == (
        "the 4 reviewers count as 1.6 independent opinions: the more alike their ratings, "
        "the fewer (1 when all rate alike, 4 when no more alike than chance)"
    )
    assert votes_note(Agreement(alpha=1.0, reviewers=four)).startswith(
        "the 4 reviewers count as 1 independent opinion: "
    )
    assert votes_note(Agreement()) is None
