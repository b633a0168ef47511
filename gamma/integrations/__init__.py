"""Where agents already live: gamma behind an MCP server and a LangGraph store.

Both surfaces bind one actor chosen by the host (never by what a model writes)
to one ``gamma.Engine``: ``binding`` holds what they share; ``mcp`` (extra
``gamma[mcp]``) and ``langgraph`` (extra ``gamma[langgraph]``) each import
their library, so importing this package needs neither.
"""
