"""Redaction: what keeping a key out of a text costs, and how much of an echoed key survives.

No server: the redaction rule (council.redaction) alone, as every text a provider sends
back passes through it. Two tables:

- its cost: `redact()` (and `settled()`, a streamed text's) on texts of 250 KB to 1 MB of
  prose with a key's echoes in it (in every form of the second table, one every 4 KB),
  with one key and with ten, and on 1 MB of nothing but echoes (the most pieces a text
  can hold), the median of five runs; the time per MB stays flat as the text grows if the
  cost is linear in it; beside it, what searching the text once for each piece costs
  (what the automaton replaces);
- what survives: a provider's echo of the key in one form (a part of it, reversed,
  encoded), in a sentence, redacted: how many of the echo's 8-character pieces (each a
  piece of the key, or of the key's encoding) are left in the text.

    python -m bench.redaction            (or python -m bench --only redaction)
"""

from __future__ import annotations

import base64
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from urllib.parse import quote

from bench import report
from council.redaction import MIN_PIECE, Redactor, pieces

# 44 characters, with two that URL encoding changes.
KEY = "sk-canary-7Qm2Xv9Lr4/Tz8Wb3+Nd6Hj1Kp0Ys5Fg2U"
OTHERS = [f"sk-other-{n:02d}-Xq7Lm2Vb9Rt4Wz8Nc3Hd6Jk1Pf5Gy" for n in range(9)]
SIZES = (250_000, 500_000, 1_000_000)
QUICK_SIZES = (100_000, 200_000)
REPEAT = 5
ECHO_EVERY = 4_000
_UNSEEN = itertools.count()
PROSE = (
    "A council of models answers the question, reviews the answers anonymously, refines "
    "them and a chairman writes the synthesis; every call is an activity of its own. "
)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def echoes(key: str = KEY) -> dict[str, str]:
    """The key as a provider may echo it, by the name of the form."""
    data = key.encode()
    return {
        "the whole key": key,
        "without its first character": key[1:],
        "from its eighth character": key[7:],
        "its last 20 characters": key[-20:],
        "reversed": key[::-1],
        "base64": _b64(data),
        "base64 of all but its first character": _b64(data[1:]),
        "base64 of all but its first two": _b64(data[2:]),
        "URL-safe base64": base64.urlsafe_b64encode(data).decode().rstrip("="),
        "hex": data.hex(),
        "HEX": data.hex().upper(),
        "URL-encoded": quote(key, safe=""),
    }


def grams(text: str) -> set[str]:
    return {text[i : i + MIN_PIECE] for i in range(len(text) - MIN_PIECE + 1)}


def survivors(redactor: Redactor, echo: str) -> tuple[int, int]:
    """How many of the echo's 8-character pieces are left once a sentence that holds it is
    redacted, of how many it has."""
    pieces = grams(echo)
    shown = redactor.redact(f"The key I was sent is {echo} (as you asked).")
    return len(pieces & grams(shown)), len(pieces)


def text_of(size: int) -> str:
    """`size` characters of prose with one of the key's echoes every ECHO_EVERY."""
    forms = list(echoes().values())
    parts: list[str] = []
    length = n = 0
    while length < size:
        chunk = (PROSE * (ECHO_EVERY // len(PROSE) + 1))[: ECHO_EVERY - 60]
        chunk += f" It said {forms[n % len(forms)]}. "
        parts.append(chunk)
        length += len(chunk)
        n += 1
    return "".join(parts)[:size]


def echoes_only(size: int) -> str:
    """`size` characters of the key's echoes, one after another with a space between."""
    forms = " ".join(echoes().values()) + " "
    return (forms * (size // len(forms) + 1))[:size]


def scan_per_piece(text: str, every: list[str]) -> int:
    """What the automaton saves: the text searched once for each piece (counting only)."""
    return sum(text.count(piece) for piece in every)


def first_build(keys: list[str], repeat: int = REPEAT) -> float:
    """The time to make the first redactor of a set of keys (a process builds one set's
    automaton once): each time keys it has not seen, of the same lengths."""
    times = []
    for _ in range(repeat):
        n = next(_UNSEEN)
        fresh = [f"{key[:-4]}{n:04d}" for key in keys]
        started = time.perf_counter()
        Redactor(fresh)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def median_seconds(work: Callable[[], object], repeat: int = REPEAT) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(quick: bool = False) -> report.Section:
    section = report.Section("Redaction: its cost, and what survives of an echoed key")
    cost = report.Table(
        [
            "text",
            "keys",
            "first redactor of the keys (build)",
            "redact()",
            "per MB",
            "settled() (a live text)",
            "beside it: one scan of the text per piece",
            "redacted spans",
        ]
    )
    sizes = QUICK_SIZES if quick else SIZES
    mb = [f"{size / 1_000_000:g} MB" for size in sizes]
    cases = [([KEY], name, text_of(size)) for name, size in zip(mb, sizes, strict=True)]
    cases += [([KEY, *OTHERS], name, text_of(size)) for name, size in zip(mb, sizes, strict=True)]
    # The worst case: nothing but echoes, every character in a piece.
    cases.append(([KEY], f"{mb[-1]} of echoes only", echoes_only(sizes[-1])))
    for keys, name, text in cases:
        build = first_build(keys)
        redactor = Redactor(keys)
        seconds = median_seconds(partial(redactor.redact, text))
        live = median_seconds(partial(redactor.settled, text))
        every = sorted({piece for key in keys for piece in pieces(key)})
        per_piece = median_seconds(partial(scan_per_piece, text, every), repeat=1)
        spans = redactor.redact(text).count("[redacted]")
        cost.add(
            name,
            len(keys),
            f"{build * 1000:.2f} ms",
            f"{seconds * 1000:.1f} ms",
            f"{seconds * 1000 / (len(text) / 1_000_000):.1f} ms",
            f"{live * 1000:.1f} ms",
            f"{per_piece * 1000:,.0f} ms ({len(every):,} pieces)",
            f"{spans:,}",
        )
    section.tables.append(cost)
    redactor = Redactor([KEY])
    left = report.Table(["the key echoed as", "its characters", "8-character pieces left"])
    total_left = total = 0
    for name, echo in echoes().items():
        kept, of = survivors(redactor, echo)
        total_left, total = total_left + kept, total + of
        left.add(name, len(echo), f"{kept} of {of}")
    left.add("all of these", "", f"{total_left} of {total}")
    section.tables.append(left)
    section.notes.append(
        f"One {len(KEY)}-character key (and nine others of {len(OTHERS[0])} in the ten-key "
        f"rows); prose with an echo every {ECHO_EVERY:,} characters; median of {REPEAT} runs."
    )
    return section


async def run(stack: object = None, quick: bool = False) -> report.Section:
    return measure(quick)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    print(measure(quick="--quick" in args).markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
