from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from agents.api.views import AgentExecutionList, AgentMemoryList, AgentViewSet, ExecutionViewSet

router = SimpleRouter()
router.register("agents", AgentViewSet, basename="agent")
router.register("executions", ExecutionViewSet, basename="execution")

urlpatterns = [
    path(
        "agents/<str:agent_id>/executions/", AgentExecutionList.as_view(), name="agent-executions"
    ),
    path("agents/<str:agent_id>/memories/", AgentMemoryList.as_view(), name="agent-memories"),
    *router.urls,
]
