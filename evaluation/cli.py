"""`python starter.py eval DATASET.jsonl`: the harness on the command line.

starter.py parses the council's options (the same as `start`) and these; this module
loads the dataset, prints progress on stderr, the tables on stdout (or report.json with
--json), and returns the exit status: 0 all problems deliberated, 1 some failed.
Bad input raises BadInput (starter.py exits with status 2 and the one-line reason).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from temporalio.client import Client

from app.installation import extras
from council import numbers
from council.ids import MODEL_ID
from council.models import DeliberationRequest
from evaluation.outputs import Outputs
from evaluation.plan import EvalPlan, EvalSettings, plan
from evaluation.report import NOT_SCORED, print_report
from evaluation.runner import Evaluation, Progress
from evaluation.scoring import SOURCES, ProblemScore
from grading.dataset import DatasetError, load_dataset
from grading.sampling import MAX_SAMPLES, MAX_SAMPLES_LIMIT

TEMPLATE_QUESTION = "(evaluation: every problem sets its own question)"


class BadInput(ValueError):
    """Input the harness cannot use: the message is one line for the user (exit status 2)."""


MAX_TAG_CHARS = 40

__all__ = ["TEMPLATE_QUESTION", "BadInput", "add_arguments", "execute", "prepare"]


def _positive(text: str) -> int:
    value = numbers.whole_argument(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 (got {value})")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--concurrency", type=_positive, default=4, help="deliberations at a time (default 4)"
    )
    parser.add_argument("--limit", type=_positive, help="only the first N problems of the dataset")
    parser.add_argument("--out", help="output folder (default data/eval/<dataset name>)")
    parser.add_argument("--judge", help="a judge model for text answers that do not match exactly")
    parser.add_argument(
        "--tag", help="a label that makes a separate set of runs with the same settings"
    )
    parser.add_argument(
        "--json", action="store_true", help="print report.json on stdout instead of tables"
    )
    parser.add_argument(
        "--arms",
        choices=["council", "all"],
        default="council",
        help="council (default): the arms the council's own runs give (each member alone, "
        "the votes, the chairman); all: also self-consistency, the strongest member sampled "
        "to the council's tokens (calls of its own)",
    )
    parser.add_argument(
        "--max-samples",
        type=_positive,
        default=MAX_SAMPLES,
        help=f"self-consistency: at most this many samples a problem (default {MAX_SAMPLES})",
    )


def prepare(args: argparse.Namespace, template: DeliberationRequest, task_queue: str) -> EvalPlan:
    """Everything checked before anything starts; BadInput says what is wrong."""
    try:
        extras.require_plotting("eval's plots")
    except extras.MissingExtra as error:
        raise BadInput(str(error)) from None
    try:
        dataset = load_dataset(args.dataset)
    except DatasetError as error:
        raise BadInput(str(error)) from None
    if args.judge is not None and not MODEL_ID.match(args.judge.strip()):
        raise BadInput(f"--judge: {args.judge!r} is not a model id")
    if args.max_samples > MAX_SAMPLES_LIMIT:
        raise BadInput(
            f"--max-samples: 1 to {MAX_SAMPLES_LIMIT} samples a problem (got {args.max_samples})"
        )
    if args.tag is not None and not (0 < len(args.tag) <= MAX_TAG_CHARS):
        raise BadInput(f"--tag: 1 to {MAX_TAG_CHARS} characters (got {len(args.tag)})")
    out = Path(args.out) if args.out else Path("data") / "eval" / dataset.name
    settings = EvalSettings(
        template=template,
        task_queue=task_queue,
        out_dir=out,
        concurrency=args.concurrency,
        limit=args.limit,
        judge=args.judge.strip() if args.judge else None,
        tag=args.tag,
        arms=args.arms,
        max_samples=args.max_samples,
    )
    return plan(dataset, settings)


def _progress_line(score: ProblemScore, done: int, total: int, last_stage: str) -> str:
    width = len(str(total))
    head = f"[{done:>{width}}/{total}] {score.id}"
    if score.status != "completed":
        return f"{head}: FAILED ({SOURCES[score.source]}): {score.error}"
    if score.unknown:
        return (
            f"{head}: {NOT_SCORED} (expected {score.expected}; it knows the datasets in "
            f"datasets/ and the files in COUNCIL_SIM_DATASETS) · "
            f"{score.usage.total_tokens:,} tokens · {SOURCES[score.source]}"
        )
    first = list(score.answers["stage 1"].values())
    final = list(score.answers[last_stage].values())
    chairman = score.chairman
    mark = "✓" if chairman and chairman.correct else "✗"
    rounds = f"{score.rounds_completed} round{'s' if score.rounds_completed != 1 else ''}"
    return (
        f"{head}: chairman {mark} {chairman.answer if chairman else '-'} (expected "
        f"{score.expected}) · "
        f"right at stage 1 {sum(r.correct for r in first)}/{len(first)}, at the end "
        ""
        f"{sum(r.correct for r in final)}/{len(final)} · {rounds} · "
        f"{score.usage.total_tokens:,} tokens · "
        f"{SOURCES[score.source]}"
    )


def _sampled_line(score: ProblemScore, done: int, total: int) -> str:
    head = f"[{done:>{len(str(total))}}/{total}] {score.id}: self-consistency"
    sampled = score.self_consistency
    if score.unknown:
        return f"{head}: {NOT_SCORED}"
    if sampled is None or not sampled.answered:
        why = sampled.errors[0] if sampled and sampled.errors else "no sample answered"
        return f"{head}: FAILED: {why}"
    vote = sampled.vote
    return (
        f"{head} {sampled.model} {'✓' if vote.correct else '✗'} {vote.answer or '-'} "
        f"({vote.votes} of {sampled.answered} samples agree; k {sampled.samples} for "
        f"{score.usage.total_tokens:,} council tokens) · {sampled.usage.total_tokens:,} tokens"
    )


def _auto_line(score: ProblemScore, done: int, total: int) -> str:
    head = f"[{done:>{len(str(total))}}/{total}] {score.id}: depth auto"
    auto = score.auto
    if score.unknown:
        return f"{head}: {NOT_SCORED}"
    if auto is None or auto.chairman is None:
        return f"{head}: FAILED: {auto.error if auto else 'not run'}"
    how = "stopped after stage 1" if auto.stopped_after_stage1 else "deliberated"
    return (
        f"{head} {'✓' if auto.chairman.correct else '✗'} {auto.chairman.answer or '-'} · {how}"
        f" · {auto.usage.total_tokens:,} tokens (full {score.usage.total_tokens:,})"
    )


async def execute(client: Client, eval_plan: EvalPlan, as_json: bool, err: Console) -> int:
    settings = eval_plan.settings
    dataset = eval_plan.dataset
    template = settings.template
    err.print(
        f"eval: {dataset.name}: {len(eval_plan.problems)} of {len(dataset)} problems "
        ""
        f"(sha256 {dataset.sha256[:12]}) · council {', '.join(template.models)} · chairman "
        f"{template.chairman} · up to {template.max_rounds} rounds · "
        f"{settings.concurrency} at a time",
        markup=False,
    )
    if settings.arms == "all":
        err.print(
            "eval: --arms all: then the strongest member at stage 1 is sampled on every "
            "problem, as many times as spends the council's tokens on it (self-consistency), "
            "and every problem is deliberated again under depth auto",
            markup=False,
        )
    err.print(
        f"eval: workflow ids {eval_plan.id_pattern}: a rerun of this command resumes "
        f"(completed problems are not deliberated again)",
        markup=False,
    )
    last_stage = f"round {template.max_rounds}"

    def printing(line: Callable[[ProblemScore, int, int], str]) -> Progress:
        return lambda *done: err.print(line(*done), markup=False, highlight=False)

    progress = printing(lambda score, done, total: _progress_line(score, done, total, last_stage))
    try:
        report = await Evaluation(
            client, eval_plan, progress, printing(_sampled_line), printing(_auto_line)
        ).run()
    except (asyncio.CancelledError, KeyboardInterrupt):
        err.print(
            "eval: interrupted; deliberations in flight go on in Temporal, and the same command "
            "resumes",
            markup=False,
        )
        raise
    if as_json:
        print(report.model_dump_json(indent=2))
    else:
        print_report(report, Console(width=None if sys.stdout.isatty() else 160, highlight=False))
    outputs = Outputs(settings.out_dir)
    if report.run.simulated:
        err.print(
            "eval: these answers were written by the SIMULATOR, not by real models", markup=False
        )
    err.print(
        f"eval: report {outputs.report_path} · plots {outputs.plot_path}, "
        f"{outputs.agreement_plot_path}, {outputs.arms_plot_path} · raw outputs {outputs.raw}/",
        markup=False,
    )
    if report.unknown:
        err.print(
            f"eval: {report.unknown} problem(s) not scored: the simulator has no answer for "
            f"them (it knows the datasets in datasets/ and the files in COUNCIL_SIM_DATASETS; "
            f"make eval gives it the dataset); the accuracies count the other "
            f"{report.scored}",
            markup=False,
        )
    if report.failed:
        err.print(f"eval: {report.failed} problem(s) failed; rerun to retry them", markup=False)
        return 1
    return 0
