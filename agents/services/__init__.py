"""Writers of the agents app. Executions: a run's start in ``start``, its cancel in ``cancel``,
its resume after a wait in ``resume``, an event's dispatch to its subscribers in ``dispatch``;
agent configuration (create, update, activate, ...) in ``agents``."""

from agents.services.agents import (
    agent_activate,
    agent_create,
    agent_create_from_template,
    agent_deactivate,
    agent_delete,
    agent_duplicate,
    agent_update,
    agent_version_activate,
    agent_version_restore,
    validate_agent_fields,
)
from agents.services.cancel import execution_cancel
from agents.services.dispatch import agents_subscribed, event_dispatch
from agents.services.resume import execution_resume, execution_resume_due, schedule_wake
from agents.services.start import (
    enqueue_execution,
    execution_create,
    execution_create_for_tick,
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
    "agent_version_activate",
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
