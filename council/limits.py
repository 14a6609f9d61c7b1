"""Size limits that keep every Temporal payload, the history and the record small.

Temporal refuses a payload over 2 MB (and warns from 512 KB), and the workflow's result
is the whole record. The record holds, for each model, its stage 1 answer, the
stage 2.5 original and corrected answers, an original and a refined answer per round,
and one review per review stage; and, per review stage, one critique of each answer by
each other model. The cap on a reply's size is chosen so that all of these together
stay inside RECORD_BUDGET_BYTES, a quarter below the 2 MB limit.
"""

from __future__ import annotations

RECORD_BUDGET_BYTES = 1_500_000
MIN_RESPONSE_BYTES = 4_000
MAX_RESPONSE_BYTES = 64_000

QUESTION_MAX_CHARS = 20_000
MIN_MODELS = 2
MAX_MODELS = 12
MIN_ROUNDS = 1
MAX_ROUNDS = 5
MIN_THRESHOLD = 0.0
MAX_THRESHOLD = 5.0
MAX_TOKEN_BUDGET = 100_000_000
MAX_COST_USD = 10_000.0
MAX_THREAD_TURNS = 100

# One reviewer's critique of one answer, as extracted from its review.
MAX_CRITIQUE_CHARS = 600

# Rough conversion used for length guidance in prompts only.
BYTES_PER_WORD = 6


def texts_per_model(max_rounds: int) -> int:
    """Replies of one model the record can hold: 3 answers, 3 per round (the original,
    the refined answer and the raw reply) and 1 review per review stage."""
    return 3 + 3 * max_rounds + (max_rounds + 1)


def critique_bytes(models: int, max_rounds: int) -> int:
    """Room the critiques can take in the record: every review stage, every pair."""
    return (max_rounds + 1) * models * max(models - 1, 0) * MAX_CRITIQUE_CHARS


def response_byte_cap(models: int, max_rounds: int, ceiling: int = MAX_RESPONSE_BYTES) -> int:
    """Largest reply (UTF-8 bytes) a call may return in a run of this shape."""
    room = RECORD_BUDGET_BYTES - critique_bytes(models, max_rounds)
    share = room // (max(models, 1) * texts_per_model(max_rounds))
    return max(MIN_RESPONSE_BYTES, min(ceiling, share))


def word_allowance(byte_cap: int) -> int:
    """Words to suggest in a prompt so that a reply fits its cap with room to spare."""
    return max(200, int(byte_cap * 0.8 / BYTES_PER_WORD) // 50 * 50)
