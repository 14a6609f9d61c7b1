"""Fault injection: what goes wrong with which request, reproducibly; and the few
behaviours a test may script besides (a reviewer's ratings, the cost a reply reports).

A config maps a model name (or "*", the default for every model) to a FaultSpec. A
model's entry overrides the default field by field. Every random draw comes from a
generator seeded with (seed, model, prompt hash, how many times this prompt was seen),
so a run replays identically however concurrent requests interleave, and a retried
request gets a fresh draw.

A model without tools (function calling): {"sim/cirrus": {"tools": false}}, in --faults,
POST /_sim/faults or SimulatorServer.set_faults; a request that offers it tools gets 400,
"sim/cirrus does not support tools" (simulator.tools).
"""

from __future__ import annotations

import collections
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator, model_validator

from council.calls import Stage

DEFAULT_KEY = "*"
Probability = Annotated[float, Field(ge=0.0, le=1.0)]
FaultKind = Literal["hang", "slow", "error", "truncate", "interrupt", "malformed", "empty", "echo"]


class FaultSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    latency: float | tuple[float, float] | None = Field(
        default=None,
        description="seconds the call takes (a stream is paced over them): fixed, or [min, max]",
    )
    first_byte_seconds: float = Field(
        default=0.0,
        ge=0,
        le=3600,
        description="seconds before the reply's first byte (its status and headers too), as "
        "a busy or overloaded provider is silent; the latency runs after them",
    )
    errors: dict[int, Probability] = Field(
        default_factory=dict, description="HTTP status -> probability, e.g. {500: 0.2, 429: 0.1}"
    )
    retry_after: float | str | None = Field(
        default=None, description="Retry-After of 429 and 503 replies: seconds, or an HTTP date"
    )
    requests_per_second: float | None = Field(
        default=None,
        gt=0,
        description="a quota: a request that comes when this many (of every model under "
        "this spec) came in the second before it is refused with 429",
    )
    hang: Probability = Field(
        default=0.0, description="accept the request and send nothing, not even headers"
    )
    slow: Probability = Field(
        default=0.0,
        description="answer, but take slow_seconds: a streamed reply begins at once and keeps "
        "the connection alive (a slow model, as opposed to a hang)",
    )
    slow_seconds: float = Field(default=30.0, gt=0, le=3600)
    truncate: Probability = 0.0
    interrupt: Probability = Field(
        default=0.0,
        description="end a streamed reply half-way with [DONE] and no finish reason, as "
        "llama.cpp's server does when another request waits (a non-streamed reply is whole)",
    )
    malformed: Probability = 0.0
    empty: Probability = 0.0
    echo: Probability = Field(
        default=0.0,
        description="reply with the prompt's own example or instructions instead of an "
        "answer, as a small model sometimes does",
    )
    stages: list[Stage] | None = Field(
        default=None, description="apply the faults (not the latency) only in these stages"
    )
    hold: bool = Field(
        default=False,
        description="keep the replies back, the client waiting, for as long as the config "
        "says so (only in `stages`, when given): setting faults without it lets them go, "
        "as a test does once it has done what must happen while they are pending",
    )
    pause_after: int | None = Field(
        default=None,
        ge=0,
        description="stream this many characters of a reply, then keep the rest back, the "
        "client waiting, for as long as the config says so (only in `stages`, when given), "
        "as a test does to catch a reply half written",
    )
    max_faults: int | None = Field(
        default=None, ge=0, description="inject at most this many faults per model, then behave"
    )
    pad_to_bytes: int | None = Field(
        default=None, ge=0, le=50_000_000, description="pad replies with filler to this many bytes"
    )
    pad_with: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="the filler text that pads a reply (default: a readable sentence); "
        'control characters such as "\\u0001" make a reply that JSON escapes six-fold',
    )
    ignore_max_tokens: bool = Field(
        default=False,
        description="reply at full length whatever max_tokens asks, as a provider that "
        "ignores it does",
    )
    rating: int | None = Field(
        default=None,
        ge=1,
        le=5,
        description="as a reviewer, rate every answer this (the critique still names gaps)",
    )
    ratings_by_author: dict[str, int] = Field(
        default_factory=dict,
        description="as a reviewer, rate the answers these models wrote so: model -> 1-5",
    )
    cost_per_million_tokens: float | None = Field(
        default=0.0, ge=0, description="the cost each reply reports; null: it reports none"
    )
    critiques: bool = Field(
        default=True,
        description="as a reviewer, write critiques (false: only the rated ranking)",
    )
    structured: bool = Field(
        default=True,
        description="honour response_format: a review, refinement or synthesis asked for "
        "as JSON comes as that JSON, and any other schema (a client's) gets a value built "
        "from it, as a provider with structured outputs does (false: ignore it and answer "
        "in prose, as many providers do)",
    )
    refuse_formats: dict[str, int] = Field(
        default_factory=dict,
        description="response_format types refused, with the HTTP status of the refusal "
        '(llama-cpp-python\'s server answers {"json_schema": 500})',
    )
    append: str | None = Field(
        default=None,
        min_length=1,
        max_length=10_000,
        description="text added at the end of every reply (only in `stages`, when given): a "
        "member whose answer carries words for whoever reads it next, as an answer with an "
        "injected instruction does",
    )
    obey: bool = Field(
        default=False,
        description="as the agreement check, do what the answers it reads tell it: an answer "
        "that asks for '\"agree\": true' gets that verdict (simulator.accounts.OBEYED), as a "
        "model that follows instructions in the material it is given does",
    )
    tools: bool = Field(
        default=True,
        description="take tools (function calling; simulator.tools); false: a request that "
        "offers any is refused with 400, the model does not support tools, as a provider "
        "without function calling refuses it",
    )

    @field_validator("ratings_by_author")
    @classmethod
    def _ratings(cls, ratings: dict[str, int]) -> dict[str, int]:
        for model, rating in ratings.items():
            if not 1 <= rating <= 5:
                raise ValueError(f"the rating of {model}'s answers must be 1 to 5 (got {rating})")
        return ratings

    @field_validator("errors")
    @classmethod
    def _statuses(cls, errors: dict[int, float]) -> dict[int, float]:
        for status in errors:
            if not 400 <= status <= 599:
                raise ValueError(f"error status {status} is not an HTTP error status (400-599)")
        return errors

    @field_validator("latency")
    @classmethod
    def _latency(
        cls, latency: float | tuple[float, float] | None
    ) -> float | tuple[float, float] | None:
        if isinstance(latency, tuple):
            low, high = latency
            if not 0 <= low <= high:
                raise ValueError("latency [min, max] needs 0 <= min <= max")
        elif latency is not None and latency < 0:
            raise ValueError("latency must not be negative")
        return latency

    @model_validator(mode="after")
    def _total(self) -> FaultSpec:
        if self.fault_probability() > 1.0 + 1e-9:
            raise ValueError("the fault probabilities of one model add up to more than 1")
        return self

    def fault_probability(self) -> float:
        return sum(probability for _, _, probability in _outcomes(self))


