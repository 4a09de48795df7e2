from __future__ import annotations

from django.urls import path

from memory.api.views import AgentMemoryDetail, AgentMemoryList

urlpatterns = [
    path("agents/<str:agent_id>/memories/", AgentMemoryList.as_view(), name="agent-memories"),
    # Any segment reaches the view: a malformed id is a JSON 404 like an unknown one.
    path(
        "agents/<str:agent_id>/memories/<str:memory_id>/",
        AgentMemoryDetail.as_view(),
        name="agent-memory",
    ),
]
