"""Writers of the agents app. Executions (start, cancel, resume, event dispatch) live in
``executions``; agent configuration (create, update, activate, ...) in ``agents``."""

from agents.services.executions import (
    agents_subscribed,
    enqueue_execution,
    event_dispatch,
    execution_cancel,
    execution_create,
    execution_get,
    execution_resume,
)

__all__ = [
    "agents_subscribed",
    "enqueue_execution",
    "event_dispatch",
    "execution_cancel",
    "execution_create",
    "execution_get",
    "execution_resume",
]
