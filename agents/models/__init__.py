"""Agents app models, one module per concern; import them from here."""

from agents.models.agent import (
    Agent,
    AgentConfig,
    AgentGoal,
    AgentTemplate,
    AgentType,
    Comparison,
    ProviderName,
)
from agents.models.execution import (
    TERMINAL_STATUSES,
    Execution,
    ExecutionStatus,
    ExecutionStep,
    SkipReason,
    StepType,
    StopReason,
    TriggerLog,
    TriggerOutcome,
    TriggerType,
)
from agents.models.flow import (
    AgentMessage,
    DecisionMethod,
    DecisionPoint,
    DecisionType,
    MessageChannel,
    MessageType,
    StateTransition,
    TransitionType,
)
from agents.models.provider import LLMProvider

__all__ = [
    "TERMINAL_STATUSES",
    "Agent",
    "AgentConfig",
    "AgentGoal",
    "AgentMessage",
    "AgentTemplate",
    "AgentType",
    "Comparison",
    "DecisionMethod",
    "DecisionPoint",
    "DecisionType",
    "Execution",
    "ExecutionStatus",
    "ExecutionStep",
    "LLMProvider",
    "MessageChannel",
    "MessageType",
    "ProviderName",
    "SkipReason",
    "StateTransition",
    "StepType",
    "StopReason",
    "TransitionType",
    "TriggerLog",
    "TriggerOutcome",
    "TriggerType",
]
