"""Self-consistency, one arm of the evaluation: one model asked the same question k times at
a temperature, each sample with its own seed, its answers put to a majority vote. k is
chosen to spend about the council's tokens on the same problem: the first sample's tokens
set it (k = the council's tokens / one sample's, at least 1, at most `max_samples`).

The input and output of the SelfConsistency workflow (workflows.sampling), which makes
the calls as activities like every other model call.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from council.calls import ModelCall
from council.models import CallPolicy, UsageTotals

# The temperature of the samples when the council's settings give none.
DEFAULT_TEMPERATURE = 0.7
# At most this many samples of one problem, whatever the council spent.
MAX_SAMPLES = 128
# The most samples a problem may be given (--max-samples).
MAX_SAMPLES_LIMIT = 256
# A first sample that fails is tried again with the next seed, this many times in all.
FIRST_SAMPLE_TRIES = 3


class SamplingRequest(BaseModel):
    call: ModelCall = Field(description="the member's stage-1 call; each sample sets its seed")
    token_target: int = Field(ge=1, description="the council's tokens on the same problem")
    max_samples: int = Field(default=MAX_SAMPLES, ge=1, le=MAX_SAMPLES_LIMIT)
    policy: CallPolicy = Field(default_factory=CallPolicy)


class SamplingResult(BaseModel):
    model: str
    samples: int = Field(description="k: the samples the token target asked for")
    replies: list[str | None] = Field(description="each sample's reply, None where it failed")
    capped: bool = Field(default=False, description="the token target asked for more samples")
    usage: UsageTotals = Field(default_factory=UsageTotals)
    errors: list[str] = Field(default_factory=list)


def samples_for(token_target: int, sample_tokens: int, max_samples: int) -> tuple[int, bool]:
    """(k, capped): as many samples as spend about `token_target` tokens at
    `sample_tokens` each, at least 1 and at most `max_samples`."""
    wanted = max(1, round(token_target / max(1, sample_tokens)))
    return min(wanted, max_samples), wanted > max_samples
