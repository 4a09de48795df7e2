"""Tools from agencies' MCP servers (issue 18), beside the tool registry.

``models`` (McpServer, McpAllowedAddress; in the ``tools`` app), ``naming`` (registry names
``mcp_<slug>__<tool>``), ``addresses`` (the private-address refusal on every connection),
``client`` (the official ``mcp`` SDK: list and call), ``services`` (register, change, refresh),
``handler`` (the registry's handler of every ``mcp_`` tool), ``admin``, ``api``, ``tasks``.
"""
