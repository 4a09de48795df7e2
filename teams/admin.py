"""Teams have no admin pages of their own: a run's agent-to-agent messages show on its page."""

from __future__ import annotations

from agents.admin import panels
from teams.display import messages_table

# The run page: what this run asked other agents and what they answered it.
panels.RUN_PANELS.register(
    panels.RunPanel(
        order=10,
        name="agent_messages",
        title="Agent messages",
        label="Messages",
        render=messages_table,
    )
)
