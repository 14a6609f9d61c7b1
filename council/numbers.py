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
