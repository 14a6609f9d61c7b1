"""Why a tool call gave nothing (activities.web_tools, activities.mcp_tools): a module of
its own, so that the tool activities catch it without loading the tools' libraries."""

from __future__ import annotations

from activities.errors import one_line

MESSAGE_CHARS = 500


class ToolFailure(Exception):
    """Why a tool call gave nothing: one line, shown to the model and kept in the record.
    `transient`: it may go otherwise if tried again (a timeout, a connection lost, a
    server that crashed), so the call is tried again as its entry's max_attempts says;
    otherwise (a refusal, a bad argument, the tool's own error) it is final."""

    def __init__(self, message: str, transient: bool = False) -> None:
        super().__init__(one_line(message, MESSAGE_CHARS))
        self.transient = transient
