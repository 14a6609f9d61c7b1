"""Numbers that people and peers type: a flag, a variable, a form field, a query
parameter, a header.

Only ASCII digits count. Python's own readers are wider than that: int() and float()
take any Unicode decimal digit ("١٢" is 12), str.isdigit() says yes to superscripts that
int() then refuses ("²"), and float() reads "nan", "inf" and "1_0". Text from outside is
read here instead, so that every surface refuses the same inputs in the same way: None
(for argparse, an error that names the flag), never an exception from deep inside.
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Annotated

from pydantic import BeforeValidator

# Python refuses to read an int of more than 4,300 digits; no setting needs a tenth of it.
MAX_DIGITS = 400
_SIGNED = re.compile(rf"[+-]?[0-9]{{1,{MAX_DIGITS}}}")
_UNSIGNED = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?")


def whole(text: str | None, signed: bool = True) -> int | None:
    """A whole number in ASCII digits (blanks around allowed; a sign unless `signed` is
    False: a port, a sequence number, a length), else None."""
    if text is None:
        return None
    stripped = text.strip()
    return int(stripped) if (_SIGNED if signed else _UNSIGNED).fullmatch(stripped) else None


def decimal(text: str | None) -> float | None:
    """A finite number in ASCII (1, -1.5, .5, 2e3; blanks around allowed), else None."""
    if text is None:
        return None
    stripped = text.strip()
    if len(stripped) > MAX_DIGITS or not _DECIMAL.fullmatch(stripped):
        return None
    value = float(stripped)
    return value if math.isfinite(value) else None


def whole_argument(text: str) -> int:
    """argparse's `type` for a whole number: argparse's error names the flag and the value."""
    value = whole(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"must be a whole number (got {text!r})")
    return value


def decimal_argument(text: str) -> float:
    """argparse's `type` for a number: argparse's error names the flag and the value."""
    value = decimal(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"must be a number (got {text!r})")
    return value


def _whole_text(value: object) -> object:
    if isinstance(value, str):
        number = whole(value.replace("_", ""))
        if number is None:
            raise ValueError("not a whole number in ASCII digits")
        return number
    return value


def _decimal_text(value: object) -> object:
    if isinstance(value, str):
        number = decimal(value)
        if number is None:
            raise ValueError("not a finite number in ASCII digits")
        return number
    return value


# A setting's whole number or number: text is read in ASCII digits only (and, for a
# whole number, with "_" between digit groups), as every surface reads it; the field's
# constraints (Field(ge=..., le=...)) then say which are allowed.
WholeNumber = Annotated[int, BeforeValidator(_whole_text)]
Number = Annotated[float, BeforeValidator(_decimal_text)]
