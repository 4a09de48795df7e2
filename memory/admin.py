"""Agent memory in the admin: memories (browse, search by meaning, add, edit, delete for good),
what consolidation changed (read-only), episodes and conversations (read-only). Embeddings are
never shown raw: hundreds of floats tell a person nothing.

The changelist's search box searches by meaning once an agent is picked in the filter
(:func:`memory.search.search_memories`, hybrid: embeddings and words, best first, with a score
column); across agents it matches words. Writes go through :mod:`memory.services`: a changed
content is embedded again after the request (``memory.embed_pending``), a delete is a real one.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.views.main import ORDER_VAR
from django.db.models import Case, FloatField, IntegerField, Model, Q, QuerySet, Value, When
from django.forms import ModelForm
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from agents.admin import panels
from agents.admin.common import (
    COMPACT_WIDGETS,
    EMPTY,
    id_column,
    json_display,
    link,
)
from agents.models import Agent
from core.admin_empty import EmptyState
from core.admin_scoping import AgencyScopedAdmin, ReadOnlyAdminMixin
from core.exceptions import ApplicationError
from core.text import excerpt
from memory.models import Conversation, Episode, Memory, MemoryChange
from memory.panels import memory_panel
from memory.search import search_memories
from memory.services import memory_delete, memory_store, memory_update
from memory.validation import UPDATABLE_FIELDS, clean_memory_fields

AGENT_FILTER = ("agent", admin.RelatedOnlyFieldListFilter)
AGENT_PARAM = "agent__id__exact"  # the agent filter's query parameter
SEARCH_K = 50  # results of a search by meaning (one page)
EDITABLE_FIELDS = (
    "agent", "memory_type", "content", "subject_type", "subject_id", "importance", "confidence",
    "tags", "expires_at", "source", "metadata",
)  # fmt: skip
USE_FIELDS = (
    "embedding_summary", "access_count", "last_accessed_at", "site", "execution", "created_at",
    "updated_at", "changes",
)  # fmt: skip


def embedding_summary(obj: Memory | Episode | None) -> str:
    if obj is None or obj.embedding is None:
        return "not embedded yet (found by its words only)"
    model = f" from {obj.embedding_model}" if obj.embedding_model else ""
    return f"{len(obj.embedding)}-dimensional vector{model}"


class EmbeddedFilter(admin.SimpleListFilter):
    title = "embedding"
    parameter_name = "embedded"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Embedded"), ("no", "Pending")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "yes":
            return queryset.filter(embedding__isnull=False)
        if self.value() == "no":
            return queryset.filter(embedding__isnull=True)
        return queryset


class ExpiredFilter(admin.SimpleListFilter):
    title = "expiry"
    parameter_name = "expired"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("no", "Current"), ("yes", "Expired")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        now = timezone.now()
        if self.value() == "yes":
            return queryset.filter(expires_at__lte=now)
        if self.value() == "no":
            return queryset.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
        return queryset


class MemoryForm(ModelForm[Memory]):
    """The model's fields, checked by the service's rules (a bad value is a form error)."""

    class Meta:
        model = Memory
        fields = [
            "agent", "memory_type", "content", "subject_type", "subject_id", "confidence",
            "importance", "tags", "expires_at", "source", "metadata",
        ]  # fmt: skip

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        values = {
            name: cleaned[name]
            for name in UPDATABLE_FIELDS
            if name in cleaned and (name in self.changed_data or self.instance._state.adding)
        }
        try:
            cleaned.update(clean_memory_fields(values, new=self.instance._state.adding))
        except ApplicationError as exc:
            for field, errors in exc.extra.get("fields", {"content": [exc.message]}).items():
                self.add_error(field if field in self.fields else None, errors)
        return cleaned


@admin.register(Memory)
class MemoryAdmin(AgencyScopedAdmin):
    empty_state = EmptyState(
        "No memory yet",
        "Agents store what they learn here as they run (facts, preferences, what worked) and "
        "recall it in later runs. Run an agent with memory on, or add a memory by hand.",
    )
    form = MemoryForm
    formfield_overrides = COMPACT_WIDGETS
    list_display = [
        "__str__", "agent", "memory_type", "importance", "confidence", "access_count",
        "embedded", "score", "expires_at", "created_at",
    ]  # fmt: skip
    list_filter = ["memory_type", "importance", AGENT_FILTER, EmbeddedFilter, ExpiredFilter]
    list_select_related = ["agent"]
    date_hierarchy = "created_at"
    search_fields = ["content", "subject_type", "source"]
    search_help_text = (
        "With an agent picked in the filter: search by meaning (best first, with a score). "
        "Otherwise: memories containing these words."
    )
    metadata_pretty = json_display("metadata", "Metadata")
    readonly_fields = [
        "site", "execution", "embedding_summary", "access_count", "last_accessed_at",
        "created_at", "updated_at", "changes",
    ]  # fmt: skip
    fieldsets = [
        (None, {"fields": EDITABLE_FIELDS}),
        ("Use and origin", {"fields": USE_FIELDS}),
    ]

    @admin.display(description="Embedding")
    def embedding_summary(self, obj: Memory | None) -> str:
        return embedding_summary(obj)

    @admin.display(description="Embedded", boolean=True)
    def embedded(self, obj: Memory) -> bool:
        return bool(obj.embedding_model)

    # Not sortable: a score exists only on a search's results, which are best first (Django
    # orders the list before it searches, so no column can sort by what the search adds).
    @admin.display(description="Score")
    def score(self, obj: Memory) -> str:
        value = getattr(obj, "search_score", None)
        return EMPTY if value is None else f"{value:.3f}"

    @admin.display(description="Changes by consolidation")
    def changes(self, obj: Memory | None) -> SafeString | str:
        if obj is None or obj.pk is None:
            return EMPTY
        rows = MemoryChange.objects.filter(agency_id=obj.agency_id, agent_id=obj.agent_id).filter(
            Q(memory_ids__contains=[obj.pk]) | Q(memory=obj)
        )[:20]
        if not rows:
            return EMPTY
        return format_html_join(
            "", "<div>{} · {}</div>", ((link(row), row.created_at.date()) for row in rows)
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        fields = list(super().get_readonly_fields(request, obj))
        return [*fields, "agent"] if obj is not None else fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Memory]:
        # The vectors are large and never listed; the change page loads the embedding for its
        # summary.
        return super().get_queryset(request).defer("search_vector")

    # --- search by meaning -------------------------------------------------------------------
    def _search_agent(self, request: HttpRequest) -> Agent | None:
        try:
            agent_id = uuid.UUID(request.GET.get(AGENT_PARAM, ""))
        except ValueError:
            return None
        agents = Agent.objects.filter(pk=agent_id)
        agency = getattr(getattr(request, "membership", None), "agency", None)
        if agency is not None:
            agents = agents.filter(agency=agency)
        return agents.first()

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Memory], search_term: str
    ) -> tuple[QuerySet[Memory], bool]:
        term = search_term.strip()
        agent = self._search_agent(request) if term else None
        if agent is None:
            if term and request.method == "GET":
                messages.info(request, "Pick an agent in the filter to search by meaning.")
            return super().get_search_results(request, queryset, search_term)
        hits = search_memories(agent=agent, query=term, k=SEARCH_K, touch=False)
        ids = [hit.memory.id for hit in hits]
        ranked = queryset.filter(pk__in=ids).annotate(
            search_rank=Case(
                *[When(pk=pk, then=Value(rank)) for rank, pk in enumerate(ids)],
                output_field=IntegerField(),
            ),
            search_score=Case(
                *[When(pk=hit.memory.id, then=Value(hit.score)) for hit in hits],
                output_field=FloatField(),
            ),
        )
        if ORDER_VAR not in request.GET:  # best first, unless a column header was clicked
            ranked = ranked.order_by("search_rank", "-pk")
        return ranked, False

    # --- writes through the services --------------------------------------------------------
    def save_model(self, request: HttpRequest, obj: Memory, form: Any, change: bool) -> None:
        data = form.cleaned_data
        if change:
            original = Memory.objects.get(pk=obj.pk)
            changed = {name: data[name] for name in form.changed_data if name in UPDATABLE_FIELDS}
            saved = memory_update(original, embed_now=False, **changed)
        else:
            fields = {name: data[name] for name in UPDATABLE_FIELDS if name in data}
            fields["source"] = fields.get("source") or "admin"
            saved = memory_store(agent=data["agent"], dedup=False, embed_now=False, **fields).memory
        obj.pk = saved.pk
        obj._state.adding = False

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        """No many-to-many fields; the service saved everything."""

    def delete_model(self, request: HttpRequest, obj: Memory) -> None:
        memory_delete(obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Memory]) -> None:
        for memory in queryset:
            memory_delete(memory)


@admin.register(MemoryChange)
class MemoryChangeAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    """What consolidation, pruning and deduplication changed, and why."""

    empty_state = EmptyState(
        "No memory changed yet",
        "Each change to an agent's memories is listed here, with the memories as they were and "
        "why: a memory reinforced when the agent learns it again, and, when its memories are "
        "tidied (every 6 hours once it has 100), near-duplicates merged and old, unimportant, "
        "unused ones forgotten. Nothing to do until then.",
        link_label="Memories",
        link_url_name="admin:memory_memory_changelist",
    )
    list_display = ["change", "agent", "action", "reason_short", "actor", "created_at"]
    list_display_links = ["change"]
    change = id_column("Change")
    list_filter = ["action", "actor", AGENT_FILTER]
    list_select_related = ["agent"]
    date_hierarchy = "created_at"
    search_fields = ["reason"]
    before_pretty = json_display("before", "Before")
    after_pretty = json_display("after", "After")
    fields = [
        "agent", "action", "reason", "actor", "memory", "memory_ids", "before_pretty",
        "after_pretty", "execution", "created_at",
    ]  # fmt: skip

    @admin.display(description="Why")
    def reason_short(self, obj: MemoryChange) -> str:
        return excerpt(obj.reason, 120)


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
        "should_repeat", "duration_ms", "tokens_used", "embedding_summary", "created_at",
    ]  # fmt: skip

    @admin.display(description="Embedding")
    def embedding_summary(self, obj: Episode | None) -> str:
        return embedding_summary(obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Episode]:
        return super().get_queryset(request).defer("embedding")


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


# The agent page: what the agent remembers, above the memory settings.
panels.AGENT_PANELS.register(
    panels.AgentPanel(
        order=10,
        name="memory_display",
        label="Memory",
        before="memory_token_budget",
        render=memory_panel,
    )
)

# Learning (memory/learning/): patterns, run qualities, investigations.
from memory.learning import admin as learning_admin  # noqa: E402, F401 - registers its pages
