"""The request log: every request the simulator received and what became of it.

Tests and benchmarks read it (GET /_sim/log, or SimulatorServer.log()) to count calls
per model and stage, see which faults fired and check that cancelled calls were seen
as client disconnects. Thread-safe: the server and a test read and write it from
different threads.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

MAX_ENTRIES = 10_000


@dataclass
class LogEntry:
    seq: int
    model: str
    stage: str
    persona: str
    stream: bool
    prompt_sha256: str
    authorized: bool
    call_id: str | None = None  # X-Council-Call: the same for every attempt of one call
    # The attachments the prompt showed (simulator.reading.attachments_seen): name, the
    # SHA-256 of the text it was shown (an image: of its bytes) and how it was shown.
    attachments: list[dict[str, Any]] = field(default_factory=list)
    # The tools the reply asked for (simulator.tools), by function name.
    tool_calls: list[str] = field(default_factory=list)
    fault: str | None = None
    status: int | None = None
    # ok, empty, error, hang, truncated, interrupted, malformed, disconnected
    outcome: str | None = None
    started: float = field(default_factory=time.time)
    finished: float | None = None
    duration_ms: int | None = None
    _t0: float = field(default_factory=time.monotonic, repr=False)
    _generation: int = field(default=0, repr=False)

    def public(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if not k.startswith("_")}


class RequestLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: deque[LogEntry] = deque(maxlen=MAX_ENTRIES)
        self._active: dict[int, LogEntry] = {}
        self._counts: dict[str, dict[str, int]] = {}
        self._outcomes: dict[str, int] = {}
        self._seq = 0
        self._generation = 0

    def start(self, **fields: Any) -> LogEntry:
        with self._lock:
            self._seq += 1
            entry = LogEntry(seq=self._seq, _generation=self._generation, **fields)
            self._entries.append(entry)
            self._active[id(entry)] = entry
            by_stage = self._counts.setdefault(entry.model, {})
            by_stage[entry.stage] = by_stage.get(entry.stage, 0) + 1
            return entry

    def finish(self, entry: LogEntry, outcome: str, status: int | None = None) -> None:
        """Record how a request ended; the first call wins."""
        with self._lock:
            if entry.finished is not None:
                return
            entry.outcome = outcome
            entry.status = status
            entry.finished = time.time()
            entry.duration_ms = int((time.monotonic() - entry._t0) * 1000)
            self._active.pop(id(entry), None)
            if entry._generation == self._generation:
                self._outcomes[outcome] = self._outcomes.get(outcome, 0) + 1

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._counts.clear()
            self._outcomes.clear()
            self._seq = 0
            self._generation += 1

    def snapshot(self, since: int = 0) -> dict[str, Any]:
        with self._lock:
            entries = [e.public() for e in self._entries if e.seq > since]
            return {
                "total": sum(sum(s.values()) for s in self._counts.values()),
                "in_flight": len(self._active),
                "counts": {model: dict(stages) for model, stages in self._counts.items()},
                "outcomes": dict(self._outcomes),
                "entries": entries,
            }
