"""A check's result, how it is printed, and the rule that keeps secrets out of it.

A check has passed (✓), failed (✗, with the fix) or was skipped because an earlier check
failed (-, saying which). The doctor is healthy when none failed. Every text is one line;
known secrets (and any start of one of 8 characters or more: council.redaction) and
anything shaped like a key are replaced before a check leaves the doctor.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, computed_field

from council.redaction import REDACTED, Redactor

Status = Literal["ok", "failed", "skipped"]
MARKS: dict[str, str] = {"ok": "✓", "failed": "✗", "skipped": "-"}
MAX_TEXT = 600
# Shapes of API keys and tokens: a known prefix (sk-, sk_, gsk_, xai-, hf_, ghp_, AIza...)
# or a bearer credential.
_KEY_SHAPED = re.compile(
    r"(?i)\bbearer\s+\S+"
    r"|\b(?:sk|pk|rk|gsk|xai|hf|ghp|gho|glpat|sess)[-_][A-Za-z0-9_\-]{6,}"
    r"|\bAIza[A-Za-z0-9_\-]{20,}"
)
# An opaque run of 40 or more letters, digits, - and _ that holds a digit and a letter.
_OPAQUE = re.compile(r"[A-Za-z0-9_\-]{40,}")


class Check(BaseModel):
    name: str
    status: Status
    detail: str
    fix: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        return self.status == "ok"


def passed(name: str, detail: str) -> Check:
    return Check(name=name, status="ok", detail=detail)


def failed(name: str, detail: str, fix: str) -> Check:
    return Check(name=name, status="failed", detail=detail, fix=fix)


def skipped(name: str, why: str) -> Check:
    return Check(name=name, status="skipped", detail=f"skipped: {why}")


def healthy(checks: Iterable[Check]) -> bool:
    """No check failed (a skipped check always follows a failed one)."""
    return not any(check.status == "failed" for check in checks)


def line(check: Check) -> str:
    """`✓ name: detail`, or `✗ name: detail — fix: ...`."""
    text = f"{MARKS[check.status]} {check.name}: {check.detail}"
    return f"{text} — fix: {check.fix}" if check.fix else text


def one_line(text: str, limit: int = MAX_TEXT) -> str:
    """Text from anywhere (a provider's error, a server's message) as one bounded line,
    without control characters."""
    flat = re.sub(r"[\s\x00-\x1f\x7f-\x9f]+", " ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _opaque(match: re.Match[str]) -> str:
    run = match.group(0)
    is_key = any(c.isdigit() for c in run) and any(c.isalpha() for c in run)
    return REDACTED if is_key else run


def redact(text: str, secrets: Sequence[str]) -> str:
    """The text without the given secrets, even in part, and without anything shaped
    like a key."""
    text = Redactor(secrets).redact(text)
    return _OPAQUE.sub(_opaque, _KEY_SHAPED.sub(REDACTED, text))


def cleaned(check: Check, secrets: Sequence[str]) -> Check:
    """The check as it may be shown: one line each, nothing secret."""
    return check.model_copy(
        update={
            "name": one_line(redact(check.name, secrets), 120),
            "detail": one_line(redact(check.detail, secrets)),
            "fix": one_line(redact(check.fix, secrets)) if check.fix else None,
        }
    )
