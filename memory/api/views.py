"""An agent's memories over REST: list (or search with ``q``), create, delete."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response

from agents.models import Agent
from core.api.base import TenantScopedView, parse_id
from core.api.fields import ErrorSerializer
from core.exceptions import ApplicationError
from core.selectors import access_object
from memory.api.filters import MemoryFilter
from memory.api.serializers import (
    MemoryCreateSerializer,
    MemorySearchParams,
    MemorySerializer,
)
from memory.models import Memory
from memory.search import search_memories
from memory.search.memories import MAX_K, QUERY_MAX_CHARS
from memory.selectors import access_memory, agent_memories
from memory.services import memory_delete, memory_store

AGENT_ID = OpenApiParameter("agent_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
MEMORY_ID = OpenApiParameter("memory_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
SEARCH_PARAMETERS = [
    OpenApiParameter(
        "q",
        # MemorySearchParams' q: some text besides spaces, at most QUERY_MAX_CHARS.
        {
            "type": "string",
            "minLength": 1,
            "maxLength": QUERY_MAX_CHARS,
            "pattern": r"^[^\x00]*[^\s\x00][^\x00]*$",
        },
        description="Search by meaning and words (hybrid): the `k` most relevant memories, best "
        "first, with `score` and `similarity`; not paginated. Without it: the list.",
    ),
    OpenApiParameter(
        "k",
        {"type": "integer", "minimum": 1, "maximum": MAX_K},
        description=f"How many results a search returns (1-{MAX_K}, 10).",
    ),
]
# List filters that a search does not take (it ranks; it does not page or sort).
NOT_WITH_Q = ("min_importance", "ordering", "page", "page_size")


class _AgentMemories(TenantScopedView):
    """One agent's memories; the agent is looked up like any by-id fetch (404 alike)."""

    def agent(self) -> Agent:
        agents = self.scope(Agent.objects.all())
        return access_object(agents, agency=None, id=parse_id(self.kwargs["agent_id"]))


class AgentMemoryList(_AgentMemories, generics.ListAPIView):
    serializer_class = MemorySerializer
    filterset_class = MemoryFilter
    ordering_fields = ["created_at", "importance", "last_accessed_at", "access_count"]
    ordering = ["-created_at"]

    def get_queryset(self) -> QuerySet[Memory]:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request
            return Memory.objects.none()
        return self.scope(agent_memories(agent=self.agent()))

    @extend_schema(
        operation_id="agents_memories_list",
        summary="The agent's memories, or a search of them (`q`)",
        description=(
            "What the agent learned (embeddings left out). Without `q`: a page, newest first; "
            "filter by `type` (repeatable or comma-separated), `subject_type`, `subject_id`, "
            "`min_importance`. With `q`: the `k` memories most relevant to it (cosine "
            "similarity of embeddings and full-text match, blended with importance, recency and "
            "confidence), best first; `type` and `subject_*` filter the search. Expired "
            "memories are never searched. A search does not count as the agent's access."
        ),
        parameters=[AGENT_ID, *SEARCH_PARAMETERS],
        # The page's envelope either way; a search's has no next or previous page.
        responses={200: MemorySerializer(many=True)},
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        if "q" not in request.query_params:
            return self.list(request, *args, **kwargs)
        clash = [name for name in NOT_WITH_Q if name in request.query_params]
        if clash:
            raise ApplicationError(
                "invalid",
                f"A search (q) cannot be combined with {', '.join(clash)}.",
                fields={name: ["Not allowed with q."] for name in clash},
                status=422,  # each parameter is valid; together they mean nothing
            )
        params = MemorySearchParams(data=request.query_params)
        params.is_valid(raise_exception=True)
        found = params.validated_data
        hits = search_memories(
            agent=self.agent(),
            query=found["q"],
            k=found["k"],
            types=found["type"],
            subject_type=found["subject_type"],
            subject_id=found["subject_id"],
            touch=False,
        )
        for hit in hits:
            hit.memory.search_score = hit.score  # type: ignore[attr-defined]
            hit.memory.similarity = hit.similarity  # type: ignore[attr-defined]
        results = MemorySerializer([hit.memory for hit in hits], many=True).data
        return Response({"count": len(hits), "next": None, "previous": None, "results": results})

    @extend_schema(
        operation_id="agents_memories_create",
        summary="Store a memory of the agent",
        description=(
            "201 with the new memory; 200 with the existing one when the agent already has a "
            "memory of the same text (its confidence and access raised instead of a copy). The "
            "embedding is made right after the request (`embedded` turns true); until then the "
            "memory is found by its words."
        ),
        request=MemoryCreateSerializer,
        parameters=[AGENT_ID],
        responses={201: MemorySerializer, 200: MemorySerializer},
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        agent = self.agent()
        body = MemoryCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        result = memory_store(agent=agent, embed_now=False, **body.validated_data)
        code = status.HTTP_201_CREATED if result.created else status.HTTP_200_OK
        return Response(MemorySerializer(result.memory).data, status=code)


class AgentMemoryDetail(_AgentMemories):
    @extend_schema(
        operation_id="agents_memories_destroy",
        summary="Delete a memory for good",
        description=(
            "The memory and its embedding are deleted (not hidden), with the consolidation "
            "records that quote it: the agent forgets it."
        ),
        parameters=[AGENT_ID, MEMORY_ID],
        request=None,
        responses={204: None, 404: OpenApiResponse(ErrorSerializer)},
    )
    def delete(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        memory = access_memory(agent=self.agent(), memory_id=parse_id(self.kwargs["memory_id"]))
        memory_delete(memory)
        return Response(status=status.HTTP_204_NO_CONTENT)
