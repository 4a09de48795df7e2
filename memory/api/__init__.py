"""REST endpoints of an agent's memories: list and search, create, delete."""
