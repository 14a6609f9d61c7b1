"""Turn a pydantic ValidationError into one line that names the field and what it allows.

A problem is kept apart from the name of its field (its pydantic location), so that each
surface can name the field its own way (a flag, a form's label, a body's path) and say
the rest in the same words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import annotated_types
from pydantic import BaseModel, ValidationError

from council.models import DeliberationRequest

_RANGE_ERRORS = {"greater_than_equal", "less_than_equal", "greater_than", "less_than"}


Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Problem:
    """What is wrong with one field: where it is (pydantic's location; () for the request
    as a whole) and what follows its name, such as " must be between 1 and 5 (got 9)" or
    ": 'x y' is not a model id"."""

    loc: Loc
    text: str

    @property
    def field(self) -> str:
        """The field as the request names it: "max_rounds", "policy.max_attempts"."""
        return ".".join(str(part) for part in self.loc) or "request"

    def line(self, name: str | None = None) -> str:
        """The problem in one line, the field named `name` (else as the request names it)."""
        return f"{name or self.field}{self.text}"


class InvalidRequest(ValueError):
    """A request that must not start: the message is one line, for the user; `problems`
    holds every problem found, the first being the message's."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(problems[0].line())
        self.problems = problems


def _field_bounds(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[Any, Any, bool]:
    """(lowest, highest, whether the lowest itself is excluded) of a constrained field."""
    low: Any = None
    high: Any = None
    exclusive = False
    target: Any = model
    info = None
    for part in loc:
        if not (isinstance(target, type) and issubclass(target, BaseModel)):
            return None, None, False
        info = target.model_fields.get(str(part))
        if info is None:
            return None, None, False
        target = info.annotation
    for meta in info.metadata if info else []:
        if isinstance(meta, annotated_types.Ge):
            low = meta.ge
        if isinstance(meta, annotated_types.Gt):
            low, exclusive = meta.gt, True
        if isinstance(meta, (annotated_types.Le, annotated_types.Lt)):
            high = getattr(meta, "le", getattr(meta, "lt", None))
    return low, high, exclusive


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel]:
    """The (nested) model that the fields at `loc` belong to (the top one if unknown)."""
    target: Any = model
    for part in loc:
        info = target.model_fields.get(str(part))
        annotation = info.annotation if info else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return model
        target = annotation
    found: type[BaseModel] = target
    return found


def _describe(model: type[BaseModel], error: Mapping[str, Any]) -> Problem:
    loc = tuple(error.get("loc", ()))
    got = error.get("input")
    kind = error.get("type", "")
    if kind in _RANGE_ERRORS:
        low, high, exclusive = _field_bounds(model, loc)
        if low is not None and high is not None and exclusive:
            return Problem(loc, f" must be more than {low} and at most {high} (got {got!r})")
        if low is not None and high is not None:
            return Problem(loc, f" must be between {low} and {high} (got {got!r})")
    if kind == "string_too_short":
        return Problem(loc, " must not be empty")
    if kind == "string_too_long":
        limit = error.get("ctx", {}).get("max_length")
        return Problem(loc, f" is too long: at most {limit} characters (got {len(str(got))})")
    if kind == "missing":
        return Problem(loc, " is required")
    if kind == "extra_forbidden":
        allowed = ", ".join(_model_at(model, loc[:-1]).model_fields)
        return Problem(loc, f" is not a known field (allowed: {allowed})")
    message = error.get("msg", "is invalid")
    message = " ".join(message.removeprefix("Value error, ").split())
    if message.startswith("must "):
        return Problem(loc, f" {message}")
    return Problem(loc, f": {message}")


def problems(err: ValidationError, model: type[BaseModel] = DeliberationRequest) -> list[Problem]:
    """Every problem at once (a form shows each beside its field), in pydantic's order."""
    return [_describe(model, error) for error in err.errors()]


def one_line(err: ValidationError, model: type[BaseModel] = DeliberationRequest) -> str:
    return problems(err, model)[0].line()


def validate_request(data: Any) -> DeliberationRequest:
    """Validate a request from any client; raise InvalidRequest with a one-line reason."""
    try:
        if isinstance(data, DeliberationRequest):
            data = data.model_dump()
        return DeliberationRequest.model_validate(data)
    except ValidationError as err:
        raise InvalidRequest(problems(err)) from None
