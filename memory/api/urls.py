from __future__ import annotations

from django.urls import path

from memory.api.views import AgentMemoryDetail, AgentMemoryList
from memory.learning.api import AgentPatternDetail, AgentPatternList, ExecutionQuality

urlpatterns = [
    path("agents/<str:agent_id>/memories/", AgentMemoryList.as_view(), name="agent-memories"),
    # Any segment reaches the view: a malformed id is a JSON 404 like an unknown one.
    path(
        "agents/<str:agent_id>/memories/<str:memory_id>/",
        AgentMemoryDetail.as_view(),
        name="agent-memory",
    ),
    # Learning (memory/learning/): a run's quality and its mark, an agent's learned patterns.
    path(
        "executions/<str:execution_id>/quality/",
        ExecutionQuality.as_view(),
        name="execution-quality",
    ),
    path("agents/<str:agent_id>/patterns/", AgentPatternList.as_view(), name="agent-patterns"),
    path(
        "agents/<str:agent_id>/patterns/<str:pattern_id>/",
        AgentPatternDetail.as_view(),
        name="agent-pattern",
    ),
]
