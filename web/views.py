"""What the pages show, computed from a record or from progress: plain data for the
templates, which escape every string they print. No I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.requests import front_door
from app.requests.attachments import Attached
from app.settings.environment import Settings
from app.views.record_view import RecordView, record_view, review_matrices, review_matrix, word_diff
from council.calls import Stage
from council.config import Config
from council.models import DeliberationRecord, DeliberationRequest
from council.progress import EventKind, ProgressEvent, shown_status
from council.validation import Loc

# The record's view is app.views.record_view's; the names a page's reader knows stay here too.
__all__ = ["review_matrices", "review_matrix", "shown_status", "word_diff"]

# ---- the start form -----------------------------------------------------------------------

# Each field of the start form (and of the follow-up box), by its label on the page: an
# error names the field as the page does.
FORM_LABELS = {
    "question": "Question",
    "council": "Council",
    "models": "Models",
    "chairman": "Chairman",
    "tools": "Tools",
    "depth": "Depth",
    "max_rounds": "Max rounds",
    "min_rounds": "Min rounds",
    "quality_threshold": "Quality threshold",
    "token_budget": "Token budget",
    "max_cost_usd": "Cost budget (USD)",
    "context_tokens": "Context (tokens of earlier turns)",
    front_door.ATTACHMENTS: "Attachments",
}
FORM_FIELDS = tuple(FORM_LABELS)
# The fields that are no option of the request: the question, the council's name and the
# files (read apart: app.requests.attachments).
_NOT_OPTIONS = ("question", front_door.COUNCIL, front_door.ATTACHMENTS)
# The tools ticked, as the start handler joins them (commas).
TOOLS = "tools"
# Where a problem that concerns no one field goes: above the form's button.
FORM_WIDE = "form"


@dataclass
class StartForm:
    """The start form's values as typed, and a one-line error per field."""

    values: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def banner(self) -> str:
        """The line above a refused form, naming the fields that need a change."""
        labels = [FORM_LABELS[name] for name in FORM_FIELDS if name in self.errors]
        if not labels:
            return "The form needs a change: see below."
        if len(labels) == 1:
            return f"{labels[0]} needs a change: see below."
        return f"{', '.join(labels[:-1])} and {labels[-1]} need a change: see below."

    @property
    def first_error(self) -> str | None:
        """The field the page focuses: the first with an error, in the form's order."""
        return next((name for name in (*FORM_FIELDS, FORM_WIDE) if name in self.errors), None)


def request_from_form(
    form: Mapping[str, str],
    config: Config,
    settings: Settings | None = None,
    council: str | None = None,
    files: Sequence[Attached] = (),
    chosen: Sequence[str] = (),
) -> tuple[DeliberationRequest | None, StartForm]:
    """The request the form describes, through the front door: its fields on top of the
    council chosen (the form's `council` field, else `council`; else the default one), and
    the files uploaded (read: `files`; their names as chosen: `chosen`), or None and the form
    with every error beside the field it concerns, in the words of the form's labels."""
    values = {name: str(form.get(name, "")).strip() for name in FORM_FIELDS}
    values[front_door.ATTACHMENTS] = ", ".join(chosen)
    given: dict[str, Any] = {
        name: values[name] for name in FORM_FIELDS if name not in _NOT_OPTIONS and values[name]
    }
    models = [m.strip() for m in re.split(r"[,\n]", values["models"]) if m.strip()]
    given["models"] = models or None
    # None ticked: the council's tools.
    given[TOOLS] = [t.strip() for t in values[TOOLS].split(",") if t.strip()] or None
    try:
        request = front_door.compose(
            values["question"],
            given,
            council=values["council"] or council,
            config=config,
            settings=settings,
            attachments=files,
        )
    except front_door.Refused as refused:
        return None, StartForm(values, form_errors(refused))
    return request, StartForm(values)


def form_errors(refused: front_door.Refused) -> dict[str, str]:
    """A refusal's problems beside the fields they concern, in the words of the labels."""
    errors: dict[str, str] = {}
    for problem in refused.problems:
        name = str(problem.loc[0]) if problem.loc else FORM_WIDE
        where = name if name in FORM_LABELS else FORM_WIDE
        errors.setdefault(where, problem.line(_label(problem.loc)))
    return errors


def _label(loc: Loc) -> str | None:
    """A field as the page names it: "Max rounds"; "Models, line 2" for one of the models."""
    label = FORM_LABELS.get(str(loc[0])) if loc else None
    if label and len(loc) > 1 and isinstance(loc[1], int) and loc[0] != front_door.ATTACHMENTS:
        label += f", line {loc[1] + 1}"
    return label


