"""A run's history, measured: the payloads it holds and the commands of each workflow
task (the message a worker sends when it completes one), as they are and as they would be
had no payload been stored by reference."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from app.store import store

# The events a workflow task's commands become (what its completion message carried).
COMMAND_EVENTS = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED,
    EventType.EVENT_TYPE_TIMER_STARTED,
    EventType.EVENT_TYPE_TIMER_CANCELED,
    EventType.EVENT_TYPE_MARKER_RECORDED,
    EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
    EventType.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
}


def inline_size(event: HistoryEvent) -> int:
    """The event's size had its stored payloads travelled in it."""
    size = event.ByteSize()
    for payload in store.payloads_in(event):
        if store.reference(payload) is not None:
            size += sum(p.size_bytes for p in payload.external_payloads) - payload.ByteSize()
    return size


def task_commands(events: list[HistoryEvent]) -> list[list[HistoryEvent]]:
    """The events of each workflow task's commands, task by task."""
    tasks: list[list[HistoryEvent]] = []
    current: list[HistoryEvent] | None = None
    for event in events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            current = []
            tasks.append(current)
        elif current is not None and event.event_type in COMMAND_EVENTS:
            current.append(event)
        else:
            current = None
    return tasks
