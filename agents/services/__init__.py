"""Writers of the agents app. Executions (start, cancel, resume, event dispatch) live in
``executions``; agent configuration (create, update, activate, ...) in ``agents``."""

from agents.services.agents import (
    agent_activate,
    agent_create,
    agent_create_from_template,
    agent_deactivate,
    agent_delete,
    agent_duplicate,
    agent_update,
    agent_version_restore,
    validate_agent_fields,
)
from agents.services.executions import (
    agents_subscribed,
    enqueue_execution,
    event_dispatch,
    execution_cancel,
    execution_create,
    execution_create_for_tick,
    execution_resume,
    execution_resume_due,
    schedule_wake,
    skipped_trigger,
)

__all__ = [
    "agent_activate",
    "agent_create",
    "agent_create_from_template",
    "agent_deactivate",
    "agent_delete",
    "agent_duplicate",
    "agent_update",
    "agent_version_restore",
    "agents_subscribed",
    "enqueue_execution",
    "event_dispatch",
    "execution_cancel",
    "execution_create",
    "execution_create_for_tick",
    "execution_resume",
    "execution_resume_due",
    "schedule_wake",
    "skipped_trigger",
    "validate_agent_fields",
]
