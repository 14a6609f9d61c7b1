"""Size limits: what a user may send, and what a run may write.

Texts travel through Temporal by reference (the payload store, app.store): a payload
over a few tens of kilobytes is kept in the store and history carries a reference, so
no input within these limits makes a Temporal message exceed its own limit. The limits
below bound what a run costs and what its record holds. The record holds, for each
model, its stage 1 answer, the stage 2.5 original and corrected answers, an original
and a refined answer per round, and one review per review stage; and, per review stage,
one critique of each answer by each other model. The cap on a reply's size is chosen so
that all of these together stay inside RECORD_BUDGET_BYTES.
"""

from __future__ import annotations

RECORD_BUDGET_BYTES = 1_500_000
MIN_RESPONSE_BYTES = 4_000
MAX_RESPONSE_BYTES = 64_000

# About what a model's context window of 256k tokens takes.
QUESTION_MAX_CHARS = 1_000_000
INSTRUCTIONS_MAX_CHARS = 8_000
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

# What a user may add to a running deliberation (Updates and the stop signal): each item
# and the run's total are bounded, so that nothing a client sends can push the record or a
# prompt past its size. Refused in one line beyond these.
MAX_HUMAN_CRITIQUE_CHARS = 2_000
# Critiques waiting for the next round (all models together), and in the whole run.
MAX_HUMAN_CRITIQUES_PER_ROUND = 8
MAX_HUMAN_CRITIQUES_PER_RUN = 20
# The text of all the user's critiques of a run together.
MAX_HUMAN_CRITIQUE_TOTAL_CHARS = 12_000
# Changes of the maximum rounds in one run.
MAX_ROUND_CHANGES = 20
MAX_STOP_REASON_CHARS = 500
# The peer and user feedback one member's refinement prompt carries: critiques are kept
# whole, in order, while they fit; the rest are left out (and the record counts them).
MAX_FEEDBACK_CHARS = 12_000

# Temporal refuses a payload over 2 MiB; the record (the workflow's result, and the
# `record` query's answer) travels by reference, so its own bound is what a reader should
# load: one above this, measured as JSON, has its largest texts elided until it fits. The
# limits above keep a record below it, its question of up to QUESTION_MAX_CHARS included,
# even when JSON escapes every character of it six-fold.
RECORD_LIMIT_BYTES = 16_000_000

# Rough conversion used for length guidance in prompts only.
BYTES_PER_WORD = 6

# max_tokens of a call: each stage's default, never above what the reply size cap holds
# (a token is about 4 bytes of text), within these bounds when set by hand.
DEFAULT_REPLY_TOKENS = {"answer": 4_096, "review": 2_048, "refine": 4_096, "synthesis": 4_096}
BYTES_PER_TOKEN = 4
MIN_REPLY_TOKENS = 16
MAX_REPLY_TOKENS = 200_000


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


def reply_tokens(stage: str, byte_cap: int) -> int:
    """The default max_tokens of a stage's calls: the stage's default, or what the reply
    size cap holds when that is less."""
    return max(MIN_REPLY_TOKENS, min(DEFAULT_REPLY_TOKENS[stage], byte_cap // BYTES_PER_TOKEN))


# Attachments (council.attachments): files a user brings with the question. Every member,
# reviewer and the chairman is sent them whole (or cut to a known context window), so they
# travel in every model call's input.
MAX_ATTACHMENTS = 10
# The text of one file (a text file's, or a PDF's extracted text), in UTF-8 bytes.
MAX_ATTACHMENT_TEXT_BYTES = 1_000_000
# The bytes of one image.
MAX_ATTACHMENT_IMAGE_BYTES = 5_000_000
# The bytes of one PDF as read (only its text travels, within the text limit).
MAX_ATTACHMENT_PDF_BYTES = 20_000_000
# The texts and images of one run together.
MAX_ATTACHMENTS_TOTAL_BYTES = 8_000_000
MAX_ATTACHMENT_NAME_CHARS = 255
# Reading a PDF's text (app.requests.pdf_text): a small file may inflate into a long read, so
# each PDF is read in a process of its own, within these bounds, and refused in one line past
# one.
# The most one stream of a PDF (a page's content, a font's table) may inflate to.
MAX_PDF_STREAM_BYTES = 10_000_000
# The CPU time, memory (address space) and time on the clock that reading one PDF may take.
PDF_READ_CPU_SECONDS = 30
PDF_READ_MEMORY_BYTES = 1_000_000_000
PDF_READ_SECONDS = 60
# PDFs one server reads at once; the requests beyond wait their turn (nothing else does).
PDF_READERS = 2
# Turning a fetched HTML page into text (activities.page_text) takes time linear in its
# size (about half a second a MB on one core), in a process of its own within these
# bounds; the time on the clock is what is left of the fetch's own timeout. The most a
# page may give as its title.
PAGE_READ_CPU_SECONDS = 30
PAGE_READ_MEMORY_BYTES = 1_000_000_000
PAGE_TITLE_CHARS = 300


def size_text(count: int) -> str:
    """A size for a person: "812 bytes", "45.2 KB", "1.5 MB" (decimal units)."""
    if count < 1_000:
        return f"{count} bytes"
    if count < 1_000_000:
        return f"{count / 1_000:.1f} KB"
    return f"{count / 1_000_000:.1f} MB"


def over_limit_text(most: int, got: int, of: str = "") -> str:
    """ "at most 1.0 MB (got 1.2 MB)" (`of` follows the limit: " in all"): a size over its
    limit; both in bytes when they would read the same once rounded ("at most 1,000,000
    bytes (got 1,000,001 bytes)")."""
    limit, size = size_text(most), size_text(got)
    if limit == size:
        limit, size = f"{most:,} bytes", f"{got:,} bytes"
    return f"at most {limit}{of} (got {size})"


def one_line(text: str, limit: int) -> str:
    """`text` on one line (its whitespace runs made single spaces), cut to at most `limit`
    characters with a marker: how a model's or a library's words enter a one-line field."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
