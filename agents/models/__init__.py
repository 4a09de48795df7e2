"""Agents app models, one module per concern; import them from here."""

from agents.models.after_run import AfterRunWork
from agents.models.agent import AGENT_STATS_FIELDS, Agent, AgentConfig
from agents.models.agent_choices import AgentType, LoopAction, ProviderName, StuckAction
from agents.models.execution import (
    INPUT_MAX_CHARS,
    TERMINAL_STATUSES,
    Execution,
    ExecutionPurpose,
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
from agents.models.goal import AgentGoal, Comparison
from agents.models.provider import LLMProvider
from agents.models.template import AgentTemplate
from agents.models.version import VERSIONED_FIELDS, AgentVersion

__all__ = [
    "AGENT_STATS_FIELDS",
    "INPUT_MAX_CHARS",
    "TERMINAL_STATUSES",
    "VERSIONED_FIELDS",
    "AfterRunWork",
    "Agent",
    "AgentConfig",
    "AgentGoal",
    "AgentMessage",
    "AgentTemplate",
    "AgentType",
    "AgentVersion",
    "Comparison",
    "DecisionMethod",
    "DecisionPoint",
    "DecisionType",
    "Execution",
    "ExecutionPurpose",
    "ExecutionStatus",
    "ExecutionStep",
    "LLMProvider",
    "LoopAction",
    "MessageChannel",
    "MessageType",
    "ProviderName",
    "SkipReason",
    "StateTransition",
    "StepType",
    "StopReason",
    "StuckAction",
    "TransitionType",
    "TriggerLog",
    "TriggerOutcome",
    "TriggerType",
]
