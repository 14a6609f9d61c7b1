"""A dataset of problems with known answers: one JSON object a line.

    {"id": "arith-01", "question": "...", "answer": "153", "kind": "number"}

Fields: `id` (letters, digits, ".", "_", "-"; unique in the file), `question`, `answer`
(a string or a number) and, optionally, `kind` (number, choice or text; inferred from the
answer when absent) and `tolerance` (an absolute tolerance for a number answer). Other
fields are kept out of the way and ignored. Blank lines are skipped. A problem that cannot
be used stops the load with a one-line DatasetError naming the file, the line and the field.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails

from council import limits
from council.paths import url_problem
from grading.answers import (
    ABS_TOL,
    REL_TOL,
    Answer,
    Kind,
    choice_letters,
    expected_answer,
    extract,
    infer_kind,
    matches,
)

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
MAX_ID_CHARS = 64
# What the council is asked to end its reply with, by kind of answer.
ANSWER_FORMAT = {
    "number": "a number only, without units",
    "choice": "the letter of one option",
    "text": "a word or a short phrase",
}
INSTRUCTION = (
    "Work the problem out step by step, briefly. End your reply with a last line of the form "
    '"Final answer: <answer>", where <answer> is {format}.'
)
MAX_QUESTION_CHARS = limits.QUESTION_MAX_CHARS - 300  # room for the instruction
# What the simulator writes, in place of an answer, for a problem it has no answer for (one
# of a dataset it was not given): the harness counts such a problem as unknown to the
# simulator, neither right nor wrong.
NO_SIMULATED_ANSWER = "[simulated: no answer known for this problem]"


def is_problem_prompt(text: str) -> bool:
    """Whether a question is a problem as the harness asks it (Problem.prompt)."""
    ending = " ".join(text.split())
    return any(ending.endswith(INSTRUCTION.format(format=f)) for f in ANSWER_FORMAT.values())


class DatasetError(ValueError):
    """A dataset that cannot be used: the message is one line, naming the file, the line
    and the field."""


class Problem(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_ID_CHARS)
    ]
    question: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_QUESTION_CHARS)
    ]
    answer: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    kind: Kind
    tolerance: float | None = Field(default=None, ge=0)

    @field_validator("id")
    @classmethod
    def _id_chars(cls, value: str) -> str:
        if not re.match(ID_PATTERN, value):
            raise ValueError(f"{value!r} may hold only letters, digits, '.', '_' and '-'")
        return value

    @field_validator("answer", mode="before")
    @classmethod
    def _answer_text(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("must be a string or a number, not true/false")
        if isinstance(value, int | float):
            return repr(value) if isinstance(value, float) else str(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _infer_kind(cls, data: Any) -> Any:
        if (
            isinstance(data, dict)
            and data.get("kind") is None
            and isinstance(data.get("answer"), str | int | float)
        ):
            data = {**data, "kind": infer_kind(str(data["answer"]))}
        return data

    @model_validator(mode="after")
    def _answer_of_its_kind(self) -> Problem:
        try:
            expected_answer(self.kind, self.answer, self.letters)
        except ValueError as err:
            raise ValueError(f"answer: {err} (kind {self.kind})") from None
        if self.tolerance is not None and self.kind != "number":
            raise ValueError(f"tolerance: only a number answer has one (kind {self.kind})")
        return self

    @property
    def letters(self) -> str:
        return choice_letters(self.question)

    @property
    def expected(self) -> Answer:
        return expected_answer(self.kind, self.answer, self.letters)

    def prompt(self) -> str:
        """The question as the council gets it: the problem and how to end the reply."""
        return f"{self.question}\n\n{INSTRUCTION.format(format=ANSWER_FORMAT[self.kind])}"

    def read(self, reply: str | None) -> Answer | None:
        """The final answer in a reply, read as this problem's kind."""
        return extract(self.kind, reply, self.letters)

    def is_correct(self, answer: Answer | None) -> bool:
        abs_tol = self.tolerance if self.tolerance is not None else ABS_TOL
        return matches(self.expected, answer, REL_TOL, abs_tol)


@dataclass(frozen=True)
class Dataset:
    name: str
    path: Path
    sha256: str
    problems: tuple[Problem, ...]

    def __len__(self) -> int:
        return len(self.problems)


def _field_error(error: ErrorDetails) -> str:
    loc = ".".join(str(p) for p in error["loc"])
    kind = error["type"]
    message = error["msg"].removeprefix("Value error, ")
    if kind == "missing":
        return f"{loc}: is required"
    if kind == "string_too_short":
        return f"{loc}: must not be empty"
    if kind == "string_too_long":
        return f"{loc}: is too long (at most {error.get('ctx', {}).get('max_length')} characters)"
    if kind == "literal_error":
        return f"{loc}: must be number, choice or text (got {error['input']!r})"
    if not loc:  # a model-level check names its own field
        return message
    return f"{loc}: {message}"


def parse_problem(line: str, where: str) -> Problem:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as err:
        raise DatasetError(f"{where}: not valid JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(data, dict):
        raise DatasetError(f"{where}: a problem must be a JSON object, got {type(data).__name__}")
    try:
        return Problem.model_validate(data)
    except ValidationError as err:
        raise DatasetError(f"{where}: {_field_error(err.errors()[0])}") from None


def load_dataset(path: str | Path) -> Dataset:
    """Read and validate a JSONL dataset; raise DatasetError with a one-line reason."""
    given, path = str(path), Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        remote = url_problem(given)
        if remote:
            raise DatasetError(f"dataset {remote}") from None
        raise DatasetError(f"cannot read dataset {path}: {err.strerror or err}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DatasetError(f"{path.name}: not UTF-8 text (byte {err.start})") from None
    problems: list[Problem] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path.name} line {number}"
        problem = parse_problem(line, where)
        if problem.id in first_line:
            raise DatasetError(f"{where}: id: {problem.id!r} repeats line {first_line[problem.id]}")
        first_line[problem.id] = number
        problems.append(problem)
    if not problems:
        raise DatasetError(f"{path.name}: no problems (one JSON object a line)")
    return Dataset(
        name=path.stem,
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        problems=tuple(problems),
    )
