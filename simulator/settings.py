"""The simulator's own COUNCIL_SIM* variables, read once when it starts (the application's
are app.settings'; the simulator stands in for a provider and reads none of them).

    COUNCIL_SIMULATOR_API_KEY   answer only requests with this key (default: any)
    COUNCIL_SIM_LATENCY         the pace of every reply, as --latency takes it
    COUNCIL_SIM_DATASETS        more problem files (JSON lines), os.pathsep between them
    COUNCIL_SIM_DISAGREE        the share of known-answer problems whose first answers
                                disagree, as --disagree takes it
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from simulator.config import LATENCY_VARIABLE

DATASETS_VARIABLE = "COUNCIL_SIM_DATASETS"
DISAGREE_VARIABLE = "COUNCIL_SIM_DISAGREE"


class SimulatorSettings(BaseSettings):
    model_config = SettingsConfigDict(
        case_sensitive=True, env_ignore_empty=True, extra="ignore", frozen=True
    )

    api_key: SecretStr | None = Field(
        None, validation_alias="COUNCIL_SIMULATOR_API_KEY", repr=False
    )
    # Checked and read by simulator.config.parse_latency where it is used.
    latency: str | None = Field(None, validation_alias=LATENCY_VARIABLE)
    datasets: Annotated[list[Path], NoDecode] = Field(
        default_factory=list, validation_alias=DATASETS_VARIABLE
    )
    # Checked and read by simulator.__main__ where it is used, as --disagree is.
    disagree: str | None = Field(None, validation_alias=DISAGREE_VARIABLE)

    @field_validator("latency", "api_key", "disagree", mode="before")
    @classmethod
    def _stripped(cls, value: Any) -> Any:
        return value.strip() or None if isinstance(value, str) else value

    @field_validator("datasets", mode="before")
    @classmethod
    def _paths(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [Path(part.strip()) for part in value.split(os.pathsep) if part.strip()]
        return value

    @classmethod
    def read(cls, env: Mapping[str, str] | None = None) -> SimulatorSettings:
        """The simulator's variables in `env` (the process's environment by default)."""
        given = os.environ if env is None else env
        names = [str(field.validation_alias) for field in cls.model_fields.values()]
        return cls.model_validate({name: given[name] for name in names if name in given})

    def key(self) -> str | None:
        return self.api_key.get_secret_value() if self.api_key is not None else None

    def with_dataset(self, path: Path) -> dict[str, str]:
        """The variable that hands a simulator these datasets and one more."""
        return {DATASETS_VARIABLE: os.pathsep.join(str(p) for p in [*self.datasets, path])}