@dataclass
class TypedCritique:
    """A critique as the user typed it, kept on the page when it was refused."""

    model: str
    text: str


# ---- a running deliberation ---------------------------------------------------------------


def model_statuses(events: Sequence[ProgressEvent], models: Sequence[str]) -> dict[str, str]:
    """Each model's state in the stage under way: waiting, writing, done, failed, cancelled,
    late (from the progress events; "writing" once its call started)."""
    status = dict.fromkeys(models, "waiting")
    for event in events:
        if event.kind == EventKind.STAGE_START:
            status = dict.fromkeys(status, "idle")
            for model in event.data.get("models", []):
                status[model] = "writing"
        elif event.model and event.kind in _MODEL_STATES:
            status[event.model] = _MODEL_STATES[event.kind]
    return status


_MODEL_STATES = {
    EventKind.MODEL_COMPLETE: "done",
    EventKind.MODEL_FAILED: "failed",
    EventKind.MODEL_CANCELLED: "cancelled",
    EventKind.MODEL_LATE: "late",
}
# The error types (activities.errors.ErrorType) that say the provider itself is not there
# or not open to this worker, rather than that one reply went wrong.
UNREACHABLE = frozenset(
    {
        "ConnectionFailed",
        "Timeout",
        "ProviderUnavailable",
        "Unauthorized",
        "PaymentRequired",
        "Forbidden",
        "BadConfiguration",
    }
)
NO_PROVIDER = (
    "No model provider answers ({error}). Set a key for the worker (OPENROUTER_API_KEY, or "
    "COUNCIL_LLM_BASE_URL and COUNCIL_LLM_API_KEY for another OpenAI-compatible endpoint) and "
    "restart it, or run `make up` without a key to use the simulator."
)


@dataclass
class Call:
    """A call of the stage under way, as its member's box shows it."""

    model: str
    state: str  # writing, retrying, done, failed, cancelled, late, idle
    text: str = ""  # the reply so far, while it is written
    content_bytes: int = 0
    attempt: int = 0
    max_attempts: int = 0
    failure: str | None = None
    retry_in: float | None = None

    @property
    def line(self) -> str:
        """The state in words: "writing · 1,204 bytes so far", "retrying: attempt 3 of 6
        (next in 4 s) · the last one failed: ..."."""
        if self.state == "retrying":
            limit = f" of {self.max_attempts}" if self.max_attempts else ""
            wait = f" (next in {self.retry_in:.0f} s)" if self.retry_in else ""
            failed = f"the last one failed: {self.failure}"
            return f"retrying: attempt {self.attempt}{limit}{wait} · {failed}"
        if self.state == "paused" and self.failure:
            # "MODEL: waiting for provider NAME since TIME": the call waits, paused.
            return self.failure.partition(": ")[2] or self.failure
        if self.state == "writing" and self.content_bytes:
            return f"writing · {self.content_bytes:,} bytes so far"
        return STATE_WORDS.get(self.state, self.state)


# The states not named here are their own words (writing, done, failed, waiting).
STATE_WORDS = {
    "cancelled": "cancelled by the stop",
    "late": "cut: too late (the straggler rule)",
    "idle": "not in this stage",
    "paused": "waiting for its provider",
}


def stage_calls(
    events: Sequence[ProgressEvent], in_flight: Sequence[Any], now: datetime | None = None
) -> tuple[Stage | None, int, list[Call]]:
    """The stage under way, its round, and each of its calls: its state from the events,
    its text and retries from the calls in flight (runs.finding.CallInFlight)."""
    stage, round_number, models = None, 0, []
    for event in events:
        if event.kind == EventKind.STAGE_START:
            stage, round_number = event.stage, event.round or 0
            models = list(event.data.get("models", []))
        elif event.kind == EventKind.FALLBACK and event.model and event.model not in models:
            models.append(event.model)
    states = model_statuses(events, models)
    calls = []
    for model in models:
        call = Call(model, states.get(model, "writing"))
        flying = _in_flight_for(model, in_flight)
        if flying is not None and call.state == "writing":
            call.text, call.content_bytes = flying.text, flying.content_bytes
            if getattr(flying, "paused", False):
                call.state = "paused"
                call.failure = flying.failure
            elif flying.failure and flying.attempt > 1:
                call.state = "retrying"
                call.attempt, call.max_attempts = flying.attempt, flying.max_attempts
                call.failure = flying.failure
                if flying.retry_at and now:
                    call.retry_in = max(0.0, (flying.retry_at - now).total_seconds())
        calls.append(call)
    return stage, round_number, calls


