"""How a deliberation looks in a terminal: progress lines and the record as Markdown."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from jinja2 import Environment, FileSystemLoader

from app.views.record_view import RecordView, record_view
from council.models import DeliberationRecord
from council.progress import EventKind, ProgressEvent


def _where(event: ProgressEvent) -> str:
    if event.stage is not None:
        return event.stage.place(event.round or 0)
    return f"round {event.round}" if event.round else ""


def event_line(event: ProgressEvent) -> str:
    """One line per progress event, for `watch` and `start --wait`."""
    where = _where(event)
    line = _LINES.get(event.kind)
    return line(event, where) if line else f"{event.kind.value} {where} {event.message}".strip()


def _model_complete(event: ProgressEvent, where: str) -> str:
    data = event.data
    extra = " (truncated at the size cap)" if data.get("truncated") else ""
    if data.get("finish_reason") == "length":
        extra += " (cut by the token limit)"
    return (
        f"  · {event.model} done ({where}): {data.get('tokens', 0)} tokens, "
        f"{data.get('latency_ms', 0) / 1000:.1f} s{extra}"
    )


def _round_complete(event: ProgressEvent, where: str) -> str:
    data = event.data
    head = (
        f"✓ {event.message}"
        if not event.round
        else f"✓ round {event.round} complete: {event.message}"
    )
    scores = data.get("scores", {})
    lowest = data.get("lowest", {})
    if scores:
        head += " · mean ratings " + ", ".join(f"{m} {s:.1f}" for m, s in scores.items())
    if lowest:
        low = min(lowest.values())
        threshold = data.get("threshold")
        gate = "" if threshold is None else (" (below the threshold)" if low < threshold else "")
        head += f" · lowest rating {low:g}{gate}"
    if data.get("agreement"):
        head += f"\n  ≈ {data['agreement']}"
    return head


def _refined(event: ProgressEvent, where: str) -> str:
    data = event.data
    if data.get("failed"):
        return f"  ↳ {event.model} kept its previous answer: {event.message}"
    verdict = "changed its answer" if data.get("changed") else "kept its answer"
    parts = [f"  ↳ {event.model} {verdict}: {event.message}"]
    if data.get("accepted") or data.get("rejected"):
        parts.append(
            f"accepted {data.get('accepted', 0)}, rejected {data.get('rejected', 0)} critique(s)"
        )
    else:
        parts.append(f"{data.get('critiques', 0)} critique(s)")
    if data.get("confidence") is not None:
        parts.append(f"confidence {data['confidence']:.2f}")
    return " · ".join(parts)


Line = Callable[[ProgressEvent, str], str]
_LINES: dict[EventKind, Line] = {
    EventKind.STAGE_START: lambda e, where: f"▶ {where}: {len(e.data.get('models', []))} call(s)",
    EventKind.STAGE_COMPLETE: lambda e, where: f"■ {where}: {e.message or 'done'}",
    EventKind.ROUND_START: lambda e, _: f"↻ {e.message}",
    EventKind.ROUND_COMPLETE: _round_complete,
    EventKind.MODEL_COMPLETE: _model_complete,
    EventKind.MODEL_REFINED: _refined,
    EventKind.MODEL_FAILED: lambda e, where: f"  ✗ {e.model} failed ({where}): {e.message}",
    EventKind.MODEL_CANCELLED: lambda e, where: (
        f"  – {e.model} cancelled ({where}): {e.message}"
        if e.data.get("not_needed")
        else f"  ✗ {e.model} cancelled ({where}) by the stop"
    ),
    EventKind.WAITING: lambda e, where: f"  … {where}: {e.message}",
    EventKind.MODEL_LATE: lambda e, _: f"  ⌛ {e.message}",
    EventKind.TOOL_CALL: lambda e, where: f"  ⚙ {e.model} ({where}): {e.message}",
    # A notice of good news (depth auto's agreement, what it saved) is no warning.
    EventKind.NOTICE: lambda e, _: f"  {'✔' if e.data.get('good') else '!'} {e.message}",
    EventKind.STOP_REQUESTED: lambda e, _: f"⏹ stop requested: {e.message}",
    EventKind.FALLBACK: lambda e, _: f"  ↪ {e.message}",
    EventKind.TERMINATED: lambda e, _: f"⏹ refinement ended: {e.message}",
    EventKind.FINISHED: lambda e, _: f"✔ finished: {e.message}",
}


def _ratings(ratings: Mapping[str, float]) -> str:
    return ", ".join(f"{label} {rating:g}" for label, rating in ratings.items())


# Markdown is not HTML: nothing is escaped (the page escapes model text for its medium).
_ENV = Environment(
    loader=FileSystemLoader(Path(__file__).parent),
    autoescape=False,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters.update(
    fmt=lambda value, pattern="{:.2f}": "-" if value is None else pattern.format(value),
    note=lambda note: f" ({note})" if note else "",
    ratings=_ratings,
)
_MARKDOWN = _ENV.get_template("record.md.j2")


def record_markdown(record: DeliberationRecord) -> str:
    """The whole record, final answer first."""
    return view_markdown(record_view(record))


def view_markdown(view: RecordView) -> str:
    """A record's view as Markdown (model text as written, as a transcript keeps it)."""
    return _MARKDOWN.render(view=view).removesuffix("\n")
