"""How a simulator instance behaves: faults, seed and pacing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from council import numbers
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
    # None: any number of requests at once, said at /props as llama.cpp's server says it
    # (total_slots). N: at most N answered at once, the rest queued in arrival order and
    # no /props, as llama-cpp-python's server does (it answers one at a time).
    slots: int | None = Field(default=None, ge=1)
    # None: on a known-answer problem each persona slips at its own rate. A share: the
    # problems (by a hash of each) on which the four personas' first answers disagree;
    # on the others all four answer right (simulator.problems.stage1_value).
    disagree: float | None = Field(default=None, ge=0, le=1)


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


# The default latency of `python -m simulator` (its --latency wins): what `make up` sets.
LATENCY_VARIABLE = "COUNCIL_SIM_LATENCY"
MAX_LATENCY = 600.0
Latency = float | tuple[float, float]


def parse_latency(text: str) -> Latency:
    """Seconds a call takes: "3" (every call), or "2-5" (each call drawn from the range);
    ValueError with one line (without the setting's name) otherwise."""
    low, dash, high = text.strip().partition("-")
    first = numbers.decimal(low)
    last = numbers.decimal(high) if dash else first
    if first is None or last is None:
        raise ValueError(f"must be seconds such as 3, or a range such as 2-5 (got {text!r})")
    if not 0 <= first <= last <= MAX_LATENCY:
        raise ValueError(
            f"must be from 0 to {MAX_LATENCY:g} seconds, a range from the lower to the higher "
            f"(got {text!r})"
        )
    return (first, last) if dash else first


def describe_latency(latency: Latency) -> str:
    """ "3 s a call", "2 to 5 s a call", "no delay"."""
    if isinstance(latency, tuple):
        return f"{latency[0]:g} to {latency[1]:g} s a call"
    return f"{latency:g} s a call" if latency else "no delay"


def with_default_latency(faults: FaultConfig, latency: Latency | None) -> FaultConfig:
    """Set the "*" latency unless the config already sets one."""
    if latency is None:
        return faults
    entries = dict(faults.root)
    default = entries.get(DEFAULT_KEY, FaultSpec())
    if "latency" not in default.model_fields_set:
        data = default.model_dump(include=default.model_fields_set)
        entries[DEFAULT_KEY] = FaultSpec.model_validate({**data, "latency": latency})
    return FaultConfig(entries)
