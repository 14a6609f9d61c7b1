"""Every check, in order: the Temporal side, the model side and the tools run side by side,
and what they report is cleaned of secrets before anyone sees it."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping

from app.settings import environment as app_settings
from doctor.checks import Check, cleaned
from doctor.providers import provider_checks
from doctor.store import store_check
from doctor.temporal import temporal_checks
from doctor.tools import tool_checks

# Temporal's secret (the settings' own: Settings.secrets()): never in a check's text either.
SECRET_VARIABLES = ("TEMPORAL_API_KEY",)


async def diagnose(env: Mapping[str, str] | None = None) -> list[Check]:
    """The checks of this process's setup (its environment and council.toml). The Temporal
    checks read the process's TEMPORAL_* settings; `env` is for the providers' settings."""
    env = os.environ if env is None else env
    temporal, kept, (models, secrets), (tools, tool_secrets) = await asyncio.gather(
        temporal_checks(), store_check(), provider_checks(env), tool_checks(env)
    )
    secrets += tool_secrets
    secrets += [value for v in SECRET_VARIABLES if len(value := (env.get(v) or "").strip()) >= 4]
    secrets += [value for value in app_settings.of(env).secrets() if len(value) >= 4]
    return [cleaned(check, secrets) for check in [*temporal, kept, *models, *tools]]
