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
    start, size = _longest_shared_run(said, _words(prompt))
    if size < MIN_RUN_WORDS or size < SHARE_OF_REPLY * len(said):
        return False
    run = " " + " ".join(said[start : start + size]) + " "
    return not any(run in " " + " ".join(_words(text)) + " " for text in material)


def _longest_shared_run(said: list[str], asked: list[str]) -> tuple[int, int]:
    """The longest run of `said` that `asked` holds, as (start in `said`, words): of the
    longest, the one that starts first in `said`; (0, 0) when none is MIN_RUN_WORDS long.

    In time linear in both: a suffix automaton of `said` (each state a set of its runs that
    end at the same places, with where the first of them ends), and `asked` walked through
    it, keeping at each word the longest run of `asked` ending there that `said` holds."""
    link, length, first = [-1], [0], [-1]
    moves: list[dict[str, int]] = [{}]

    def state(of_length: int, ends: int, parent: int, out: dict[str, int]) -> int:
        link.append(parent)
        length.append(of_length)
        first.append(ends)
        moves.append(out)
        return len(moves) - 1

    last = 0
    for i, word in enumerate(said):
        new = state(length[last] + 1, i, 0, {})
        at = last
        while at != -1 and word not in moves[at]:
            moves[at][word] = new
            at = link[at]
        if at != -1:
            then = moves[at][word]
            if length[at] + 1 == length[then]:
                link[new] = then
            else:
                copy = state(length[at] + 1, first[then], link[then], dict(moves[then]))
                while at != -1 and moves[at].get(word) == then:
                    moves[at][word] = copy
                    at = link[at]
                link[then] = link[new] = copy
        last = new
    at = run = longest = start = 0
    for word in asked:
        while at and word not in moves[at]:
            at = link[at]
            run = length[at]
        if word not in moves[at]:
            run = 0
            continue
        at, run = moves[at][word], run + 1
        begins = first[at] - run + 1
        if run > longest or (run == longest and begins < start):
            longest, start = run, begins
    return (start, longest) if longest >= MIN_RUN_WORDS else (0, 0)


def echoes(reply: str, messages: Sequence[ChatMessage], material: Iterable[str]) -> bool:
    """The reply only repeats the messages it was given (repeats_prompt over them all)."""
    return repeats_prompt(reply, "\n".join(m.text for m in messages), material)
