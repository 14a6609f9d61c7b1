"""The evaluation harness on a real Temporal dev server with the simulator: end to end
through `starter.py eval`, interrupted and resumed, failed and running deliberations,
the judge, and bad input."""

from __future__ import annotations

import asyncio
import json
import os
import struct
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest
from temporalio.common import WorkflowIDReusePolicy

import starter
from council.changes import detect_significant_changes
from council.models import DeliberationRecord
from council.validation import validate_request
from evaluation.cli import TEMPLATE_QUESTION
from evaluation.plan import EvalSettings, plan, problem_request
from evaluation.runner import Evaluation
from evaluation.statistics import mcnemar_exact
from grading.dataset import Dataset, Problem, load_dataset
from harness.processes import ROOT
from tests.sim_fixtures import wait_until
from tests.temporal_fixtures import FOUR_MODELS, Council, request, temporal_address
from workflows.deliberation import Deliberation

BUNDLED = ROOT / "datasets" / "arithmetic_logic.jsonl"
# Refinement fixes (arith-03, logic-04), two rounds (arith-02), all right at once (arith-04),
# a fraction (frac-03) and a text answer (text-03).
SUBSET = ("arith-02", "arith-03", "arith-04", "frac-03", "logic-04", "text-03")


def subset(tmp_path: Path, ids: tuple[str, ...] = SUBSET, name: str = "subset") -> Path:
    lines = {
        json.loads(line)["id"]: line for line in BUNDLED.read_text().splitlines() if line.strip()
    }
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(lines[i] + "\n" for i in ids), encoding="utf-8")
    return path


async def start_eval_cli(
    *args: str, env: dict[str, str], output: int = asyncio.subprocess.PIPE
) -> asyncio.subprocess.Process:
    """`starter.py eval ARGS` as a child process; its output piped, or sent to `output`."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "starter.py",
        "eval",
        *args,
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=output,
        stderr=output,
    )


async def eval_cli(*args: str, env: dict[str, str], timeout: float = 240) -> tuple[int, str, str]:
    """Run `council eval` to its end; the timeout only guards against a hang (a loaded
    machine runs a set of problems many times slower than an idle one)."""
    process = await start_eval_cli(*args, env=env)
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    return process.returncode, out.decode(), err.decode()


def fresh_tag() -> str:
    """Runs of one test never meet another test's: same dataset and settings, other tag."""
    return f"test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def cli_env(council: Council, temporal) -> dict[str, str]:
    return {
        "TEMPORAL_ADDRESS": temporal_address(temporal),
        "COUNCIL_TASK_QUEUE": council.task_queue,
        "COUNCIL_MODELS": ",".join(FOUR_MODELS),
    }


def stage1_calls(council: Council) -> int:
    """The stage 1 calls made, each once however often it was tried: every attempt of one
    call carries the same call id, and a busy machine retries calls whose heartbeat came late."""
    calls = [e["call_id"] for e in council.sim.log()["entries"] if e["stage"] == "stage1"]
    assert None not in calls, "a stage 1 request without its call id"
    return len(set(calls))


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


# ---- end to end ----------------------------------------------------------------------


def final_replies(record: DeliberationRecord) -> dict[str, str | None]:
    current: dict[str, str | None] = {m: None for m in record.models}
    current.update({s.model: s.response for s in record.stage1})
    for round_data in record.rounds:
        for refinement in round_data.refinements:
            current[refinement.model] = refinement.refined_response
    return current


def majority_is_right(problem: Problem, replies: dict[str, str | None]) -> bool:
    answers = [problem.read(replies[m]) for m in FOUR_MODELS]
    shown = [a.shown for a in answers if a is not None]
    if not shown:
        return False
    counts = Counter(shown)
    top = max(counts.values())
    winner = next(s for s in shown if counts[s] == top)  # ties: first in council order
    return problem.is_correct(next(a for a in answers if a is not None and a.shown == winner))


