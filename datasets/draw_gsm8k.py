"""Draw the GSM8K known-answer subset, gsm8k_test_subset.jsonl, from GSM8K's test split.

GSM8K's test split is grade_school_math/data/test.jsonl in the repository
openai/grade-school-math (MIT licence, see LICENSE-gsm8k). To redraw the subset, from the
repository root:

    git clone https://github.com/openai/grade-school-math
    python datasets/draw_gsm8k.py grade-school-math/grade_school_math/data/test.jsonl

The draw is reproducible: random.Random(SEED).sample picks COUNT line indices (0-based
indices into test.jsonl), and the problems are written sorted by index, each with its
index in its id ("gsm8k-test-0042"). The expected answer is the number after "#### " at
the end of GSM8K's worked solution, with its thousands separators removed. The question
is kept as it is. Only the standard library is used.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

SEED = 20261126
COUNT = 250
OUTPUT = Path(__file__).resolve().parent / "gsm8k_test_subset.jsonl"
_FINAL = re.compile(r"####\s*(-?[\d,]*\.?\d+)\s*$")


def final_answer(solution: str) -> str:
    """The number after "#### " in a GSM8K solution, without thousands separators."""
    match = _FINAL.search(solution)
    if match is None:
        raise ValueError(f"no '#### <number>' at the end of: {solution[-60:]!r}")
    return match.group(1).replace(",", "")


def draw(lines: list[str], seed: int = SEED, count: int = COUNT) -> list[dict[str, str]]:
    """The subset: `count` problems drawn with `seed`, sorted by their line index."""
    picked = sorted(random.Random(seed).sample(range(len(lines)), count))
    subset = []
    for index in picked:
        item = json.loads(lines[index])
        subset.append(
            {
                "id": f"gsm8k-test-{index:04d}",
                "kind": "number",
                "question": item["question"],
                "answer": final_answer(item["answer"]),
            }
        )
    return subset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("test_jsonl", type=Path, help="GSM8K's grade_school_math/data/test.jsonl")
    parser.add_argument(
        "-o", "--output", type=Path, default=OUTPUT, help=f"where to write (default {OUTPUT})"
    )
    args = parser.parse_args(argv)
    lines = args.test_jsonl.read_text(encoding="utf-8").splitlines()
    subset = draw(lines)
    with args.output.open("w", encoding="utf-8", newline="\n") as out:
        for problem in subset:
            out.write(json.dumps(problem, ensure_ascii=False) + "\n")
    print(f"wrote {len(subset)} of {len(lines)} problems to {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
