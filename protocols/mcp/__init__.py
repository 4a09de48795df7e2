"""AgentDesk as an MCP server: each agency's agents as tools, its executions as resources."""
