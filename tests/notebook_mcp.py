"""A stdio MCP server for the tests: a notebook whose tools say, or do not say, that they
are read-only, as servers written with the SDK's defaults do.

    python tests/notebook_mcp.py                # read_notes, write_note and erase_notes
    python tests/notebook_mcp.py --writes-only  # write_note and erase_notes

- `read_notes()`: declares readOnlyHint.
- `write_note(text)`: declares nothing (the SDK's default: no annotations at all).
- `erase_notes()`: declares itself not read-only and destructive.

The notes live in the process: nothing is written anywhere.
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("notebook", log_level="WARNING")
notes: list[str] = []


def read_notes() -> str:
    """Read the notes kept so far."""
    return "\n".join(notes) or "(no notes yet)"


@server.tool()
def write_note(text: str) -> str:
    """Write a note in the notebook."""
    notes.append(text)
    return f"noted ({len(notes)} notes)"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def erase_notes() -> str:
    """Erase every note of the notebook."""
    notes.clear()
    return "erased"


if __name__ == "__main__":
    if "--writes-only" not in sys.argv[1:]:
        server.tool(annotations=ToolAnnotations(read_only_hint=True))(read_notes)
    server.run()