class FaultConfig(RootModel[dict[str, FaultSpec]]):
    root: dict[str, FaultSpec] = Field(default_factory=dict)

    def for_model(self, model: str) -> FaultSpec:
        base = self.root.get(DEFAULT_KEY, FaultSpec())
        own = self.root.get(model)
        if own is None:
            return base
        merged = base.model_dump()
        merged.update(own.model_dump(include=own.model_fields_set))
        return FaultSpec.model_validate(merged)


@dataclass(frozen=True)
class Plan:
    """What the simulator does with one request: what was drawn for it, and the rest of
    its model's spec as it is."""

    spec: FaultSpec = field(default_factory=FaultSpec)
    latency: float = 0.0
    first_byte_seconds: float = 0.0
    fault: FaultKind | None = None
    status: int | None = None
    append: str | None = None  # the spec's, in the stages it applies in


class FaultInjector:
    """Draws the plan of each request from the current config. Thread-safe."""

    def __init__(self, config: FaultConfig | None = None, seed: int = 0) -> None:
        self.seed = seed
        self._config = config or FaultConfig()
        self._lock = threading.Lock()
        self._seen: dict[tuple[str, str], int] = {}
        self._injected: dict[str, int] = {}
        # When each request under a quota came (time.monotonic), the last second's.
        self._arrivals: collections.deque[float] = collections.deque()

    @property
    def config(self) -> FaultConfig:
        return self._config

    def replace(self, config: FaultConfig) -> None:
        with self._lock:
            self._config = config
            self._injected.clear()

    def reset(self) -> None:
        with self._lock:
            self._seen.clear()
            self._injected.clear()

    def plan(self, model: str, stage: Stage, prompt_sha: str) -> Plan:
        with self._lock:
            spec = self._config.for_model(model)
            occurrence = self._seen.get((model, prompt_sha), 0)
            self._seen[(model, prompt_sha)] = occurrence + 1
            rng = random.Random(f"{self.seed}|{model}|{prompt_sha}|{occurrence}")
            latency = _latency(spec, rng)
            draw = rng.random()
            fault, status = None, None
            allowed = spec.stages is None or stage in spec.stages
            budget = spec.max_faults is None or self._injected.get(model, 0) < spec.max_faults
            if spec.requests_per_second is not None and self._over_quota(spec.requests_per_second):
                fault, status = "error", 429
            elif allowed and budget:
                fault, status = _pick(spec, draw)
                if fault is not None:
                    self._injected[model] = self._injected.get(model, 0) + 1
                if fault == "slow":
                    latency = spec.slow_seconds
        return Plan(
            spec=spec,
            latency=latency,
            first_byte_seconds=spec.first_byte_seconds,
            fault=fault,
            status=status,
            append=spec.append if allowed else None,
        )

    def holds(self, model: str, stage: Stage) -> bool:
        """Whether the current config keeps this model's replies in this stage back."""
        spec = self._staged(model, stage)
        return spec is not None and spec.hold

    def pauses_after(self, model: str, stage: Stage) -> int | None:
        """After how many characters the current config pauses this model's streamed
        reply in this stage (None: it does not)."""
        spec = self._staged(model, stage)
        return spec.pause_after if spec is not None else None

    def _staged(self, model: str, stage: Stage) -> FaultSpec | None:
        """The model's current spec, when its faults apply in this stage."""
        with self._lock:
            spec = self._config.for_model(model)
        return spec if spec.stages is None or stage in spec.stages else None

    def _over_quota(self, per_second: float) -> bool:
        """Whether a request now goes over the quota (refused requests do not count)."""
        now = time.monotonic()
        while self._arrivals and now - self._arrivals[0] >= 1.0:
            self._arrivals.popleft()
        if len(self._arrivals) >= per_second:
            return True
        self._arrivals.append(now)
        return False


def _latency(spec: FaultSpec, rng: random.Random) -> float:
    if spec.latency is None:
        return 0.0
    if isinstance(spec.latency, tuple):
        return rng.uniform(*spec.latency)
    return float(spec.latency)


def _outcomes(spec: FaultSpec) -> list[tuple[FaultKind, int | None, float]]:
    """Each fault with its status and probability, in the fixed order of the draw."""
    outcomes: list[tuple[FaultKind, int | None, float]] = [
        ("hang", None, spec.hang),
        ("slow", None, spec.slow),
    ]
    outcomes += [("error", status, p) for status, p in sorted(spec.errors.items())]
    later: tuple[FaultKind, ...] = ("truncate", "interrupt", "malformed", "empty", "echo")
    return outcomes + [(kind, None, getattr(spec, kind)) for kind in later]


def _pick(spec: FaultSpec, draw: float) -> tuple[FaultKind | None, int | None]:
    """Walk the outcomes in a fixed order; the draw lands in one or in none."""
    edge = 0.0
    for kind, status, probability in _outcomes(spec):
        edge += probability
        if probability > 0 and draw < edge:
            return kind, status
    return None, None
