from __future__ import annotations

from django.urls import path
from rest_framework.routers import SimpleRouter

from tools.api.agent_tools import AgentToolConfigView
from tools.api.views import ToolViewSet
from tools.mcp.api import McpServerViewSet

router = SimpleRouter()
router.register("tools", ToolViewSet, basename="tool")
router.register("mcp-servers", McpServerViewSet, basename="mcp-server")

urlpatterns = [
    path("agents/<str:agent_id>/tools/", AgentToolConfigView.as_view(), name="agent-tools"),
    *router.urls,
]
