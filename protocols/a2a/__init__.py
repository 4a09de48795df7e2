"""AgentDesk's agents as A2A agents: an agent card per agent a key may run, and the A2A task
methods on its runs (README "A2A"). Mounted in the ASGI application by :mod:`.asgi`."""
