"""Change detection, change summary and the token estimate."""

from __future__ import annotations

from difflib import SequenceMatcher

import pytest

from council.calls import Stage, TokenUsage
from council.changes import (
    detect_significant_changes,
    estimate_tokens,
    estimate_tokens_used,
    summarize_changes,
)
from council.models import Usage

pytestmark = pytest.mark.fast

# --- the specification's unit tests -----------------------------------------------------------


def test_detect_significant_changes():
    original = "Python is a programming language."
    refined = (
        "Python is a versatile programming language used for web development, data science, "
        "and automation. It features clean syntax and extensive libraries."
    )
    assert detect_significant_changes(original, refined) is True


def test_detect_no_changes():
    original = "Python is a programming language."
    refined = "Python is a programming language."
    assert detect_significant_changes(original, refined) is False


def test_detect_minor_changes():
    original = "Python is a programming language."
    refined = "Python is a programming language!"  # just punctuation
    assert detect_significant_changes(original, refined) is False


# --- the rest of the rule ----------------------------------------------------------------------


def similarity(a: str, b: str) -> float:
    return SequenceMatcher(None, a.lower().strip(), b.lower().strip()).ratio()


def test_empty_texts_are_never_a_change():
    assert detect_significant_changes("", "Something new entirely.") is False
    assert detect_significant_changes("Something old.", "") is False


def test_case_and_surrounding_whitespace_do_not_count():
    assert detect_significant_changes("Use a HashMap.", "  use a hashmap.\n") is False


def test_completely_different_text_is_a_change():
    original = "Use a hash map keyed by customer id."
    refined = "Binary search over the sorted timestamps answers each query in logarithmic time."
    assert similarity(original, refined) < 0.5
    assert detect_significant_changes(original, refined) is True


def test_middle_band_reordering_without_new_words_is_not_a_change():
    original = "Python is fast to write. Python is slow to run. Python has many libraries."
    refined = "Python has many libraries. Python is slow to run. Python is fast to write."
    assert 0.5 < similarity(original, refined) <= 0.95
    assert detect_significant_changes(original, refined) is False


def test_middle_band_with_more_than_ten_percent_new_words_is_a_change():
    original = "Sort the list first, then scan it once with two pointers from both ends."
    refined = original[:-1] + "; this is O(n log n) overall and needs no extra memory."
    assert 0.5 < similarity(original, refined) <= 0.95
    assert detect_significant_changes(original, refined) is True
    # The new-word threshold is configurable (IterationConfig.min_change_threshold).
    assert detect_significant_changes(original, refined, new_word_ratio=0.6) is False


def test_summarize_added_lines():
    original = "Line one.\nLine two."
    refined = "Line one.\nLine two.\nLine three.\nLine four."
    assert summarize_changes(original, refined) == "Added content (+2 lines)"


def test_summarize_condensed_lines():
    original = "Intro.\nDetail one.\nDetail two.\nDetail three.\nOutro."
    refined = "Intro.\nOutro."
    assert summarize_changes(original, refined) == "Condensed content (-3 lines)"


def test_summarize_restructured_lines():
    original = "First point.\nSecond point."
    refined = "First point, sharpened.\nSecond point, sharpened."
    assert summarize_changes(original, refined) == "Restructured content (2 changes)"


def test_summarize_identical_text_is_zero_changes():
    assert summarize_changes("Same.\nText.", "Same.\nText.") == "Restructured content (0 changes)"


# --- the token estimate (only a fallback) ---------------------------------------------------


def test_estimate_tokens_is_four_characters_a_token_per_text():
    assert estimate_tokens("x" * 400) == 100
    assert estimate_tokens("abc") == 0
    # Each text is floored separately: prompt and reply are estimated apart.
    assert estimate_tokens("abcde", "abcdefg") == 2
    assert estimate_tokens() == 0


def test_estimate_tokens_used_reads_the_specification_task_and_reply_shapes():
    tasks = {"m1": {"prompt": "p" * 400}, "m2": {"prompt": None}, "m3": {"prompt": "q" * 41}}
    responses = {"m1": {"content": "c" * 80}, "m2": None, "m3": {"content": ""}}

    assert estimate_tokens_used(tasks, responses) == 100 + 10 + 20
    assert estimate_tokens_used({}, {}) == 0


def test_estimated_usage_is_counted_as_estimated():
    usage = Usage()
    usage.record(
        "m1", Stage.REFINE, TokenUsage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
    )
    estimate = estimate_tokens("p" * 80)
    usage.record(
        "m2",
        Stage.REFINE,
        TokenUsage(prompt_tokens=estimate, total_tokens=estimate, estimated=True),
    )

    assert usage.total_tokens == 35
    assert usage.calls == 2
    assert usage.estimated_calls == 1
    assert usage.by_model["m2"].estimated_calls == 1
    assert usage.by_model["m1"].estimated_calls == 0
    assert usage.by_stage["stage2_5"].total_tokens == 35
