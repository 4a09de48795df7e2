from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from agents.api.providers import LLMProviderViewSet
from agents.api.views import (
    AgentExecutionList,
    AgentVersionDetail,
    AgentVersionList,
    AgentViewSet,
    ExecutionViewSet,
)

router = SimpleRouter()
router.register("agents", AgentViewSet, basename="agent")
router.register("executions", ExecutionViewSet, basename="execution")
router.register("llm-providers", LLMProviderViewSet, basename="llm-provider")

urlpatterns = [
    path(
        "agents/<str:agent_id>/executions/", AgentExecutionList.as_view(), name="agent-executions"
    ),
    path("agents/<str:agent_id>/versions/", AgentVersionList.as_view(), name="agent-versions"),
    # Any segment reaches the view: a malformed number is a JSON 404 like an unknown one.
    path(
        "agents/<str:agent_id>/versions/<str:number>/",
        AgentVersionDetail.as_view(),
        name="agent-version",
    ),
    *router.urls,
]
