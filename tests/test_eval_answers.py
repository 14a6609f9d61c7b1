"""Reading final answers out of replies, and matching them: examples and properties."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grading.answers import (
    Answer,
    StatedValues,
    choice_letters,
    expected_answer,
    extract,
    extract_choice,
    extract_number,
    extract_text,
    format_number,
    infer_kind,
    matches,
    normalize_text,
    parse_number,
    stated_value,
    stated_values,
)
from tests.tiers import examples

pytestmark = pytest.mark.fast


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("Final answer: 42", 42),
        ("There were 3 boxes of 14, so 42 in all.\nFinal answer: 42 apples", 42),
        ("**Final answer:** $18.60", 18.6),
        ("**Final answer**: 1,250", 1250),
        ("The final answer is -155 m.", -155),
        ("The answer is −155", -155),  # a Unicode minus
        ("Final answer: 6 × 7 = 42", 42),
        ("Final answer:\n\n  153 muffins", 153),
        (r"so we get $\boxed{\frac{3}{4}}$.", 0.75),
        (r"\boxed{1{,}000}", 1000),
        (r"\boxed{25\%}", 25),
        ("So the answer is **9,000**.", 9000),
        ("Answer = 3/4", 0.75),
        ("It grew by 25%.", 25),
        ("It comes to 18.60 dollars, from 4 notebooks.", 4),  # no marker: the last number
        ("The sequence 2, 6, 12, 20, 30 continues with 42", 42),
        ("I think 5-3 = 2", 2),
        ("Final answer: see above.\nThe answer is 7", 7),  # a marker without a number is skipped
        ("Working: 12 + 30.\n\nFinal answer: 42\n\nCheck: 42 - 30 = 12", 42),  # the marker wins
    ],
)
def test_numbers_are_read_from_the_marked_answer_first(reply: str, value: float) -> None:
    assert extract_number(reply) == pytest.approx(value)


def test_no_number_reads_as_none() -> None:
    assert extract_number("I cannot tell from the information given.") is None
    assert extract("number", "") is None and extract("number", None) is None


@pytest.mark.parametrize(
    ("reply", "letter"),
    [
        ("Final answer: (B)", "B"),
        ("Answer: C", "C"),
        ("**Final answer:** D) Some cats absorb heat well", "D"),
        ("B)", "B"),
        ("(a) is wrong and (c) is wrong.\nSo the answer is (b).", "B"),
        ("**C**", "C"),
        (r"$\boxed{A}$", "A"),
        ("I'd go with (D).", "D"),
        ("Comparing the options...\nB", "B"),
        ("Final answer: I think C", "C"),  # "I" is no option letter here
    ],
)
def test_choices_are_read_in_every_common_form(reply: str, letter: str) -> None:
    assert extract_choice(reply, "ABCD") == letter


def test_a_choice_outside_the_options_is_not_read() -> None:
    assert extract_choice("Final answer: (E)", "ABCD") is None
    assert extract_choice("Final answer: (E)", "ABCDE") == "E"


def test_the_option_letters_come_from_the_question() -> None:
    assert choice_letters("Which? (A) one (B) two (C) three") == "ABC"
    assert choice_letters("Which?\nA) one\nB) two\nC) three\nD) four") == "ABCD"
    assert choice_letters("No options here.") == "ABCDEFGH"


@pytest.mark.parametrize(
    ("reply", "text"),
    [
        ("Final answer: Thursday.", "Thursday"),
        ("The answer is **Alice**", "Alice"),
        (r"$\boxed{\text{Iris}}$", "Iris"),
        ("Let me think.\nIt must be Thursday.", "It must be Thursday"),  # the last line, as is
        ('Final answer: "the blue one"', "the blue one"),
    ],
)
def test_text_answers_are_read(reply: str, text: str) -> None:
    assert extract_text(reply) == text


def test_text_matching_is_exact_after_normalization() -> None:
    expected = expected_answer("text", "Thursday")
    assert matches(expected, extract("text", "Final answer: **thursday**."))
    assert matches(
        expected_answer("text", "the blue house"), extract("text", "Answer: Blue  House!")
    )
    assert matches(expected_answer("text", "Zoë"), extract("text", "Final answer: zoe"))
    assert not matches(expected, extract("text", "Final answer: It was Thursday"))
    assert not matches(expected, None)


def test_number_matching_has_a_relative_and_an_absolute_tolerance() -> None:
    expected = expected_answer("number", "1000")
    assert matches(expected, Answer("number", 1000.05, "1000.05"))  # within 1e-4 relative
    assert not matches(expected, Answer("number", 1001, "1001"))
    fraction = expected_answer("number", "5/12")
    assert not matches(fraction, Answer("number", 0.42, "0.42"))
    assert matches(fraction, Answer("number", 0.42, "0.42"), abs_tol=0.005)
    assert matches(expected_answer("number", "0"), Answer("number", 1e-9, "0"))  # absolute near 0


def test_expected_answers_and_kinds() -> None:
    assert expected_answer("number", "$1,250.00").value == 1250
    assert expected_answer("number", "-7/2").value == -3.5
    assert expected_answer("choice", "(b)", "ABCD").value == "B"
    with pytest.raises(ValueError, match="is not a number"):
        expected_answer("number", "about 5")
    with pytest.raises(ValueError, match=r"not one option letter \(A, B\)"):
        expected_answer("choice", "C", "AB")
    assert [infer_kind(a) for a in ("42", "-3.5", "12%", "B", "(C)", "Thursday", "A cat")] == [
        "number",
        "number",
        "number",
        "choice",
        "choice",
        "text",
        "text",
    ]


# ---- properties ---------------------------------------------------------------------

decimals = st.decimals(
    min_value=-(10**7), max_value=10**7, places=3, allow_nan=False, allow_infinity=False
)


def _plain(value) -> str:
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _grouped(value) -> str:
    whole, _, part = _plain(abs(value)).partition(".")
    sign = "-" if value < 0 else ""
    return f"{sign}{int(whole):,}" + (f".{part}" if part else "")


WRAPPERS = [
    "Final answer: {}",
    "**Final answer:** {}",
    "The answer is {}.",
    "so the result is **{}**",
    "$\\boxed{{{}}}$",
    "Answer = {} units",
]


@settings(max_examples=examples(150), deadline=None)
@given(
    value=decimals,
    wrapper=st.sampled_from(WRAPPERS),
    grouped=st.booleans(),
    noise=st.lists(st.integers(-999, 99_999), max_size=4),
)
def test_a_marked_number_is_read_whatever_the_noise_before_it(
    value, wrapper, grouped, noise
) -> None:
    shown = _grouped(value) if grouped else _plain(value)
    working = " ".join(f"step {n}: {n} + 1 = {n + 1}." for n in noise)
    reply = f"{working}\n\n{wrapper.format(shown)}"
    assert extract_number(reply) == pytest.approx(float(value), rel=1e-9, abs=1e-9)


@settings(max_examples=examples(100), deadline=None)
@given(numerator=st.integers(-500, 500), denominator=st.integers(1, 97), latex=st.booleans())
def test_fractions_read_as_their_value(numerator: int, denominator: int, latex: bool) -> None:
    if latex:
        sign = "-" if numerator < 0 else ""
        shown = f"$\\boxed{{{sign}\\frac{{{abs(numerator)}}}{{{denominator}}}}}$"
    else:
        shown = f"Final answer: {numerator}/{denominator}"
    assert extract_number(shown) == pytest.approx(float(Fraction(numerator, denominator)))


@settings(max_examples=examples(100), deadline=None)
@given(value=decimals)
def test_a_dataset_number_round_trips(value) -> None:
    parsed = parse_number(_plain(value))
    assert parsed == pytest.approx(float(value))
    answer = expected_answer("number", format_number(parsed))
    assert matches(answer, extract("number", f"Final answer: {answer.shown}"))


@settings(max_examples=examples(100), deadline=None)
@given(
    letter=st.sampled_from("ABCD"),
    form=st.sampled_from(
        [
            "Final answer: ({})",
            "Answer: {}",
            "{})",
            "**{}**",
            "The answer is ({}).",
            "\\boxed{{{}}}",
        ]
    ),
    working=st.sampled_from(
        ["", "Option (A) fails and option (C) fails.\n", "Let me compare A and B.\n"]
    ),
)
def test_a_choice_is_read_in_any_form(letter: str, form: str, working: str) -> None:
    assert extract_choice(working + form.format(letter), "ABCD") == letter


@settings(max_examples=examples(200), deadline=None)
@given(st.text(max_size=300))
def test_reading_never_fails_on_arbitrary_text(text: str) -> None:
    for kind in ("number", "choice", "text"):
        answer = extract(kind, text)
        assert answer is None or answer.kind == kind


@settings(max_examples=examples(100), deadline=None)
@given(st.text(max_size=80))
def test_normalization_is_idempotent_and_ignores_case(text: str) -> None:
    once = normalize_text(text)
    assert normalize_text(once) == once
    assert normalize_text(text.upper()) == normalize_text(text.lower()) or not text.isascii()


# ---- the value a free answer states (the agreement of first answers by value) -----------


@pytest.mark.parametrize(
    ("reply", "shown"),
    [
        ("Working it out.\n\nFinal answer: 1,250", "1250"),
        ("So the answer is **42**.", "42"),
        (r"Solving gives $\boxed{\frac{3}{4}}$", "0.75"),
        ("Answer: (B)", "B"),
        ("It depends on the load.\n\nFinal answer: Yes.", "yes"),
        ("**Short version**: no.\n\nThe answer is **No**", "no"),
        # No marker: the one number of a short last line, as a reader takes it.
        ("I get 42.", "42"),
        ("Working it out step by step.\n\nSo the ball costs 5 cents.", "5"),
        ("We would pay 42 dollars in all.", "42"),
    ],
)
def test_a_stated_value_is_read_from_the_marked_places(reply: str, shown: str) -> None:
    value = stated_value(reply)
    assert value is not None and value.shown == shown


@pytest.mark.parametrize(
    "reply",
    [
        None,
        "",
        "We would pay 42 dollars in all.\nThat settles it.",  # a figure in passing is no answer
        "The answer is 42 apples and 3 pears",  # marked, but not wholly a value
        "Final answer: it depends on the workload",
        "It costs 5 or 6 dollars.",  # a last line of two numbers
        "After all the conditions are checked, the count that fits them all is 42",  # long
    ],
)
def test_no_stated_value_where_none_is_marked_wholly(reply: str | None) -> None:
    assert stated_value(reply) is None


def test_first_answers_agree_by_value_or_cannot_be_compared() -> None:
    agree = stated_values(["Final answer: 42", "So the answer is **42.0**.", r"$\boxed{42}$"])
    assert agree is not None and agree.agree and [v.shown for v in agree.values] == ["42"] * 3
    differ = stated_values(["Final answer: 42", "Final answer: 41"])
    assert differ is not None and not differ.agree
    # Values of different kinds differ; an answer that states none leaves it to another check.
    assert stated_values(["Final answer: yes", "Final answer: 1"]) == StatedValues(
        (Answer("text", "yes", "yes"), Answer("number", 1.0, "1")), agree=False
    )
    assert stated_values(["Final answer: 42", "We would pay 42 dollars.\nThat is all."]) is None
    assert stated_values(["Final answer: 42"]) is None


STATED = ["Final answer: 7", "**7**", "Final answer: 8", "**yes**"]


@given(st.lists(st.sampled_from(STATED), min_size=2, max_size=6))
def test_agreement_by_value_does_not_depend_on_the_order(replies: list[str]) -> None:
    forward, backward = stated_values(replies), stated_values(replies[::-1])
    assert forward is not None and backward is not None
    assert forward.agree == backward.agree == (len({stated_value(r) for r in replies}) == 1)
