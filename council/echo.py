"""A reply that repeats our own prompt instead of answering it.

Small models asked for JSON sometimes copy the prompt's example ("your complete refined
response, self-contained, ...") or its instructions ("one accurate, complete answer that
draws on the strongest points ...") and stop. Such a reply is not an answer: the stage
treats it like an empty reply (a refinement keeps the previous answer, a synthesis falls
back to the next model) and the record says why.

The rule: most of the reply (at least half of its words, and at least MIN_RUN_WORDS) is one
run of words copied from the prompt, and that run does not come from the material the
prompt carried (the question, the answers, the critiques): a member that restates its own
answer, or a chairman that adopts a member's answer word for word, is answering.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from difflib import SequenceMatcher

from council.calls import ChatMessage

MIN_RUN_WORDS = 6
SHARE_OF_REPLY = 0.5
# Our instructions are a few hundred words: a longer reply cannot be mostly an echo of them.
MAX_ECHO_WORDS = 600
ECHO_PROBLEM = "the reply repeats the prompt's instructions instead of answering"
# The error type the record gives such a reply.
ECHO = "EchoedPrompt"

_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def repeats_prompt(reply: str, prompt: str, material: Iterable[str] = ()) -> bool:
    """Whether `reply` is mostly a run of `prompt`'s own words, not of its `material`."""
    said = _words(reply)
    if not said or len(said) > MAX_ECHO_WORDS:
        return False
    asked = _words(prompt)
    need = max(MIN_RUN_WORDS, SHARE_OF_REPLY * len(said))
    if _longest_shared_streak(said, asked) < need:
        return False
    match = SequenceMatcher(None, said, asked, autojunk=False).find_longest_match(
        0, len(said), 0, len(asked)
    )
    if match.size < MIN_RUN_WORDS or match.size < SHARE_OF_REPLY * len(said):
        return False
    run = " " + " ".join(said[match.a : match.a + match.size]) + " "
    return not any(run in " " + " ".join(_words(text)) + " " for text in material)


def _longest_shared_streak(said: list[str], asked: list[str]) -> int:
    """An upper bound on the longest run of `said` that `asked` holds, cheap to find:
    the longest streak of consecutive words of `said` each starting a MIN_RUN_WORDS-word
    sequence that `asked` holds somewhere, plus the sequence's other words (0 without one).
    A run of n >= MIN_RUN_WORDS shared words gives such a streak of n - MIN_RUN_WORDS + 1."""
    n = MIN_RUN_WORDS
    held = {tuple(asked[i : i + n]) for i in range(len(asked) - n + 1)}
    longest = streak = 0
    for i in range(len(said) - n + 1):
        streak = streak + 1 if tuple(said[i : i + n]) in held else 0
        longest = max(longest, streak)
    return longest + n - 1 if longest else 0


def echoes(reply: str, messages: Sequence[ChatMessage], material: Iterable[str]) -> bool:
    """The reply only repeats the messages it was given (repeats_prompt over them all)."""
    return repeats_prompt(reply, "\n".join(m.text for m in messages), material)