async def test_eval_end_to_end_on_a_subset_then_every_arm(
    council: Council, cli_env, tmp_path: Path
) -> None:
    """`council eval` on a subset, its report checked against the records; the same command
    again reads every record back, and without `--arms all` no sample is drawn and the
    report says so; then `eval --arms all` on the same runs: each member alone, the votes,
    the rounds, the chairman and the strongest member's self-consistency to the council's
    tokens; McNemar against each; conformity. (One test: the arms reuse the council's runs,
    which are deliberated once.)"""
    dataset = load_dataset(subset(tmp_path))
    out = tmp_path / "out"
    tag = fresh_tag()
    code, stdout, stderr = await eval_cli(
        str(dataset.path), "--out", str(out), "--concurrency", "3", "--tag", tag, env=cli_env
    )
    assert code == 0, stderr
    assert "Accuracy on subset (6 problems · SIMULATED models)" in stdout
    assert "majority vote" in stdout and "chairman (stage 3)" in stdout
    assert "Accuracy by agreement level (the final review's)" in stdout
    assert stderr.count("deliberated now") == 6 and "[6/6]" in stderr
    assert stage1_calls(council) == 4 * 6  # every problem deliberated once

    report = json.loads((out / "report.json").read_text())
    assert report["completed"] == 6 and report["failed"] == 0
    assert report["stages"] == ["stage 1", "round 1", "round 2"]
    assert report["run"]["simulated"] is True and report["run"]["models"] == FOUR_MODELS
    by_id = {p.id: p for p in dataset.problems}
    right = {model: {"stage 1": 0, "round 2": 0} for model in FOUR_MODELS}
    votes = {"stage 1": 0, "round 2": 0}
    chairman = tokens = 0
    by_level: dict[str, list[int]] = {}  # level -> [problems, chairman right]
    for score in report["problems"]:
        problem = by_id[score["id"]]
        record = DeliberationRecord.model_validate_json(
            (out / "raw_outputs" / f"{problem.id}_record.json").read_text()
        )
        assert record.id == score["workflow_id"] and record.query == problem.prompt()
        first = {m: None for m in FOUR_MODELS} | {s.model: s.response for s in record.stage1}
        last = final_replies(record)
        for model in FOUR_MODELS:
            for stage, replies in (("stage 1", first), ("round 2", last)):
                correct = problem.is_correct(problem.read(replies[model]))
                assert score["answers"][stage][model]["correct"] == correct, (
                    problem.id,
                    stage,
                    model,
                )
                right[model][stage] += correct
        for stage, replies in (("stage 1", first), ("round 2", last)):
            assert score["majority"][stage]["correct"] == majority_is_right(problem, replies)
            votes[stage] += majority_is_right(problem, replies)
        chairman_right = problem.is_correct(problem.read(record.stage3.response))
        chairman += chairman_right
        tokens += record.usage.total_tokens
        # Every record measures its final review's agreement; the report groups by its level.
        assert record.agreement is not None and score["agreement"] == record.agreement.level
        level = by_level.setdefault(record.agreement.level or "not measured", [0, 0])
        level[0] += 1
        level[1] += chairman_right
        assert score["usage"]["total_tokens"] == record.usage.total_tokens
        assert score["rounds_completed"] == len(record.rounds)

        refined = json.loads(
            (out / "raw_outputs" / f"{problem.id}_stage3_refined.json").read_text()
        )
        assert refined["problem_id"] == problem.id and refined["expected_answer"] == problem.answer
        assert set(refined["refined_solutions"]) == set(FOUR_MODELS)
        for model, solution in refined["refined_solutions"].items():
            assert solution["final_answer_correct"] == score["answers"]["round 2"][model]["correct"]
            assert solution["original_solution"] == first[model]
            # Changed means changed in substance (the change detection), not any edit.
            assert solution["changed_from_original"] == detect_significant_changes(
                first[model], last[model]
            )
            assert isinstance(solution["reasoning_steps"], list)

    accuracy = report["accuracy"]
    for model in FOUR_MODELS:
        for stage in ("stage 1", "round 2"):
            assert accuracy["models"][model][stage] == {
                "correct": right[model][stage],
                "total": 6,
                "accuracy": round(right[model][stage] / 6, 4),
            }
    assert {s: accuracy["majority_vote"][s]["correct"] for s in votes} == votes
    assert accuracy["chairman"]["correct"] == chairman
    assert {
        level: [row["problems"], row["chairman"]["correct"]]
        for level, row in report["by_agreement"].items()
        if row["problems"]
    } == by_level
    assert list(report["by_agreement"]) == ["high", "medium", "low", "not measured"]
    assert report["usage"]["total_tokens"] == tokens
    # The simulated solvers slip, and the refinements fix some of the slips.
    assert sum(r["stage 1"] for r in right.values()) < sum(r["round 2"] for r in right.values())
    fixed = json.loads((out / "raw_outputs" / "arith-03_stage3_refined.json").read_text())
    assert any(
        not s["original_answer_correct"] and s["final_answer_correct"] and s["critiques_accepted"]
        for s in fixed["refined_solutions"].values()
    )
    for plot in ("accuracy.png", "agreement.png"):
        width, height = png_size(out / plot)
        assert width > 400 and height > 300

    # The same command again deliberates nothing: every record is read back.
    council.sim.reset()
    code, stdout, stderr = await eval_cli(
        str(dataset.path), "--out", str(out), "--tag", tag, "--json", env=cli_env
    )
    assert code == 0, stderr
    assert council.sim.log()["total"] == 0
    again = json.loads((out / "report.json").read_text())
    assert again["sources"] == {"saved": 6} and again["accuracy"] == report["accuracy"]
    assert again["by_agreement"] == report["by_agreement"]
    # Without `--arms all`, no sample is drawn (the first command's calls were the council's
    # alone, counted above) and the report says so.
    council_only = json.loads(stdout)
    assert council_only["self_consistency"]["run"] is False
    assert "--arms all" in council_only["self_consistency"]["note"]
    assert not any(a["kind"] == "self-consistency" for a in council_only["arms"])

    # ---- every arm, on the same runs ----
    council.sim.reset()
    code, stdout, stderr = await eval_cli(
        str(dataset.path), "--out", str(out), "--tag", tag, "--json", "--arms", "all", env=cli_env
    )
    assert code == 0, stderr
    report = json.loads(stdout)
    problems = report["problems"]
    assert stderr.count(": self-consistency sim/") == 6 and "[6/6]" in stderr
    assert stderr.count(": depth auto ") == 6 and "(full " in stderr
    # The strongest member at stage 1 (a tie: the first in the council's order) is sampled.
    right = {m: sum(p["answers"]["stage 1"][m]["correct"] for p in problems) for m in FOUR_MODELS}
    strongest = max(FOUR_MODELS, key=lambda m: right[m])
    names = [a["name"] for a in report["arms"]]
    assert names == [
        *(f"{m} alone" for m in FOUR_MODELS),
        "stage-1 vote",
        "council after round 1",
        "council after round 2",
        "chairman",
        "council, depth auto",
        f"self-consistency ({strongest})",
    ]
    summary = report["self_consistency"]
    assert summary["run"] and summary["model"] == strongest and summary["problems"] == 6
    for problem in problems:
        sampled = problem["self_consistency"]
        assert sampled["model"] == strongest and sampled["answered"] == sampled["samples"] > 1
        # k samples spend about the council's tokens on the same problem.
        spent, target = sampled["usage"]["total_tokens"], problem["usage"]["total_tokens"]
        one = spent / sampled["samples"]
        assert abs(spent - target) <= one, (spent, target, one)
    # Only the samples and the runs under depth auto were new calls: each sample with its own
    # seed, the council's runs reused.
    samples = sum(p["self_consistency"]["samples"] for p in problems)
    assert stage1_calls(council) == samples + 4 * 6

    # Depth auto, paired with full depth on the same problems.
    auto = report["auto"]
    runs = [p["auto"] for p in problems]
    assert auto["run"] and auto["problems"] == 6 and auto["failed"] == 0
    assert auto["stopped_after_stage1"] == sum(r["stopped_after_stage1"] for r in runs)
    full_tokens = sum(p["usage"]["total_tokens"] for p in problems)
    auto_tokens = sum(r["usage"]["total_tokens"] for r in runs)
    assert auto["tokens_saved_share"] == pytest.approx(1 - auto_tokens / full_tokens, abs=1e-4)
    for run in runs:  # a run that stopped after stage 1 spent less than the full one
        assert run["seconds"] is not None and run["chairman"] is not None
    stopped = [r["usage"]["total_tokens"] for r in runs if r["stopped_after_stage1"]]
    assert all(t < min(p["usage"]["total_tokens"] for p in problems) for t in stopped)
    against = {t["arm"]: t for t in auto["paired"]}
    assert set(against) == {"chairman", "stage-1 vote", f"self-consistency ({strongest})"}
    auto_right = [r["chairman"]["correct"] for r in runs]
    full_right = [p["chairman"]["correct"] for p in problems]
    b = sum(a and not f for a, f in zip(auto_right, full_right, strict=True))
    c = sum(f and not a for a, f in zip(auto_right, full_right, strict=True))
    assert (against["chairman"]["only_council"], against["chairman"]["only_arm"]) == (b, c)
    assert "Depth auto against full depth" not in stdout  # --json: the report alone

    # Each arm's accuracy, its interval, and the chairman's paired test, from the problems.
    outcome = {
        "stage-1 vote": [p["majority"]["stage 1"]["correct"] for p in problems],
        "council after round 2": [p["majority"]["round 2"]["correct"] for p in problems],
        f"{strongest} alone": [p["answers"]["stage 1"][strongest]["correct"] for p in problems],
        f"self-consistency ({strongest})": [
            p["self_consistency"]["vote"]["correct"] for p in problems
        ],
    }
    chairman = [p["chairman"]["correct"] for p in problems]
    arms = {a["name"]: a for a in report["arms"]}
    tests = {t["arm"]: t for t in report["paired"]}
    assert "chairman" not in tests and len(tests) == len(arms) - 1
    for name, results in outcome.items():
        assert arms[name]["correct"] == sum(results) and arms[name]["total"] == 6
        low, high = arms[name]["ci95"]
        assert low <= arms[name]["accuracy"] <= high
        b = sum(c and not r for c, r in zip(chairman, results, strict=True))
        c = sum(r and not c for c, r in zip(chairman, results, strict=True))
        assert (tests[name]["only_council"], tests[name]["only_arm"]) == (b, c)
        assert tests[name]["mcnemar"] == pytest.approx(mcnemar_exact(b, c), abs=1e-6)
    assert arms["chairman"]["tokens_per_problem"] == pytest.approx(
        sum(p["usage"]["total_tokens"] for p in problems) / 6, abs=0.1
    )

    # Conformity: each member's answers from stage 1 to the last round.
    flow = report["conformity"]
    for model in FOUR_MODELS:
        pairs = [
            (p["answers"]["stage 1"][model]["correct"], p["answers"]["round 2"][model]["correct"])
            for p in problems
        ]
        assert flow["members"][model]["correct_to_wrong"] == pairs.count((True, False))
        assert flow["members"][model]["wrong_to_correct"] == pairs.count((False, True))
    assert flow["wrong_to_correct"] > 0  # the simulated refinements fix some slips
    overruled = [
        p["id"]
        for p in problems
        if p["majority"]["round 2"]["correct"] and not p["chairman"]["correct"]
    ]
    assert flow["chairman_overruled_majority"] == len(overruled)
    width, height = png_size(out / "arms.png")
    assert width > 600 and height > 300


