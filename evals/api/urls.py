from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from evals.api.canary import AgentCanaryView, CanaryPromoteView, CanaryStopView
from evals.api.compare import ExperimentCompare
from evals.api.gate import DeployGateView, VersionActivateView
from evals.api.views import DatasetViewSet, ExperimentViewSet, SaveAsTestCase

router = SimpleRouter()
router.register("datasets", DatasetViewSet, basename="dataset")
router.register("experiments", ExperimentViewSet, basename="experiment")

urlpatterns = [
    path("agents/<str:agent_id>/deploy-gate/", DeployGateView.as_view(), name="agent-deploy-gate"),
    path(
        "agents/<str:agent_id>/versions/<str:number>/activate/",
        VersionActivateView.as_view(),
        name="agent-version-activate",
    ),
    path("agents/<str:agent_id>/canary/", AgentCanaryView.as_view(), name="agent-canary"),
    path("agents/<str:agent_id>/canary/stop/", CanaryStopView.as_view(), name="agent-canary-stop"),
    path(
        "agents/<str:agent_id>/canary/promote/",
        CanaryPromoteView.as_view(),
        name="agent-canary-promote",
    ),
    # Before the router's experiments/<id>/, which would take "compare" for an id.
    path("experiments/compare/", ExperimentCompare.as_view(), name="experiment-compare"),
    path(
        "executions/<str:execution_id>/test-case/",
        SaveAsTestCase.as_view(),
        name="execution-test-case",
    ),
    *router.urls,
]