def _in_flight_for(model: str, in_flight: Sequence[Any]) -> Any:
    """The call in flight of this model: named by its heartbeat, or by its last failure
    (which the model call words "MODEL: why")."""
    for call in in_flight:
        if call.model == model or (
            call.model is None and (call.failure or "").startswith(f"{model}: ")
        ):
            return call
    return None


def provider_problem(
    calls_completed: int, failures: Sequence[tuple[str | None, str]]
) -> str | None:
    """When no call has completed and calls fail because the provider is not there (or
    refuses this worker): what is wrong and how to fix it. `failures`: (type, message)."""
    unreachable = [message for kind, message in failures if kind in UNREACHABLE]
    return NO_PROVIDER.format(error=unreachable[0]) if unreachable and not calls_completed else None


def where_line(
    stage: Stage | None,
    round_number: int,
    max_rounds: int,
    min_rounds: int,
    view: RecordView | None,
) -> str:
    """Where a running deliberation is, in one line: the stage, the refinement round once
    one runs, and the tokens and cost so far."""
    parts = [stage.heading if stage else "starting"]
    if round_number and stage in (Stage.REFINE, Stage.REVIEW):
        parts.append(f"refinement round {round_number} of {max_rounds} (at least {min_rounds})")
    if view is not None:
        parts.append(view.usage.short)
    return " · ".join(parts)


@dataclass
class Turn:
    """One deliberation as a page shows it: its record (so far), and while it runs, the
    stage under way and each call's state."""

    id: str
    status: str  # Temporal's
    record: DeliberationRecord | None = None
    problem: str | None = None
    stop_requested: bool = False
    stage: Stage | None = None
    round: int = 0
    calls: list[Call] = field(default_factory=list)
    where: str = ""
    provider_problem: str | None = None
    chairman_text: str | None = None  # the final answer as the chairman writes it
    chairman_writing: str | None = None
    events: list[tuple[int, str]] = field(default_factory=list)  # (seq, line)
    # Running, but its workflow task keeps failing (the problem says how): a stop ends it.
    stuck: bool = False
    view: RecordView | None = field(init=False, default=None)  # the record, as shown

    def __post_init__(self) -> None:
        self.view = record_view(self.record) if self.record is not None else None

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def stopping(self) -> bool:
        return self.running and (
            self.stop_requested or (self.view is not None and self.view.stop_reason is not None)
        )

    @property
    def shown(self) -> str:
        if self.stuck:
            return "stuck"
        return shown_status(self.status, self.view.ended if self.view else None, self.stopping)

    @property
    def question(self) -> str:
        return self.view.question if self.view else self.id

    @property
    def thread(self) -> str:
        """The id of its thread (its first turn's)."""
        record = self.record
        return (record.thread_id or record.id) if record else self.id

    @property
    def final(self) -> str | None:
        return self.view.final.text if self.view and self.view.final else None

    @property
    def steerable(self) -> bool:
        """Whether Stop, One more round and Add a critique still apply."""
        return self.running and not self.stopping

    @property
    def takes_critiques(self) -> bool:
        """Whether Add a critique applies: running, not stopping, answers in, before the
        chairman."""
        return self.steerable and self.stage != Stage.SYNTHESIS and bool(self.critique_models)

    @property
    def critique_models(self) -> list[str]:
        """The members that answered: those a critique can be addressed to."""
        return [answer.model for answer in self.view.answers] if self.view else []

    def writing(self, stage: Stage, round_number: int | None = None) -> list[Call]:
        """The calls of this stage (and round) still under way: not yet in the record."""
        if not self.running or self.stage != stage or round_number not in (None, self.round):
            return []
        return [c for c in self.calls if c.state in ("writing", "retrying")]


@dataclass
class ThreadLink:
    """A thread in the sidebar: its first question seen, its newest turn."""

    id: str  # the newest turn's
    question: str
    turns: int
    status: str
    thread: str = ""  # the thread's id (its first turn's)


def sidebar(rows: Sequence[Any], current: Turn, limit: int = 15) -> list[ThreadLink]:
    """The recent threads, the one whose newest turn is on the page in the state the page
    shows (a listing follows a run's end with a delay)."""
    links = recent_threads(rows, limit)
    for link in links:
        if link.id == current.id:
            link.status = current.shown
    return links


def recent_threads(rows: Sequence[Any], limit: int = 15) -> list[ThreadLink]:
    """Threads by their newest turn, newest first, from a listing (newest first)."""
    threads: dict[str, ThreadLink] = {}
    for row in rows:
        key = row.thread or row.id
        known = threads.get(key)
        if known is None:
            if len(threads) >= limit:
                continue
            threads[key] = ThreadLink(row.id, row.question or row.id, 1, row.shown, key)
        else:
            known.turns += 1
            known.question = row.question or known.question  # older rows: nearer the start
    return list(threads.values())
