"""What an evaluation run will do, before it does anything: the dataset's problems, the
council's settings, and each problem's workflow id, derived from the dataset (its name
and a hash of its content together with the council's settings: the "run key") and the
problem's id:

    eval-<dataset>-<run key>-<problem id>

so a rerun of the same command finds the runs of the first one (evaluation.runner).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from council import prompts
from council.calls import Stage
from council.ids import EVALUATION_ID_PREFIX
from council.models import DeliberationRequest
from council.validation import validate_request
from grading.dataset import INSTRUCTION, Dataset, Problem
from grading.sampling import DEFAULT_TEMPERATURE, MAX_SAMPLES, SamplingRequest

# Which arms an evaluation runs: the council's own ("council": every arm its runs give),
# or "all": also self-consistency, which makes its own calls.
Arms = Literal["council", "all"]

# What a run key depends on: the answers could differ if any of these did.
KEY_SETTINGS = {
    "models",
    "chairman",
    "max_rounds",
    "min_rounds",
    "quality_threshold",
    "token_budget",
    "max_cost_usd",
    "stop_on_convergence",
    "min_change_threshold",
    "criteria",
    "temperature",
    "max_tokens",
    "stragglers",
    "instructions",
    "answer_format",
    # Only where the council has tools: the keys of runs without stay as they were.
    "tools",
    "tool_options",
    # Only under depth auto, likewise.
    "depth",
    "auto",
}


@dataclass
class EvalSettings:
    template: DeliberationRequest  # the council's settings; each problem sets the question
    task_queue: str
    out_dir: Path
    concurrency: int = 4
    limit: int | None = None
    judge: str | None = None
    tag: str | None = None
    arms: Arms = "council"
    max_samples: int = MAX_SAMPLES


@dataclass
class EvalPlan:
    """What a run will do, before it does it (the command line prints it)."""

    dataset: Dataset
    settings: EvalSettings
    key: str
    problems: tuple[Problem, ...] = field(default_factory=tuple)

    def workflow_id(self, problem: Problem) -> str:
        return workflow_id(self.dataset, self.key, problem)

    @property
    def id_pattern(self) -> str:
        return workflow_id(self.dataset, self.key, None)


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40].rstrip("-") or "dataset"


def run_key(dataset: Dataset, template: DeliberationRequest, tag: str | None = None) -> str:
    """A hash of the dataset's content, the council's settings, the answer instruction and
    the tag: the same command gives the same key, any change that matters a new one."""
    settings = template.model_dump(mode="json", include=KEY_SETTINGS)
    if not template.tools:
        settings.pop("tools"), settings.pop("tool_options")
    if template.depth == "full":
        settings.pop("depth"), settings.pop("auto")
    blob = json.dumps(
        {"dataset": dataset.sha256, "settings": settings, "instruction": INSTRUCTION, "tag": tag},
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:10]


def workflow_id(dataset: Dataset, key: str, problem: Problem | None) -> str:
    problem_part = problem.id if problem else "<problem id>"
    return f"{EVALUATION_ID_PREFIX}{slug(dataset.name)}-{key}-{problem_part}"


def plan(dataset: Dataset, settings: EvalSettings) -> EvalPlan:
    problems = dataset.problems[: settings.limit] if settings.limit else dataset.problems
    return EvalPlan(dataset, settings, run_key(dataset, settings.template, settings.tag), problems)


def problem_request(template: DeliberationRequest, problem: Problem) -> DeliberationRequest:
    return validate_request({**template.model_dump(mode="json"), "question": problem.prompt()})


def sampling_request(
    template: DeliberationRequest,
    problem: Problem,
    model: str,
    token_target: int,
    max_samples: int = MAX_SAMPLES,
) -> SamplingRequest:
    """Self-consistency on one problem: `model`'s stage-1 call as the council makes it,
    at the council's temperature (DEFAULT_TEMPERATURE when it sets none: samples must vary)."""
    request = problem_request(template, problem)
    ask = prompts.answer_prompt(
        request.question, request.response_byte_cap, None, request.instructions
    )
    call = request.model_call(
        Stage.ANSWER, 0, model, ask, request.reply_tokens(Stage.ANSWER)
    ).model_copy(update={"temperature": sampling_temperature(template)})
    return SamplingRequest(
        call=call,
        token_target=max(1, token_target),
        max_samples=max_samples,
        policy=request.policy,
    )


def sampling_temperature(template: DeliberationRequest) -> float:
    return template.temperature or DEFAULT_TEMPERATURE
