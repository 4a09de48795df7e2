"""The agents app's admin: one module per page family; importing them registers the admins."""

from agents.admin.agent import AgentAdmin
from agents.admin.agent_template import AgentTemplateAdmin
from agents.admin.executions import ExecutionAdmin, ExecutionStepAdmin, TriggerLogAdmin
from agents.admin.flow import AgentMessageAdmin, DecisionPointAdmin, StateTransitionAdmin
from agents.admin.provider import LLMProviderAdmin

__all__ = [
    "AgentAdmin",
    "AgentMessageAdmin",
    "AgentTemplateAdmin",
    "DecisionPointAdmin",
    "ExecutionAdmin",
    "ExecutionStepAdmin",
    "LLMProviderAdmin",
    "StateTransitionAdmin",
    "TriggerLogAdmin",
]
