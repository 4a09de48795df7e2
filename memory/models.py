"""Agent memory (seed 004): long-term memories with embeddings, episodes, conversations."""

from __future__ import annotations

from decimal import Decimal

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone
from pgvector.django import HnswIndex, VectorField

from agents.models import Agent, Execution
from core.models import AgencyOwnedModel, Site

# text-embedding-3-small, as in the seed (VECTOR(1536)).
EMBEDDING_DIMENSIONS = 1536


class MemoryType(models.TextChoices):
    FACT = "fact", "Fact"  # learned fact about an entity or situation
    PREFERENCE = "preference", "Preference"  # user or customer preference
    PATTERN = "pattern", "Pattern"  # observed behaviour pattern, a successful approach
    RELATIONSHIP = "relationship", "Relationship"  # entity relationship
    OUTCOME = "outcome", "Outcome"  # result of a past action


class Memory(AgencyOwnedModel):
    """A long-term memory of an agent (seed 004 ``ai_agent_memories``).

    Searched by cosine distance of ``embedding`` (:func:`memory.selectors.memory_search`). The
    HNSW index serves unfiltered scans; the B-tree on (agency, agent) serves the usual query,
    which is always filtered to one agent of one agency and is then an exact scan of few rows
    (DESIGN.md: with a selective tenant filter the approximate index alone loses recall).
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
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)

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
            models.Index(fields=["agency", "agent"], name="memory_memory_agent_idx"),
            models.Index(fields=["subject_type", "subject_id"], name="memory_memory_subject_idx"),
            HnswIndex(
                name="memory_memory_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
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
        return f"[{self.memory_type}] {self.content[:80]}"


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

    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    tokens_used = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["agency", "agent"], name="memory_episode_agent_idx")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(outcome__in=[*EpisodeOutcome.values, ""]),
                name="memory_episode_outcome_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"Episode {self.pk} ({self.outcome or 'open'})"


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
