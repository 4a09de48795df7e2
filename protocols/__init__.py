"""Other systems calling AgentDesk's agents over open protocols: MCP (``protocols.mcp``, agents as
tools) and A2A (``protocols.a2a``). Both start and follow runs through :mod:`protocols.runs`."""
