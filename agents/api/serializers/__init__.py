"""Serializers of the agents API, by resource:

- :mod:`agents.api.serializers.agents`: agents (with their goals), read and written;
- :mod:`agents.api.serializers.executions`: executions (with their steps), and a manual run's
  request and answer;
- :mod:`agents.api.serializers.versions`: an agent's versions.
"""
