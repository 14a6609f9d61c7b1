"""Accuracy by agreement level in the evaluation report, from hand-made records whose
agreement levels and correctness are known: the table, report.json, the printed table
and the plot. No server: the records are built here and scored as the harness scores them."""

from __future__ import annotations

import json
import struct
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from council.agreement import Agreement, measure_agreement
from council.models import DeliberationRecord
from council.stages import Stage1Result, Stage3Result
from council.validation import validate_request
from evaluation.plan import EvalSettings, plan
from evaluation.plot import plot_agreement
from evaluation.report import (
    AGREEMENT_ROWS,
    NOT_MEASURED,
    LevelAccuracy,
    build_report,
    print_report,
)
from evaluation.scoring import ProblemScore, failed_problem, score_problem
from grading.dataset import Dataset, Problem

pytestmark = pytest.mark.fast

MEMBERS = ["m/a", "m/b", "m/c"]
A, B, C = MEMBERS
RIGHT, WRONG = "Work.\nFinal answer: 42", "Work.\nFinal answer: 41"


def ratings(**low: float) -> dict[str, dict[str, float]]:
    """Every member rates every other answer 5, except the given (reviewer_author) ones."""
    table = {r: {a: 5.0 for a in MEMBERS if a != r} for r in MEMBERS}
    for pair, value in low.items():
        reviewer, author = (f"m/{x}" for x in pair.split("_"))
        table[reviewer][author] = value
    return table


# All equal; one dissent on one answer; dissents on two answers.
HIGH = measure_agreement(ratings())
MEDIUM = measure_agreement(ratings(a_b=1))
LOW = measure_agreement(ratings(a_b=1, b_c=1))


def record(n: int, answers: tuple[str, str, str], chairman: str, agreement) -> DeliberationRecord:
    return DeliberationRecord(
        id=f"eval-{n}",
        query="What is six times seven?",
        models=MEMBERS,
        chairman=A,
        status="completed",
        stage1=[Stage1Result(model=m, response=t) for m, t in zip(MEMBERS, answers, strict=True)],
        stage3=Stage3Result(model=A, response=chairman),
        agreement=agreement,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


# (final answers, chairman, agreement): levels and correctness chosen by hand.
CASES = [
    ((RIGHT, RIGHT, RIGHT), RIGHT, HIGH),
    ((RIGHT, RIGHT, WRONG), WRONG, HIGH),
    ((RIGHT, WRONG, RIGHT), RIGHT, MEDIUM),
    ((WRONG, WRONG, RIGHT), WRONG, LOW),
    ((RIGHT, WRONG, WRONG), WRONG, LOW),
    ((RIGHT, RIGHT, RIGHT), RIGHT, None),  # a record from before agreement was measured
    ((WRONG, RIGHT, RIGHT), RIGHT, Agreement()),  # measured, but nothing to compare
]


@pytest.fixture
def report(tmp_path: Path):
    problems = tuple(
        Problem(id=f"p{n}", question="What is six times seven?", answer="42")
        for n in range(len(CASES) + 1)
    )
    dataset = Dataset(name="hand", path=tmp_path / "hand.jsonl", sha256="0" * 64, problems=problems)
    template = validate_request({"question": "(evaluation)", "models": MEMBERS, "max_rounds": 1})
    eval_plan = plan(dataset, EvalSettings(template=template, task_queue="q", out_dir=tmp_path))
    scores: list[ProblemScore] = [
        score_problem(problem, record(n, *case), 1, f"eval-{n}", "saved")
        for n, (problem, case) in enumerate(zip(problems, CASES, strict=False))
    ]
    scores.append(failed_problem(problems[-1], "eval-x", "started", "fewer than two answered"))
    return build_report(eval_plan, scores, datetime(2026, 1, 1, tzinfo=UTC), 1.0)


def test_the_hand_made_levels_are_the_ones_intended() -> None:
    assert (HIGH.level, MEDIUM.level, LOW.level) == ("high", "medium", "low")


def test_problems_are_grouped_by_their_final_reviews_agreement_level(report) -> None:
    assert [s.agreement for s in report.problems[:5]] == ["high", "high", "medium", "low", "low"]
    assert report.problems[3].dissents == len(LOW.dissent) > 0
    table = report.by_agreement
    assert list(table) == list(AGREEMENT_ROWS) == ["high", "medium", "low", NOT_MEASURED]
    assert {level: row.problems for level, row in table.items()} == {
        "high": 2,
        "medium": 1,
        "low": 2,
        NOT_MEASURED: 2,  # the failed problem is in no row
    }
    cells = {
        level: (row.chairman.correct, row.majority_vote.correct, row.answers.correct)
        for level, row in table.items()
    }
    assert cells == {
        "high": (1, 2, 5),
        "medium": (1, 1, 2),
        "low": (0, 0, 2),
        NOT_MEASURED: (2, 2, 5),
    }
    assert table["high"].chairman.accuracy == 0.5 and table["low"].chairman.accuracy == 0.0
    assert table["medium"].answers.total == 3 and table[NOT_MEASURED].answers.total == 6
    # The rows add up to the overall accuracy.
    assert sum(r.chairman.correct for r in table.values()) == report.accuracy.chairman.correct
    assert sum(r.problems for r in table.values()) == report.completed == len(CASES)

    saved = json.loads(report.model_dump_json())
    assert saved["by_agreement"]["medium"]["chairman"] == {
        "correct": 1,
        "total": 1,
        "accuracy": 1.0,
    }
    assert saved["problems"][2]["agreement"] == "medium"


def test_the_printed_report_and_the_plot_show_the_table(report, tmp_path: Path) -> None:
    console = Console(record=True, width=160)
    print_report(report, console, per_problem=False)
    text = console.export_text()
    assert "Accuracy by agreement level" in text
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") > 4}
    assert "50% (1/2)" in rows["high"] and "0% (0/2)" in rows["low"]
    assert "100% (2/2)" in rows[NOT_MEASURED]

    path = plot_agreement(report, tmp_path / "agreement.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 400 and height > 300


def test_a_level_without_problems_is_shown_as_such(tmp_path: Path, report) -> None:
    empty = report.model_copy(
        update={"by_agreement": {**report.by_agreement, "medium": LevelAccuracy()}}
    )
    console = Console(record=True, width=160)
    print_report(empty, console, per_problem=False)
    medium = next(line for line in console.export_text().splitlines() if "│ medium" in line)
    assert [cell.strip() for cell in medium.split("│")[2:6]] == ["0", "-", "-", "-"]
    assert plot_agreement(empty, tmp_path / "empty.png").stat().st_size > 0
