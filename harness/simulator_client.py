"""The simulator's control API over HTTP, for a simulator running as its own process.

Same calls as the in-process simulator.SimulatorServer: set_faults, reset, log.
"""

from __future__ import annotations

from typing import Any, Self

import httpx


class SimulatorClient:
    def __init__(self, url: str, timeout: float = 30) -> None:
        """`url`: the simulator's OpenAI-compatible base URL (ending in /v1) or its root."""
        self.url = url if url.endswith("/v1") else url.rstrip("/") + "/v1"
        self.root = self.url.removesuffix("/v1")
        self._http = httpx.Client(timeout=timeout)

    def set_faults(self, faults: dict[str, Any] | None) -> dict[str, Any]:
        """Replace the fault config (a mapping as in --faults; None or {} for none)."""
        response = self._http.post(f"{self.root}/_sim/faults", json=faults or {})
        response.raise_for_status()
        return response.json()

    def set_latency(self, seconds: float, **spec: Any) -> dict[str, Any]:
        """Every model takes `seconds` per call (0: none), with any other fault fields."""
        default = {**({"latency": seconds} if seconds else {}), **spec}
        return self.set_faults({"*": default} if default else {})

    def reset(self) -> None:
        """Clear the log and the fault counters (the fault config stays)."""
        self._http.post(f"{self.root}/_sim/reset").raise_for_status()

    def log(self, since: int = 0) -> dict[str, Any]:
        """Entries, counts per model and stage, outcomes and the in-flight count."""
        response = self._http.get(f"{self.root}/_sim/log", params={"since": since})
        response.raise_for_status()
        return response.json()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
