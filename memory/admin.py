"""Agent memory, read-only: memories (deletable, to make an agent forget a wrong fact), episodes
and conversations. Embeddings are never shown raw: 1536 floats tell a person nothing."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Model, QuerySet
from django.http import HttpRequest

from agents.admin.common import id_column, json_display
from core.admin_scoping import AgencyScopedAdmin, ReadOnlyAdminMixin
from memory.models import Conversation, Episode, Memory

AGENT_FILTER = ("agent", admin.RelatedOnlyFieldListFilter)


@admin.register(Memory)
class MemoryAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = [
        "__str__", "agent", "memory_type", "importance", "confidence", "access_count",
        "created_at",
    ]  # fmt: skip
    list_filter = ["memory_type", "importance", AGENT_FILTER]
    list_select_related = ["agent"]
    date_hierarchy = "created_at"
    search_fields = ["content", "subject_type", "source"]
    metadata_pretty = json_display("metadata", "Metadata")
    fields = [
        "agent", "site", "execution", "memory_type", "subject_type", "subject_id", "content",
        "embedding_summary", "confidence", "importance", "source", "tags", "metadata_pretty",
        "access_count", "last_accessed_at", "expires_at", "created_at",
    ]  # fmt: skip

    @admin.display(description="Embedding")
    def embedding_summary(self, obj: Memory | None) -> str:
        if obj is None or obj.embedding is None:
            return "not embedded (found by text only)"
        model = f" from {obj.embedding_model}" if obj.embedding_model else ""
        return f"{len(obj.embedding)}-dimensional vector{model}"

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return AgencyScopedAdmin.has_delete_permission(self, request, obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Memory]:
        # The vector is large and never listed; the change page loads it for its summary.
        return super().get_queryset(request).defer("embedding")


@admin.register(Episode)
class EpisodeAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = ["episode", "agent", "outcome", "trigger_event", "duration_ms", "created_at"]
    list_display_links = ["episode"]
    episode = id_column("Episode")
    list_filter = ["outcome", "should_repeat", AGENT_FILTER]
    list_select_related = ["agent"]
    date_hierarchy = "created_at"
    search_fields = ["context_summary", "outcome_details", "trigger_event"]
    actions_taken_pretty = json_display("actions_taken", "Actions taken")
    fields = [
        "agent", "site", "execution", "trigger_event", "context_summary",
        "actions_taken_pretty", "outcome", "outcome_details", "lessons_learned",
        "should_repeat", "duration_ms", "tokens_used", "created_at",
    ]  # fmt: skip


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = [
        "conversation", "agent", "context_type", "message_count", "tokens_used",
        "last_message_at",
    ]  # fmt: skip
    list_display_links = ["conversation"]
    conversation = id_column("Conversation", ordering="started_at")
    list_filter = ["context_type", AGENT_FILTER]
    list_select_related = ["agent"]
    date_hierarchy = "last_message_at"
    search_fields = ["agent__name"]
    messages_pretty = json_display("messages", "Messages")
    metadata_pretty = json_display("metadata", "Metadata")
    fields = [
        "agent", "site", "context_type", "context_id", "messages_pretty", "metadata_pretty",
        "message_count", "tokens_used", "started_at", "last_message_at", "expires_at",
    ]  # fmt: skip
