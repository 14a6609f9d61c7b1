"""How a simulator instance behaves: faults, seed and pacing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from simulator.faults import DEFAULT_KEY, FaultConfig, FaultSpec


class SimulatorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    faults: FaultConfig = Field(default_factory=FaultConfig)
    seed: int = 0
    # A hanging request waits this long, or until the client disconnects.
    hang_seconds: float = Field(default=3600.0, gt=0)
    # Characters per streamed delta.
    chunk_chars: int = Field(default=24, ge=1)
    # Keep-alive comments (": SIMULATOR PROCESSING") while a streamed reply is delayed.
    keepalive_seconds: float = Field(default=1.0, gt=0)
    # When set, a request without this key (Authorization: Bearer) gets a 401, as a real
    # provider's would: two simulators with two keys stand in for two providers.
    api_key: str | None = None


class FaultConfigError(ValueError):
    """A fault config that cannot be used: the message says why, in one line."""


def parse_faults(value: Any) -> FaultConfig:
    """A fault config from a mapping, a FaultConfig, JSON text or a path to a JSON file."""
    if value is None:
        return FaultConfig()
    if isinstance(value, FaultConfig):
        return value
    if isinstance(value, str | Path):
        text = str(value).strip()
        if not text.startswith("{"):
            try:
                text = Path(text).read_text(encoding="utf-8")
            except OSError as err:
                raise FaultConfigError(
                    f"cannot read fault config {value}: {err.strerror}"
                ) from None
        try:
            value = json.loads(text)
        except ValueError as err:
            raise FaultConfigError(f"fault config is not valid JSON: {err}") from None
    try:
        return FaultConfig.model_validate(value)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise FaultConfigError(f"fault config {where}: {first.get('msg')}") from None


def with_default_latency(faults: FaultConfig, latency: float | None) -> FaultConfig:
    """Set the "*" latency unless the config already sets one."""
    if latency is None:
        return faults
    entries = dict(faults.root)
    default = entries.get(DEFAULT_KEY, FaultSpec())
    if "latency" not in default.model_fields_set:
        data = default.model_dump(include=default.model_fields_set)
        data["latency"] = latency
        entries[DEFAULT_KEY] = FaultSpec.model_validate(data)
    return FaultConfig(entries)
