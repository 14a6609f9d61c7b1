"""Change detection, change summary and the token estimate.

An answer changed significantly when its similarity to the original (difflib's ratio,
case-insensitive) is below 0.5, or at most 0.95 with more than 10 % new words."""

from __future__ import annotations

from collections.abc import Mapping
from difflib import SequenceMatcher, unified_diff
from typing import Any

UNCHANGED_SIMILARITY = 0.95
CHANGED_SIMILARITY = 0.5
NEW_WORD_RATIO = 0.1
CHARS_PER_TOKEN = 4


def detect_significant_changes(
    original: str, refined: str, new_word_ratio: float = NEW_WORD_RATIO
) -> bool:
    """Whether a refinement changed the answer in substance, not just in punctuation."""
    if not refined or not original:
        return False
    orig = original.lower().strip()
    ref = refined.lower().strip()
    if orig == ref:
        return False
    similarity = SequenceMatcher(None, orig, ref).ratio()
    if similarity > UNCHANGED_SIMILARITY:
        return False
    if similarity < CHANGED_SIMILARITY:
        return True
    ref_words = set(ref.split())
    new_words = ref_words - set(orig.split())
    return len(new_words) / max(len(ref_words), 1) > new_word_ratio


def summarize_changes(original: str, refined: str) -> str:
    diff = list(unified_diff(original.split("\n"), refined.split("\n"), lineterm=""))
    added = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
    if added > removed:
        return f"Added content (+{added - removed} lines)"
    if removed > added:
        return f"Condensed content (-{removed - added} lines)"
    return f"Restructured content ({added} changes)"


def estimate_tokens(*texts: str) -> int:
    """A rough estimate (4 characters a token), used only when a provider reports no usage."""
    return sum(len(text) // CHARS_PER_TOKEN for text in texts)


def estimate_tokens_used(
    refinement_tasks: Mapping[str, Mapping[str, Any]],
    responses: Mapping[str, Mapping[str, Any] | None],
) -> int:
    """The specification's estimate of a refinement round's tokens: each task's prompt
    (model -> {"prompt": ...}; None for a model that did not refine) and each reply
    (model -> {"content": ...}), at 4 characters a token."""
    prompts = [task.get("prompt") or "" for task in refinement_tasks.values()]
    replies = [(reply or {}).get("content") or "" for reply in responses.values()]
    return estimate_tokens(*prompts, *replies)
