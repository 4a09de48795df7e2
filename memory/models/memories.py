"""Agent memory (seed 004): long-term memories with embeddings, episodes, conversations, and the
record of what consolidation changed."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.utils import timezone
from pgvector.django import HnswIndex, VectorField

from agents.models import Agent, Execution
from core.models import AgencyOwnedModel, Site
from core.text import excerpt

# Full-text search of memory contents (memory.search): English stemming, so that "prefers" meets
# "preference"; the embedding carries meaning across words and languages.
TEXT_SEARCH_CONFIG = "english"

# The width of every stored vector (memory.embeddings.DIMENSIONS makes vectors of it): a setting.
DIMENSIONS: int = settings.AGENTDESK_EMBEDDING_DIMENSIONS
# What of an episode is embedded (and so compared with a new run's instruction).
EPISODE_EMBEDDED_CHARS = 2000


def embedding_hnsw(name: str) -> HnswIndex:
    """The approximate-nearest-neighbour index of an ``embedding`` column: HNSW, cosine distance,
    on the full-precision vector (bench/README.md "Memory search": ``halfvec`` built no faster
    and recalled a little less; it would halve the index if space became the limit)."""
    return HnswIndex(
        name=name, fields=["embedding"], m=16, ef_construction=64, opclasses=["vector_cosine_ops"]
    )


class MemoryType(models.TextChoices):
    FACT = "fact", "Fact"  # learned fact about an entity or situation
    PREFERENCE = "preference", "Preference"  # user or customer preference
    PATTERN = "pattern", "Pattern"  # observed behaviour pattern, a successful approach
    RELATIONSHIP = "relationship", "Relationship"  # entity relationship
    OUTCOME = "outcome", "Outcome"  # result of a past action


class Memory(AgencyOwnedModel):
    """A long-term memory of an agent (seed 004 ``ai_agent_memories``).

    Written by :mod:`memory.services` only; searched by :func:`memory.search.search_memories`
    (hybrid: cosine similarity of ``embedding`` and full-text match of ``search_vector``).
    ``embedding_model`` names the model that made ``embedding``: searches compare only vectors of
    the agency's current model. A NULL embedding waits for ``memory.embed_pending``; the memory
    is found by its words meanwhile.
    """

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="memories")
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="+")
    execution = models.ForeignKey(
        Execution, null=True, blank=True, on_delete=models.SET_NULL, related_name="memories"
    )

    memory_type = models.CharField(max_length=16, choices=MemoryType.choices)
    subject_type = models.CharField(max_length=50, blank=True)  # "contact", "company", ...
    subject_id = models.UUIDField(null=True, blank=True)
    content = models.TextField()
    embedding = VectorField(dimensions=DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)
    # Kept by PostgreSQL from ``content`` (a stored generated column): what full-text search
    # matches and ranks, parsed once per write rather than once per row searched. No GIN index:
    # under row-level security only leakproof operators may use an index, and @@ is not one;
    # the search reads the agent's rows through the B-tree (memory.search).
    search_vector = models.GeneratedField(
        expression=SearchVector("content", config=TEXT_SEARCH_CONFIG),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    confidence = models.DecimalField(max_digits=3, decimal_places=2, default=Decimal("0.80"))
    source = models.CharField(max_length=100, blank=True)  # where the memory came from
    tags = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    metadata = models.JSONField(default=dict, blank=True)

    importance = models.PositiveSmallIntegerField(default=5)  # 1-10
    access_count = models.PositiveIntegerField(default=0)
    last_accessed_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "memories"
        indexes = [
            # One agent's rows, most important first: the exact search path reads an agent's
            # rows through it, and a run's importance-ordered recall stops after the first few.
            models.Index(
                "agency",
                "agent",
                models.F("importance").desc(),
                models.F("created_at").desc(),
                name="memory_memory_agent_imp_idx",
            ),
            models.Index(fields=["subject_type", "subject_id"], name="memory_memory_subject_idx"),
            # Memories waiting for their embedding: found by words meanwhile, and embedded by
            # memory.embed_pending.
            models.Index(
                fields=["agency", "agent"],
                condition=models.Q(embedding__isnull=True),
                name="memory_memory_pending_idx",
            ),
            embedding_hnsw("memory_memory_embedding_hnsw"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(memory_type__in=MemoryType.values),
                name="memory_memory_type_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(confidence__gte=0, confidence__lte=1),
                name="memory_memory_confidence_range",
            ),
            models.CheckConstraint(
                condition=models.Q(importance__gte=1, importance__lte=10),
                name="memory_memory_importance_range",
            ),
        ]

    def __str__(self) -> str:
        return f"[{self.memory_type}] {excerpt(self.content, 80)}"


class EpisodeOutcome(models.TextChoices):
    SUCCESS = "success", "Success"
    PARTIAL = "partial", "Partial"
    FAILURE = "failure", "Failure"


class Episode(AgencyOwnedModel):
    """What an agent did in one execution and how it went (seed 004 ``ai_agent_episodes``)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="episodes")
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="+")
    execution = models.OneToOneField(
        Execution, null=True, blank=True, on_delete=models.SET_NULL, related_name="episode"
    )

    trigger_event = models.CharField(max_length=200, blank=True)
    context_summary = models.TextField(blank=True)
    actions_taken = models.JSONField(default=list, blank=True)
    outcome = models.CharField(max_length=10, choices=EpisodeOutcome.choices, blank=True)
    outcome_details = models.TextField(blank=True)

    lessons_learned = ArrayField(models.TextField(), default=list, blank=True)
    should_repeat = models.BooleanField(null=True, blank=True)  # would the agent do it again?

    duration_ms = models.PositiveIntegerField("duration (ms)", null=True, blank=True)
    tokens_used = models.PositiveIntegerField(null=True, blank=True)

    # "Similar past situations" (memory.search.search_episodes), as for memories.
    embedding = VectorField(dimensions=DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["agency", "agent"], name="memory_episode_agent_idx"),
            embedding_hnsw("memory_episode_embedding_hnsw"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(outcome__in=[*EpisodeOutcome.values, ""]),
                name="memory_episode_outcome_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"Episode {self.pk} ({self.outcome or 'open'})"

    def embedded_text(self) -> str:
        """What the episode is found by: the situation, what was done and how it went."""
        tools = ", ".join(dict.fromkeys(a.get("tool", "") for a in self.actions_taken or []))
        parts = [
            f"{self.trigger_event}: {self.context_summary}",
            f"Tools: {tools}" if tools else "",
            f"Outcome: {self.outcome} {self.outcome_details[:300]}",
            f"Lessons: {'; '.join(self.lessons_learned)}" if self.lessons_learned else "",
        ]
        return "\n".join(p for p in parts if p)[:EPISODE_EMBEDDED_CHARS]


class ContextType(models.TextChoices):
    ENTITY = "entity", "Entity"  # about one record (a contact, a deal)
    USER = "user", "User"  # with one user
    SESSION = "session", "Session"  # one session / execution thread


class Conversation(AgencyOwnedModel):
    """Short-term memory: a message window (seed 004 ``ai_agent_conversations``)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="conversations")
    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="+")

    context_type = models.CharField(max_length=10, choices=ContextType.choices)
    context_id = models.UUIDField(null=True, blank=True)  # the related entity, user or session

    messages = models.JSONField(default=list, blank=True)  # agents.llm MessageDict list
    metadata = models.JSONField(default=dict, blank=True)

    started_at = models.DateTimeField(default=timezone.now)
    last_message_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)  # cleaned up after this

    message_count = models.PositiveIntegerField(default=0)
    tokens_used = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-last_message_at"]
        indexes = [
            models.Index(
                fields=["agent", "context_type", "context_id"], name="memory_conversation_ctx_idx"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(context_type__in=ContextType.values),
                name="memory_conversation_context_type_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.context_type} conversation {self.pk}"


class MemoryChangeAction(models.TextChoices):
    MERGE = "merge", "Merged"  # near-duplicates merged into one memory (the others deleted)
    PRUNE = "prune", "Pruned"  # deleted as unimportant, rarely used and old
    DEDUP = "dedup", "Reinforced"  # a new memory matched an existing one, which was raised instead
    UPDATE = "update", "Updated"  # fields of a memory changed by consolidation


class MemoryChange(AgencyOwnedModel):
    """One change that consolidation, pruning or deduplication made to an agent's memories: what
    (``action``, the memories before and after), why (``reason``) and by what (``actor``), so
    that staff can see what the agent forgot or merged and why.

    ``memory_ids`` holds every memory the change touched (kept after they are deleted); forgetting
    a memory (:func:`memory.services.memory_delete`) deletes the changes that name it too, since
    their snapshots hold its text.
    """

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="memory_changes")
    action = models.CharField(max_length=10, choices=MemoryChangeAction.choices)
    # The memory that remains (a merge's result, a reinforced memory); NULL for a prune.
    memory = models.ForeignKey(
        Memory, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes"
    )
    memory_ids = ArrayField(models.UUIDField(), default=list, blank=True)
    reason = models.TextField()
    before = models.JSONField(default=list, blank=True)  # [memory.changes.Snapshot, ...]
    after = models.JSONField(null=True, blank=True)  # Snapshot of the result, or null
    actor = models.CharField(max_length=100)  # "consolidation", "extraction", "tool:remember"
    execution = models.ForeignKey(
        Execution, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["agency", "agent", "-created_at"], name="memory_change_agent_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(action__in=MemoryChangeAction.values),
                name="memory_change_action_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_action_display()} ({len(self.memory_ids)} memories)"
