"""Writers for MCP servers and the tools discovered on them. Precondition for all: in the agency's
context (or the platform's).

- :mod:`tools.mcp.services.checks`: what a server's fields and headers may be (the 400s and 422s
  before anything is written), and the headers' rules for the API schema;
- :mod:`tools.mcp.services.servers`: a server created, changed, deleted;
- :mod:`tools.mcp.services.discovery`: a server's tools listed and stored (the refresh, and the
  beat's refresh of every enabled server).
"""
