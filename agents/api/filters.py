"""Query filters of the agents endpoints."""

from __future__ import annotations

import django_filters

from agents.models import Agent, Execution
from core.api.filtering import FilterSet


class AgentFilter(FilterSet):
    q = django_filters.CharFilter(field_name="name", lookup_expr="icontains", max_length=200)

    class Meta:
        model = Agent
        fields = ["agent_type", "domain", "is_active", "site", "llm_provider"]


class ExecutionFilter(FilterSet):
    """``purpose``: ``run`` for the agent's own runs, ``evaluation`` for its experiments' (evals/);
    without it both are listed, each saying which it is (as the admin's executions list)."""

    created_after = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="gte")
    created_before = django_filters.IsoDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = Execution
        fields = ["status", "trigger_type", "agent", "purpose"]
