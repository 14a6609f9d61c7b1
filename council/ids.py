"""The one rule for a deliberation's id, on every surface that names one (the CLI's
`--id`, the web page, the OpenAI-compatible API, the MCP tools).

An id is 1 to 200 characters: ASCII letters, digits and - _ . : , starting with a
letter or a digit. So it is safe in a URL path segment (no /, ?, # or %, never "." or
".."), in an HTTP header and in a terminal, and Temporal's own limit is far above it.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, StringConstraints

MAX_ID_CHARS = 200
ID_RULE = (
    f"1 to {MAX_ID_CHARS} characters: letters, digits and - _ . : "
    "(starting with a letter or a digit)"
)
_ID = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.:\-]{{0,{MAX_ID_CHARS - 1}}}")


def _problem(value: str, pattern: re.Pattern[str], what: str, rule: str) -> str | None:
    """Why `value` is not a valid `what` (None: `pattern` takes it), in one line."""
    if pattern.fullmatch(value):
        return None
    shown = value if len(value) <= 60 else value[:57] + "..."
    return f"{shown!r} is not a valid {what}: {rule}"


def id_problem(value: str) -> str | None:
    """Why `value` cannot be a deliberation's id (None: it can)."""
    return _problem(value, _ID, "id", ID_RULE)


def is_valid_id(value: str) -> bool:
    return id_problem(value) is None


# The ids of the runs an evaluation starts (evaluation.plan) begin so: lists of a person's
# conversations leave them out.
EVALUATION_ID_PREFIX = "eval-"


# A tenant (runs.priority): what Temporal allows in a fairness key (at most 64
# bytes), kept to what a person would type.
MAX_TENANT_CHARS = 64
TENANT_RULE = (
    f"1 to {MAX_TENANT_CHARS} characters: letters, digits and - _ . : @ + "
    "(starting with a letter or a digit)"
)
_TENANT = re.compile(rf"[A-Za-z0-9][A-Za-z0-9_.:@+\-]{{0,{MAX_TENANT_CHARS - 1}}}")


def tenant_problem(value: str) -> str | None:
    """Why `value` cannot name a tenant (None: it can)."""
    return _problem(value, _TENANT, "tenant", TENANT_RULE)


# ---- a model id ---------------------------------------------------------------------------

MODEL_ID = re.compile(r"^[A-Za-z0-9][\w.\-/:@+]*$")


def _model_id(value: str) -> str:
    if len(value) > 200 or not MODEL_ID.match(value):
        raise ValueError(
            f"{value!r} is not a model id (letters, digits and . - _ / : @ +, up to 200 characters)"
        )
    return value


ModelId = Annotated[str, StringConstraints(strip_whitespace=True), AfterValidator(_model_id)]
