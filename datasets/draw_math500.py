"""Draw the MATH-500 known-answer subset, math500_test_subset.jsonl, from MATH-500.

MATH-500 is the 500-problem test split of the MATH dataset that OpenAI published as
prm800k/math_splits/test.jsonl in the repository openai/prm800k (MIT licence, see
LICENSE-math500). That file is stored with Git LFS, so git-lfs must be installed before
cloning, or the clone holds a short pointer file instead of the problems. To redraw the
subset, from the repository root:

    git lfs install
    git clone https://github.com/openai/prm800k
    python datasets/draw_math500.py prm800k/prm800k/math_splits/test.jsonl

Only problems whose answer is a plain number are eligible: an integer (thousands commas
and LaTeX thin spaces "\\!" removed), a decimal, or a fraction a/b of integers written
"\\frac{a}{b}", "\\dfrac{a}{b}", "-\\frac{a}{b}" or "a/b" (LaTeX's brace-less shorthand
such as "\\frac43" is eligible too, and written out as "\\frac{4}{3}"). Answers with units,
degrees, dollar signs, radicals, pi, variables, several values, mixed numbers or numbers
in another base are left out.

The draw is reproducible: random.Random(SEED).sample picks COUNT of the eligible
problems' line indices (0-based indices into test.jsonl), and the problems are written
sorted by index, each with its index in its id ("math500-test-0042"), with the MATH
subject and difficulty level kept beside the answer. The question is kept as it is, and
the worked solution is left out. Only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

SEED = 20261129
COUNT = 100
OUTPUT = Path(__file__).resolve().parent / "math500_test_subset.jsonl"
_INTEGER = re.compile(r"-?(?:\d{1,3}(?:,\d{3})+|\d+)")
_DECIMAL = re.compile(r"-?\d*\.\d+")
_SLASH = re.compile(r"-?\d+/\d+")
# \frac{a}{b} and \dfrac{a}{b}, and the shorthand \frac43, \frac 59, \frac9{19}, \frac{270}7.
_FRAC = re.compile(
    r"(?P<sign>-?)\\[dt]?frac\s*(?:\{(?P<a>\d+)\}|(?P<a1>\d))\s*(?:\{(?P<b>\d+)\}|(?P<b1>\d))"
)
_BRACED = re.compile(r"-?\\[dt]?frac\{\d+\}\{\d+\}")


def plain_number(answer: str) -> str | None:
    """The answer as a plain number the grader reads, or None if it is not one."""
    text = answer.strip()
    digits = re.sub(r"\\!\s*", "", text).replace("{,}", ",")
    if _INTEGER.fullmatch(digits):
        return digits.replace(",", "")
    if _DECIMAL.fullmatch(text):
        return text
    if _SLASH.fullmatch(text):
        return text if int(text.split("/")[1]) != 0 else None
    match = _FRAC.fullmatch(text)
    if match is None:
        return None
    numerator = match.group("a") or match.group("a1")
    denominator = match.group("b") or match.group("b1")
    if int(denominator) == 0:
        return None
    if _BRACED.fullmatch(text):
        return text
    return f"{match.group('sign')}\\frac{{{numerator}}}{{{denominator}}}"


def draw(
    lines: list[str], seed: int = SEED, count: int = COUNT
) -> tuple[list[dict[str, str | int]], int]:
    """The subset: `count` eligible problems drawn with `seed`, sorted by their line index;
    and how many problems were eligible."""
    items = [json.loads(line) for line in lines]
    answers = {i: plain_number(item["answer"]) for i, item in enumerate(items)}
    eligible = [i for i, answer in answers.items() if answer is not None]
    picked = sorted(random.Random(seed).sample(eligible, count))
    subset = []
    for index in picked:
        item = items[index]
        subset.append(
            {
                "id": f"math500-test-{index:04d}",
                "kind": "number",
                "question": item["problem"],
                "answer": answers[index],
                "subject": item["subject"],
                "level": item["level"],
            }
        )
    return subset, len(eligible)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("test_jsonl", type=Path, help="prm800k's prm800k/math_splits/test.jsonl")
    parser.add_argument(
        "-o", "--output", type=Path, default=OUTPUT, help=f"where to write (default {OUTPUT})"
    )
    args = parser.parse_args(argv)
    lines = args.test_jsonl.read_text(encoding="utf-8").splitlines()
    if lines and lines[0].startswith("version https://git-lfs"):
        parser.error(f"{args.test_jsonl} is a Git LFS pointer: install git-lfs and clone again")
    subset, eligible = draw(lines)
    with args.output.open("w", encoding="utf-8", newline="\n") as out:
        for problem in subset:
            out.write(json.dumps(problem, ensure_ascii=False) + "\n")
    print(
        f"wrote {len(subset)} of {eligible} eligible problems ({len(lines)} in all) "
        f"to {args.output}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
