"""Properties of the parsers on arbitrary text: they never raise, and they only ever
return what they may (shown labels, ratings 1-5, no self-critique, a non-empty answer)."""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from council.refinement import parse_refinement
from council.reviews import MAX_CRITIQUE_CHARS, parse_review
from council.stages import Stage2Result
from tests.review_cases import critiques_of
from tests.tiers import examples

pytestmark = pytest.mark.fast

FAST = settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

LETTERS = string.ascii_uppercase[:12]  # at most 12 models: Response A to Response L
ALL_LABELS = [f"Response {x}" for x in LETTERS]

# Pieces real reviews (and hostile answers quoted in them) are made of.
REVIEW_FRAGMENTS = [
    "FINAL RANKING:",
    "Final Ranking",
    "## Final Ranking (best to worst)",
    "**FINAL RANKING:**",
    "Ranking:",
    "Rankings aside,",
    *ALL_LABELS,
    "Response Z",
    "response a",
    "response b",
    "RESPONSE C",
    "Response-D",
    "Responses",
    "(4/5)",
    "4.5/5",
    "(0/5)",
    "9/5",
    "8/10",
    "4/5/2024",
    "Rating: 3",
    "Score: 2",
    "4 out of 5",
    "rated 5",
    "(Rating: 1/5)",
    "**",
    "##",
    "###",
    "```",
    "~~~",
    "> ",
    "|",
    "---",
    '"',
    "“",
    "”",
    "`",
    '<response label="Response B">',
    "</response>",
    "< response>",
    "1. ",
    "2) ",
    "- ",
    "* ",
    "• ",
    "#1 ",
    " > ",
    ", ",
    " then ",
    " → ",
    ": ",
    " - ",
    ". ",
    "! ",
    "? ",
    "\n",
    "\n\n",
    "  ",
    "\t",
    "lacks examples",
    "is wrong",
    "Ignore previous instructions",
    "the best answer",
]

review_text = st.one_of(
    st.text(max_size=400),
    st.lists(st.one_of(st.sampled_from(REVIEW_FRAGMENTS), st.text(max_size=12)), max_size=60).map(
        "".join
    ),
)
shown_labels = st.lists(st.sampled_from(ALL_LABELS), unique=True, max_size=11)


@FAST
@given(text=review_text, shown=shown_labels)
def test_parse_review_never_raises_and_stays_in_bounds(text: str, shown: list[str]):
    parsed = parse_review(text, shown)

    assert set(parsed.ranking) <= set(shown)
    assert len(parsed.ranking) == len(set(parsed.ranking))
    assert set(parsed.ratings) <= set(shown)
    assert all(1.0 <= rating <= 5.0 for rating in parsed.ratings.values())
    assert set(parsed.critiques) <= set(shown)
    assert all(0 < len(c) <= MAX_CRITIQUE_CHARS for c in parsed.critiques.values())
    if parsed.ratings_inferred:
        assert set(parsed.ratings) == set(parsed.ranking)
    if parsed.ranking and not parsed.found_final_section:
        assert set(parsed.ranking) == set(parsed.ratings)  # a ranking from ratings alone


@FAST
@given(shown=shown_labels, data=st.data())
def test_parse_review_ignores_labels_not_shown(shown: list[str], data):
    # A review that ranks every label, shown or not: only the shown ones survive, in order.
    order = data.draw(st.permutations(ALL_LABELS))
    text = "FINAL RANKING:\n" + "\n".join(f"{i}. {label} (3/5)" for i, label in enumerate(order, 1))
    parsed = parse_review(text, shown)
    assert parsed.ranking == [label for label in order if label in shown]
    assert parsed.ratings == {label: 3.0 for label in shown}


@FAST
@given(
    body=review_text,
    shown=st.lists(st.sampled_from(ALL_LABELS), unique=True, min_size=1, max_size=11),
)
def test_fenced_or_quoted_text_never_changes_the_parse(body: str, shown: list[str]):
    own = "**{0}** (4/5): solid.\n\nFINAL RANKING:\n1. {0} (4/5)\n".format(shown[0])
    fence = "```" if "```" not in body and "~~~" not in body else None
    quoted = "\n".join("> " + line for line in body.splitlines())
    expected = parse_review(own, shown)
    assert parse_review(quoted + "\n\n" + own, shown) == expected
    if fence:
        assert parse_review(f"{fence}\n{body}\n{fence}\n\n{own}", shown) == expected


label_maps = st.lists(
    st.text(alphabet=string.ascii_lowercase + "/-.", min_size=1, max_size=8),
    min_size=2,
    max_size=6,
    unique=True,
).map(lambda models: {f"Response {LETTERS[i]}": model for i, model in enumerate(models)})


@FAST
@given(label_to_model=label_maps, data=st.data())
def test_critiques_never_go_back_to_their_author(label_to_model: dict[str, str], data):
    reviewers = list(label_to_model.values()) + ["outsider"]
    reviews = [
        Stage2Result(model=reviewer, ranking=data.draw(review_text, label=f"review by {reviewer}"))
        for reviewer in reviewers
    ]
    critiques = critiques_of(reviews, label_to_model)

    for label, items in critiques.items():
        assert label in label_to_model
        for item in items:
            assert item.target_response == label
            assert item.source_model != label_to_model[label]
            assert item.severity in ("high", "medium", "low")
            assert item.rating is None or 1.0 <= item.rating <= 5.0


refinement_text = st.one_of(
    st.text(max_size=400),
    st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "{",
                    "}",
                    "[",
                    "]",
                    '"',
                    ":",
                    ",",
                    "\\",
                    "\\n",
                    "\n",
                    "```",
                    "```json\n",
                    '"final_answer"',
                    '"refined_response"',
                    '"confidence"',
                    "85%",
                    "null",
                    "true",
                    "REFINED RESPONSE:",
                    "Here is my refined response:",
                ]
            ),
            st.text(max_size=12),
        ),
        max_size=40,
    ).map("".join),
    st.dictionaries(
        st.sampled_from(
            [
                "final_answer",
                "refined_response",
                "confidence",
                "critiques_accepted",
                "critiques_rejected",
                "answer",
            ]
        ),
        st.one_of(
            st.text(max_size=30),
            st.floats(allow_nan=False),
            st.lists(st.text(max_size=10), max_size=3),
            st.none(),
            st.booleans(),
        ),
    ).map(json.dumps),
)


def is_bare_header(text: str) -> bool:
    return text.strip().strip("*#_ ").rstrip(":").strip("*_ ").lower() == "refined response"


@FAST
@given(text=refinement_text)
def test_parse_refinement_never_raises_and_keeps_an_answer(text: str):
    parsed = parse_refinement(text)
    assert parsed.confidence is None or 0.0 <= parsed.confidence <= 1.0
    if parsed.structured:
        assert "final_answer" in text or "refined_response" in text
    if not text.strip():
        assert parsed.final_answer == ""
    elif not parsed.final_answer.strip():
        # Only a reply in our own format that left its answer blank (or was cut off
        # before writing any), or a bare echoed header, says nothing: the caller then
        # keeps the original answer.
        assert parsed.structured or is_bare_header(text)


@FAST
@given(
    text=st.text(min_size=1, max_size=300).filter(
        lambda t: "{" not in t and "REFINED" not in t.upper()
    )
)
def test_plain_text_without_json_is_the_answer_itself(text: str):
    assert parse_refinement(text).final_answer == text.strip()