async def test_a_problem_the_simulator_does_not_know_is_not_scored_as_wrong(
    council: Council, cli_env, tmp_path: Path
) -> None:
    """A dataset of the user's against the simulator, which knows only its own datasets:
    its problem is reported as one the simulator has no answer for, in no accuracy, and
    the bundled problem beside it is scored as ever."""
    path = subset(tmp_path, ("arith-04",), name="mine")
    unknown = {"id": "mine-01", "question": "What is 37*91+12?", "answer": 3379}
    path.write_text(path.read_text() + json.dumps(unknown) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    code, stdout, stderr = await eval_cli(
        str(path), "--out", str(out), "--tag", fresh_tag(), "--max-rounds", "1", env=cli_env
    )
    assert code == 0, stderr
    [line] = [line for line in stderr.splitlines() if "] mine-01" in line]
    assert "not scored: the simulator has no answer for this problem (expected 3379" in line
    assert "✗" not in line and "chairman" not in line
    assert "1 problem(s) not scored: the simulator has no answer for them" in stderr
    assert "Accuracy on mine (1 problems · SIMULATED models)" in stdout

    report = json.loads((out / "report.json").read_text())
    assert (report["completed"], report["failed"], report["unknown"]) == (2, 0, 1)
    assert report["accuracy"]["chairman"]["total"] == 1
    assert all(cells["stage 1"]["total"] == 1 for cells in report["accuracy"]["models"].values())
    scores = {score["id"]: score for score in report["problems"]}
    assert scores["mine-01"]["unknown"] is True and scores["arith-04"]["unknown"] is False
    assert scores["mine-01"]["chairman"]["answer"] is None
    raw = json.loads((out / "raw_outputs" / "mine-01_stage3_refined.json").read_text())
    assert raw["unknown_to_simulator"] is True


async def test_an_interrupted_eval_resumes_without_deliberating_again(
    council: Council, cli_env, tmp_path: Path
) -> None:
    dataset = subset(tmp_path)
    out = tmp_path / "out"
    raw = out / "raw_outputs"
    council.sim.set_faults({"*": {"latency": 0.1}})  # slow enough to interrupt partway
    args = (str(dataset), "--out", str(out), "--concurrency", "2", "--tag", fresh_tag())
    process = await start_eval_cli(*args, env=cli_env, output=asyncio.subprocess.DEVNULL)
    await wait_until(lambda: len(list(raw.glob("*_record.json"))) >= 2, timeout=60, step=0.05)
    process.kill()  # SIGKILL: no chance to clean up
    await process.wait()
    done = {p.name.removesuffix("_record.json") for p in raw.glob("*_record.json")}
    assert 2 <= len(done) < 6 and not (out / "report.json").exists()

    code, _, stderr = await eval_cli(*args, env=cli_env)
    assert code == 0, stderr
    report = json.loads((out / "report.json").read_text())
    assert report["completed"] == 6 and {p["id"] for p in report["problems"]} == set(SUBSET)
    sources = {p["id"]: p["source"] for p in report["problems"]}
    assert all(sources[i] == "saved" for i in done)
    # Each problem was deliberated once: the interrupted ones were awaited or fetched.
    assert stage1_calls(council) == 4 * 6
    assert sum(1 for s in sources.values() if s == "started") <= 6 - len(done)


# ---- failed and running deliberations ----------------------------------------------------


def settings(council: Council, out: Path, **options) -> EvalSettings:
    template = validate_request(request(TEMPLATE_QUESTION))
    options.setdefault("tag", fresh_tag())
    return EvalSettings(template=template, task_queue=council.task_queue, out_dir=out, **options)


async def test_failed_runs_are_reported_then_retried_and_running_ones_awaited(
    council: Council, tmp_path: Path
) -> None:
    dataset: Dataset = load_dataset(subset(tmp_path, ("arith-04", "unit-02", "logic-03")))
    eval_plan = plan(dataset, settings(council, tmp_path / "out", concurrency=3))
    first, second, third = dataset.problems
    # Three of the four models refuse every stage 1 call: too few answers, the run fails.
    refuse = {"errors": {"400": 1.0}, "stages": ["stage1"]}
    council.sim.set_faults({m: refuse for m in FOUR_MODELS[1:]})
    report = await Evaluation(council.client, eval_plan).run()
    assert report.failed == 3 and report.completed == 0
    assert all("fewer than two models answered" in (p.error or "") for p in report.problems)
    failed_run = (
        await council.client.get_workflow_handle(eval_plan.workflow_id(first)).describe()
    ).run_id

    # Without the faults: one problem is already running when the harness starts.
    council.sim.set_faults({"*": {"latency": 0.2}})
    council.sim.reset()
    running = await council.client.start_workflow(
        Deliberation.run,
        problem_request(eval_plan.settings.template, third).model_dump(mode="json"),
        id=eval_plan.workflow_id(third),
        task_queue=council.task_queue,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
    )
    report = await Evaluation(council.client, eval_plan).run()
    assert report.failed == 0 and report.completed == 3
    sources = {p.id: p.source for p in report.problems}
    assert sources == {first.id: "restarted", second.id: "restarted", third.id: "awaited"}
    assert stage1_calls(council) == 4 * 3  # the running one was not started twice
    retried = await council.client.get_workflow_handle(eval_plan.workflow_id(first)).describe()
    assert retried.run_id != failed_run and retried.status.name == "COMPLETED"
    assert (await running.describe()).status.name == "COMPLETED"

    # Without the raw outputs, completed runs are fetched from Temporal.
    for path in (tmp_path / "out" / "raw_outputs").glob("*_record.json"):
        path.unlink()
    council.sim.reset()
    report = await Evaluation(council.client, eval_plan).run()
    assert {p.source for p in report.problems} == {"reused"} and council.sim.log()["total"] == 0


async def test_a_judge_grades_text_replies_that_do_not_match_exactly(
    council: Council, tmp_path: Path
) -> None:
    dataset = load_dataset(subset(tmp_path, ("text-01", "text-02", "text-05")))
    judged_settings = settings(council, tmp_path / "out", judge="sim/atlas")
    report = await Evaluation(council.client, plan(dataset, judged_settings)).run()
    assert report.completed == 3 and report.run.judge == "sim/atlas"
    assert report.usage.judge_calls > 0
    rescued = [
        (score.id, stage, model)
        for score in report.problems
        for stage, readings in score.answers.items()
        for model, reading in readings.items()
        if reading.judged is True
    ]
    assert rescued, "the judge found no correct free-text reply"
    for score_id, stage, model in rescued:
        score = next(s for s in report.problems if s.id == score_id)
        assert score.answers[stage][model].correct
    # Cirrus ends with "It must be X.": exact matching alone does not count it.
    assert any(model == "sim/cirrus" for _, _, model in rescued)
    judged = json.loads(
        (tmp_path / "out" / "raw_outputs" / f"{rescued[0][0]}_judge.json").read_text()
    )
    assert "-judge-" in judged["workflow_id"] and True in judged["result"]["verdicts"]

    council.sim.reset()  # a rerun asks neither the council nor the judge again
    again = await Evaluation(council.client, plan(dataset, judged_settings)).run()
    assert council.sim.log()["total"] == 0 and again.accuracy == report.accuracy


# ---- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.jsonl"], "cannot read dataset missing.jsonl"),
        (["{bad}"], "bad.jsonl line 2: answer: is required"),
        (["{good}", "--concurrency", "0"], "argument --concurrency: must be at least 1 (got 0)"),
        (["{good}", "--model", "a/b"], "--model: need 2 to 12 models, got 1"),
        (["{good}", "--max-rounds", "9"], "--max-rounds must be between 1 and 5 (got 9)"),
        (["{good}", "--judge", "not a model!"], "--judge: 'not a model!' is not a model id"),
        (["{good}"], "cannot reach the Temporal server at 127.0.0.1:1"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message, tmp_path, monkeypatch, capsys) -> None:
    good = subset(tmp_path, ("arith-01",), name="good")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text() + '{"id": "x", "question": "q?"}\n')
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")  # validation comes before connecting
    monkeypatch.chdir(tmp_path)
    argv = ["eval", *(a.format(good=good, bad=bad) for a in args)]
    assert starter.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("starter: ") and captured.err.count("\n") == 1
    assert message in captured.err, captured.err
    assert not (tmp_path / "data").exists()  # nothing was written
