"""REST endpoints of agents, their executions and memories."""
