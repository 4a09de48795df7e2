"""REST endpoints of the tool registry."""
