"""The protocols app keeps no rows of its own so far: an MCP tool call or an A2A task is an
execution of the agents app (:mod:`protocols.runs`)."""
