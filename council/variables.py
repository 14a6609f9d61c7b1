"""Where council.toml names a secret: by the variable that holds it, never the value."""

from __future__ import annotations

import re

_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
# What an API key looks like rather than a variable's name: a provider's key prefix
# (OpenAI and OpenRouter sk-, Anthropic sk-ant-, Stripe-like sk_/pk_/rk_, GitHub, Hugging
# Face, Slack, Google, AWS, GitLab, Groq), or a long run of random-looking characters
# (digits among lower-case letters, or a mix of cases).
_KEY_PREFIX = re.compile(
    r"(?:sk|pk|rk)[-_]|gh[pousr]_|github_pat_|hf_|xox[abpr]-|AIza|AKIA|ASIA|glpat-|gsk_"
)


def looks_like_key(text: str) -> bool:
    """Whether a value meant to be a variable's name looks like a secret instead."""
    value = text.strip()
    if _KEY_PREFIX.match(value) or not value.isascii():
        return True
    if len(value) < 20:
        return False
    if not _VARIABLE.fullmatch(value):
        return True
    digits = sum(ch.isdigit() for ch in value)
    lower, upper = any(ch.islower() for ch in value), any(ch.isupper() for ch in value)
    return (lower and upper and digits >= 2) or (lower and digits >= 4) or len(value) > 64


def variable_name(name: str | None) -> str | None:
    """A field that names a variable: the name, or ValueError. Never echoed: what is
    written here may be the key itself."""
    if name is None:
        return name
    if looks_like_key(name):
        raise ValueError(
            "this looks like a key, not a variable name: put the key in an environment "
            "variable and write that variable's name here"
        )
    if not _VARIABLE.fullmatch(name):
        raise ValueError(
            "must be a variable's name (letters, digits and _, not starting with a digit)"
        )
    return name
