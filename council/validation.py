"""Turn a pydantic ValidationError into one line that names the field and what it allows."""

from __future__ import annotations

from typing import Any

import annotated_types
from pydantic import BaseModel, ValidationError

from council.models import DeliberationRequest

_RANGE_ERRORS = {"greater_than_equal", "less_than_equal", "greater_than", "less_than"}


class InvalidRequest(ValueError):
    """A request that must not start: the message is one line, for the user."""


def _field_bounds(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[Any, Any, bool]:
    """(lowest, highest, whether the lowest itself is excluded) of a constrained field."""
    low = high = None
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
    return target


def _describe(model: type[BaseModel], error: dict[str, Any]) -> str:
    loc = tuple(error.get("loc", ()))
    field = ".".join(str(p) for p in loc) or "request"
    got = error.get("input")
    kind = error.get("type", "")
    if kind in _RANGE_ERRORS:
        low, high, exclusive = _field_bounds(model, loc)
        if low is not None and high is not None and exclusive:
            return f"{field} must be more than {low} and at most {high} (got {got!r})"
        if low is not None and high is not None:
            return f"{field} must be between {low} and {high} (got {got!r})"
    if kind == "string_too_short":
        return f"{field} must not be empty"
    if kind == "string_too_long":
        limit = error.get("ctx", {}).get("max_length")
        return f"{field} is too long: at most {limit} characters (got {len(str(got))})"
    if kind == "missing":
        return f"{field} is required"
    if kind == "extra_forbidden":
        allowed = ", ".join(_model_at(model, loc[:-1]).model_fields)
        return f"{field} is not a known field (allowed: {allowed})"
    message = error.get("msg", "is invalid")
    message = message.removeprefix("Value error, ")
    if message.startswith("must "):
        return f"{field} {message}"
    return f"{field}: {message}"


def one_line(err: ValidationError, model: type[BaseModel] = DeliberationRequest) -> str:
    return _describe(model, err.errors()[0])


def every_problem(
    err: ValidationError, model: type[BaseModel] = DeliberationRequest
) -> list[tuple[tuple[Any, ...], str]]:
    """Every problem at once (a form shows each beside its field): (where, one line)."""
    return [(tuple(error.get("loc", ())), _describe(model, error)) for error in err.errors()]


def validate_request(data: Any) -> DeliberationRequest:
    """Validate a request from any client; raise InvalidRequest with a one-line reason."""
    try:
        if isinstance(data, DeliberationRequest):
            data = data.model_dump()
        return DeliberationRequest.model_validate(data)
    except ValidationError as err:
        raise InvalidRequest(one_line(err)) from None
