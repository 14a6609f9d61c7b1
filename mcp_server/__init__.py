"""The MCP server: the council as tools for any Model Context Protocol client.

    python starter.py mcp                      (stdio; `council mcp` once installed)
    python starter.py mcp --http HOST:PORT     (streamable HTTP at http://HOST:PORT/mcp)

mcp_server.inputs           the tools' arguments, read as the CLI reads its flags
mcp_server.results          what a tool returns: text for the model, the same fields as data
mcp_server.runs             the runs the tools act on, a thin layer over runs/
mcp_server.progress         ask_council's progress notifications, kept coming while it waits
mcp_server.tasks            ask_council as a task, for a client that takes tasks
mcp_server.tools            the tools
mcp_server.http_transport   the HTTP transport behind the web page's rules (web.guard)
mcp_server.serve            connecting to Temporal and serving one transport

Importing the package loads nothing of the MCP SDK: starter.py loads it for `mcp` only.
"""
