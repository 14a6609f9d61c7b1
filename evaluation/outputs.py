"""What an evaluation leaves on disk, under its output folder (default data/eval/<dataset>/):

    report.json                               the whole report (evaluation.report.EvalReport)
    accuracy.png                              accuracy by stage and round
    agreement.png                             accuracy by agreement level
    arms.png                                  each arm's accuracy against its tokens
    raw_outputs/<id>_record.json              the deliberation record, as `show --json` prints it
    raw_outputs/<id>_stage3_refined.json      a debate pipeline's refined solutions, per problem
    raw_outputs/<id>_judge.json               the judge's verdicts (only with --judge)

A record file is written once its deliberation completed; a rerun reads it back instead of
asking Temporal, when its workflow id is the one the rerun expects.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from council.changes import detect_significant_changes
from council.iteration import RefinementResult
from council.models import DeliberationRecord
from evaluation.scoring import ProblemScore, replies_by_stage
from grading.dataset import Problem
from grading.judge import JudgeResult

RAW = "raw_outputs"
REPORT = "report.json"
PLOT = "accuracy.png"
AGREEMENT_PLOT = "agreement.png"
ARMS_PLOT = "arms.png"


def write_atomically(path: Path, text: str) -> None:
    """Write to a temporary file and rename it, so an interrupted run never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


class Outputs:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.raw = folder / RAW
        self.report_path = folder / REPORT
        self.plot_path = folder / PLOT
        self.agreement_plot_path = folder / AGREEMENT_PLOT
        self.arms_plot_path = folder / ARMS_PLOT

    def record_path(self, problem_id: str) -> Path:
        return self.raw / f"{problem_id}_record.json"

    def refined_path(self, problem_id: str) -> Path:
        return self.raw / f"{problem_id}_stage3_refined.json"

    def judge_path(self, problem_id: str) -> Path:
        return self.raw / f"{problem_id}_judge.json"

    def saved_record(self, problem_id: str, workflow_id: str) -> DeliberationRecord | None:
        """The saved record of this very deliberation, if there is one."""
        path = self.record_path(problem_id)
        try:
            record = DeliberationRecord.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError, ValueError):
            return None
        return record if record.id == workflow_id and record.status == "completed" else None

    def saved_judgement(self, problem_id: str, judge_id: str) -> JudgeResult | None:
        try:
            data = json.loads(self.judge_path(problem_id).read_text(encoding="utf-8"))
            if data.get("workflow_id") != judge_id:
                return None
            return JudgeResult.model_validate(data["result"])
        except (OSError, ValidationError, ValueError, KeyError, AttributeError):
            return None

    def save_record(self, problem_id: str, record: DeliberationRecord) -> None:
        write_atomically(self.record_path(problem_id), record.model_dump_json(indent=2))

    def save_judgement(
        self, problem_id: str, judge_id: str, candidates: list[str], result: JudgeResult
    ) -> None:
        data = {
            "workflow_id": judge_id,
            "candidates": candidates,
            "result": result.model_dump(mode="json"),
        }
        _write_json(self.judge_path(problem_id), data)

    def save_refined(
        self, problem: Problem, record: DeliberationRecord, score: ProblemScore
    ) -> None:
        _write_json(self.refined_path(problem.id), stage3_refined(problem, record, score))


def _write_json(path: Path, data: dict[str, Any]) -> None:
    write_atomically(path, json.dumps(data, indent=2, ensure_ascii=False))


def stage3_refined(
    problem: Problem, record: DeliberationRecord, score: ProblemScore
) -> dict[str, Any]:
    """The debate pipeline's raw_outputs/{problem_id}_stage3_refined.json, from a council record:
    each solver's original solution, the critiques it accepted and rejected in the last
    round it refined in, its final answer, and the chairman's answer."""
    stages = list(score.answers)
    final_stage = stages[-1]
    final_replies = replies_by_stage(record, len(stages) - 1)[final_stage]
    last: dict[str, RefinementResult] = {}
    rounds_refined: dict[str, list[int]] = {}
    for round_data in record.rounds:
        for refined in round_data.refinements:
            if refined.error is None:
                last[refined.model] = refined
                rounds_refined.setdefault(refined.model, []).append(round_data.round_number)
    originals = {result.model: result.response for result in record.stage1}
    solutions = {}
    for number, model in enumerate(record.models, start=1):
        if model not in originals:
            continue
        refinement = last.get(model)
        reading = score.answers[final_stage][model]
        first = score.answers[stages[0]][model]
        solutions[model] = {
            "solver_id": f"solver_{number}",
            "model_name": model,
            "original_solution": originals[model],
            "original_answer": first.answer,
            "original_answer_correct": first.correct,
            "critiques_accepted": refinement.critiques_accepted if refinement else [],
            "critiques_rejected": [c.model_dump() for c in refinement.critiques_rejected]
            if refinement
            else [],
            "refinement_reasoning": refinement.refinement_reasoning if refinement else None,
            "reasoning_steps": refinement.reasoning_steps if refinement else [],
            "final_answer": reading.answer,
            "final_answer_correct": reading.correct,
            "refined_response": final_replies.get(model),
            "confidence": refinement.confidence if refinement else None,
            "changed_from_original": detect_significant_changes(
                originals[model], final_replies.get(model) or originals[model]
            ),
            "improvement_explanation": refinement.improvement_explanation if refinement else None,
            "rounds_refined": rounds_refined.get(model, []),
        }
    chairman = score.chairman
    when = record.completed_at or record.started_at
    return {
        "problem_id": problem.id,
        "problem_text": problem.question,
        "kind": problem.kind,
        "expected_answer": problem.answer,
        "workflow_id": record.id,
        "refined_solutions": solutions,
        "chairman": {
            "model_name": score.chairman_model,
            "response": record.stage3.response if record.stage3 else None,
            "final_answer": chairman.answer if chairman else None,
            "final_answer_correct": chairman.correct if chairman else False,
        },
        "terminated_reason": score.terminated_reason,
        "rounds_completed": score.rounds_completed,
        "simulated": score.simulated,
        "unknown_to_simulator": score.unknown,
        "timestamp": when.isoformat() if when else None,
    }
