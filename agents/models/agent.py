"""Agents (seed 004 ``ai_agents``): the configuration an agent and a template share
(:class:`AgentConfig`, with its limits) and the agent of one site, with its run statistics.
Templates are in ``template``, goals in ``goal``, the configuration's choices in
``agent_choices``."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from agents.models.agent_choices import AgentType, LoopAction, ProviderName, StuckAction
from core.models import AgencyOwnedModel, Site

MAX_HUMAN_TIMEOUT_MINUTES = 30 * 24 * 60  # 30 days
MAX_CORRECTIONS = 100
# Memory (issue 17). A history budget below this could not hold a system prompt and one step.
MIN_CONTEXT_TOKEN_BUDGET = 1000
MAX_TOKEN_BUDGET = 1_000_000
MAX_CONVERSATION_WINDOW = 200


def validate_context_token_budget(value: int) -> None:
    if 0 < value < MIN_CONTEXT_TOKEN_BUDGET:
        raise ValidationError(
            f"0 (no limit) or at least {MIN_CONTEXT_TOKEN_BUDGET} tokens.", code="min_value"
        )


def _positive(field: str, name: str) -> models.CheckConstraint:
    return models.CheckConstraint(condition=models.Q(**{f"{field}__gt": 0}), name=name)


class AgentConfig(models.Model):
    """What an agent is and how it runs: shared by :class:`Agent` and :class:`AgentTemplate`."""

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    avatar_url = models.URLField("avatar URL", max_length=500, blank=True)
    personality = models.TextField(blank=True)
    agent_type = models.CharField(max_length=20, choices=AgentType.choices)
    domain = models.CharField(max_length=100, blank=True)  # "sales", "support", "marketing", ...
    capabilities = ArrayField(models.CharField(max_length=100), default=list, blank=True)

    system_prompt = models.TextField()
    constraints = models.JSONField(default=list, blank=True)  # things the agent must NOT do
    examples = models.JSONField(default=list, blank=True)  # few-shot examples
    input_schema = models.JSONField(
        "declared inputs",
        default=dict,
        blank=True,
        help_text="What a manual run takes (API, MCP tool, A2A), as a JSON Schema of an object: "
        '{"type": "object", "properties": {"client": {"type": "string"}}, "required": '
        '["client"]}. Callers see it, a run whose data does not match is refused. {}: none '
        "declared (an instruction and any data).",
    )

    trigger_events = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    trigger_schedule = models.CharField(max_length=100, blank=True)  # a cron expression
    trigger_conditions = models.JSONField(default=dict, blank=True)

    llm_provider = models.CharField(
        "LLM provider", max_length=32, choices=ProviderName.choices, default=ProviderName.OPENAI
    )
    llm_model = models.CharField("LLM model", max_length=100, default="gpt-4o")
    temperature = models.DecimalField(
        max_digits=3,
        decimal_places=2,
        default=Decimal("0.70"),
        help_text="0 to 2. Sent to OpenAI-format providers; left out for models that take only "
        "their default (OpenAI's reasoning models: o1, o3, gpt-5...). Anthropic models run at "
        "their default.",
    )
    max_tokens = models.PositiveIntegerField(default=4096)

    max_steps_per_run = models.PositiveIntegerField(default=10)
    max_tool_calls_per_step = models.PositiveIntegerField(default=3)
    timeout_seconds = models.PositiveIntegerField("timeout (seconds)", default=120)
    max_runs_per_hour = models.PositiveIntegerField(default=60)
    max_runs_per_day = models.PositiveIntegerField(default=500)

    # Tool-name patterns with "*" wildcards (tools/patterns.py); denied wins, empty allows none.
    allowed_tools = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    denied_tools = ArrayField(models.CharField(max_length=100), default=list, blank=True)

    # Human in the loop (seed 004 approvals, seed 000 clarifications and self-correction).
    human_timeout_minutes = models.PositiveIntegerField(
        "human timeout (minutes)",
        default=24 * 60,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_HUMAN_TIMEOUT_MINUTES)],
        help_text="How long an approval or a question waits for a person before it expires; "
        "the action is then never run and the run ends.",
    )
    max_corrections = models.PositiveSmallIntegerField(
        default=3,
        validators=[MaxValueValidator(MAX_CORRECTIONS)],
        help_text="After this many failures of the same tool in one run, the run pauses and "
        "asks a person (retry with a hint, or stop). 0: never ask, the model keeps trying.",
    )
    deny_may_continue = models.BooleanField(
        default=False,
        help_text="An approver who denies an action may let the run continue (the agent is "
        "told no) instead of cancelling it.",
    )
    # Understanding phase (issue 30, seed 000): understand a request before acting, ask if unsure.
    understanding_enabled = models.BooleanField(
        "understand before acting",
        default=False,
        help_text="Before its first action, the model states how it understands the request "
        "(intent, entities mapped to fields, ambiguities) with a confidence: one more model "
        "call per run, counted in usage and budget. Below the threshold the run asks a person "
        "in the inbox first, and understands the request again with the answer.",
    )
    understanding_threshold = models.DecimalField(
        max_digits=3,
        decimal_places=2,
        default=Decimal("0.70"),
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="0 to 1: the understanding's confidence (README: Understanding phase) below "
        "which the run asks a clarification question before acting.",
    )

    # Memory (issue 17; seed 004's memory manager, seed 002's history window).
    memory_token_budget = models.PositiveIntegerField(
        default=800,
        validators=[MaxValueValidator(MAX_TOKEN_BUDGET)],
        help_text="Tokens of the system prompt given to what the agent remembers when a run "
        "starts: its memories most relevant to the run's instruction or event, and its most "
        "similar past runs. 0: none.",
    )
    context_token_budget = models.PositiveIntegerField(
        default=32000,
        validators=[validate_context_token_budget, MaxValueValidator(MAX_TOKEN_BUDGET)],
        help_text="Tokens of a run's history sent with each model call. Past it, the oldest "
        "steps are summarised by the model (one more model call, counted in usage) and the "
        "summary is sent with the instruction instead; a tool call always stays with its "
        f"result. 0: no limit (the whole history every call); else at least "
        f"{MIN_CONTEXT_TOKEN_BUDGET}.",
    )
    memory_extraction_enabled = models.BooleanField(
        default=True,
        help_text="After each run, the model extracts facts, preferences, patterns and "
        "outcomes worth remembering (one more model call per run, counted in usage and "
        "budget); a memory nearly identical to one it has raises that one's confidence.",
    )
    conversation_window = models.PositiveSmallIntegerField(
        default=12,
        validators=[MaxValueValidator(MAX_CONVERSATION_WINDOW)],
        help_text="Messages of the recent conversation with the same contact, user or "
        "session that a run starts with (each run adds its instruction and answer). 0: none.",
    )
    conversation_ttl_hours = models.PositiveIntegerField(
        "conversation TTL (hours)",
        default=24,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 365)],
        help_text="A conversation nobody continued for this long is forgotten.",
    )

    # Flow analysis (issue 19, seed 003): loops and stuck runs.
    loop_threshold = models.PositiveSmallIntegerField(
        default=3,
        validators=[MaxValueValidator(100)],
        help_text="How many times a run may make the same tool call with the same arguments "
        "(or, with Loop on same state, get the same empty result from a tool). At the "
        "threshold the model is warned once; past it the run stops or pauses (Loop action). "
        "0: no loop detection.",
    )
    # Off by default: looking up five leads that each have no tickets is the same empty result
    # five times, and only the agent's owner knows whether that is progress.
    loop_same_state = models.BooleanField(
        default=False,
        help_text="Also count a tool's same empty or not-found result as a loop, whatever the "
        "arguments (a search reworded again and again that always finds nothing). Leave off "
        "for agents that look up many records one by one.",
    )
    loop_action = models.CharField(
        max_length=10,
        choices=LoopAction.choices,
        default=LoopAction.STOP,
        help_text="What happens to a run caught in a loop: it ends with reason loop_detected, "
        "or it waits for a person in the inbox (continue or stop).",
    )
    stuck_after_seconds = models.PositiveIntegerField(
        "stuck after (seconds)",
        default=600,
        validators=[MinValueValidator(10)],
        help_text="A run in one state (running, waiting for a tool or a model) longer than "
        "this, or than its expected workflow allows, is flagged as stuck.",
    )
    stuck_action = models.CharField(
        max_length=10,
        choices=StuckAction.choices,
        default=StuckAction.NOTIFY,
        help_text="What happens to a stuck run: approvers are notified, and optionally the run "
        "is cancelled.",
    )

    # Teams (issue 19): which agents of the agency this one may hand work to.
    delegate_agents = ArrayField(
        models.CharField(max_length=100),
        default=list,
        blank=True,
        help_text="Slugs of agents this agent may delegate to with delegate_to_agent, with "
        '"*" wildcards. Empty: none.',
    )
    denied_delegate_agents = ArrayField(
        models.CharField(max_length=100),
        default=list,
        blank=True,
        help_text="Slugs (with wildcards) it may never delegate to; denied wins.",
    )

    # Learning (issue 19, seed 000): patterns from good runs, quality, investigations.
    learning_enabled = models.BooleanField(
        default=True,
        help_text="Learn the approach of good runs as patterns, and give later runs the best "
        "matching ones.",
    )
    quality_threshold = models.DecimalField(
        max_digits=3,
        decimal_places=2,
        default=Decimal("0.80"),
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="A run whose quality score (0-1) reaches this is judged good and its approach "
        "is learned.",
    )
    quality_judge_enabled = models.BooleanField(
        default=False,
        help_text="Also ask the model to judge each finished run (one more model call, counted "
        "in usage and budget).",
    )
    investigation_max_steps = models.PositiveSmallIntegerField(
        default=0,
        validators=[MaxValueValidator(20)],
        help_text="Extra steps a run may spend investigating when a result looks wrong (a tool "
        "returned nothing, or contradicts the task). 0: never investigate.",
    )

    class Meta:
        abstract = True
        constraints = [
            models.CheckConstraint(
                condition=models.Q(agent_type__in=AgentType.values),
                name="%(app_label)s_%(class)s_agent_type_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(llm_provider__in=ProviderName.values),
                name="%(app_label)s_%(class)s_llm_provider_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(temperature__gte=0, temperature__lte=2),
                name="%(app_label)s_%(class)s_temperature_range",
            ),
            models.CheckConstraint(
                condition=models.Q(loop_action__in=LoopAction.values),
                name="%(app_label)s_%(class)s_loop_action_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(stuck_action__in=StuckAction.values),
                name="%(app_label)s_%(class)s_stuck_action_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(quality_threshold__gte=0, quality_threshold__lte=1),
                name="%(app_label)s_%(class)s_quality_threshold_range",
            ),
            models.CheckConstraint(
                condition=models.Q(understanding_threshold__gte=0, understanding_threshold__lte=1),
                name="%(app_label)s_%(class)s_understanding_threshold_range",
            ),
            _positive("max_tokens", "%(app_label)s_%(class)s_max_tokens_positive"),
            _positive("max_steps_per_run", "%(app_label)s_%(class)s_max_steps_positive"),
            _positive("max_tool_calls_per_step", "%(app_label)s_%(class)s_max_tool_calls_positive"),
            _positive("timeout_seconds", "%(app_label)s_%(class)s_timeout_positive"),
            _positive("human_timeout_minutes", "%(app_label)s_%(class)s_human_timeout_positive"),
            _positive("max_runs_per_hour", "%(app_label)s_%(class)s_runs_per_hour_positive"),
            _positive("max_runs_per_day", "%(app_label)s_%(class)s_runs_per_day_positive"),
            _positive(
                "conversation_ttl_hours", "%(app_label)s_%(class)s_conversation_ttl_positive"
            ),
            models.CheckConstraint(
                condition=models.Q(context_token_budget=0)
                | models.Q(context_token_budget__gte=MIN_CONTEXT_TOKEN_BUDGET),
                name="%(app_label)s_%(class)s_context_budget_range",
            ),
        ]


# The agent's run statistics (seed 004), kept by the runtime: read-only in the admin and the API.
AGENT_STATS_FIELDS = (
    "total_runs",
    "successful_runs",
    "failed_runs",
    "total_tokens_used",
    "total_cost_usd",
    "total_actions_taken",
    "avg_response_time_ms",
    "last_run_at",
    "last_error",
)


class Agent(AgentConfig, AgencyOwnedModel):
    """An AI agent of one site (seed 004 ``ai_agents``)."""

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="+")
    slug = models.SlugField(max_length=100)
    # By name: agents.models.template imports AgentConfig from this module.
    template = models.ForeignKey(
        "agents.AgentTemplate",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="agents",
    )

    # The latest of its versions (agents.AgentVersion), which holds the configuration this row
    # has: written by the agent services in the save's transaction, so that a run reads the
    # configuration and its version in one row (agents.runtime.setup.build_snapshot).
    current_version = models.ForeignKey(
        "agents.AgentVersion",
        null=True,
        blank=True,
        editable=False,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    is_active = models.BooleanField("active", default=False)
    is_public = models.BooleanField("public", default=False)  # offered in the marketplace

    # Stats, updated by the runtime when an execution finishes.
    total_runs = models.PositiveIntegerField(default=0)
    successful_runs = models.PositiveIntegerField(default=0)
    failed_runs = models.PositiveIntegerField(default=0)
    total_tokens_used = models.PositiveBigIntegerField(default=0)
    total_cost_usd = models.DecimalField(max_digits=14, decimal_places=6, default=Decimal(0))
    total_actions_taken = models.PositiveIntegerField(default=0)
    avg_response_time_ms = models.PositiveIntegerField(
        "average response time (ms)", null=True, blank=True
    )
    # The sum behind avg_response_time_ms: an average kept as a rounded integer alone drifts
    # with every run, a sum gives it exactly (migration agents 0008).
    total_response_time_ms = models.PositiveBigIntegerField(default=0)
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    # Memories changed since this were not yet compared for merging (memory/consolidation.py).
    memory_consolidated_at = models.DateTimeField(null=True, blank=True, editable=False)

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
    )

    class Meta:
        ordering = ["name"]
        indexes = [
            models.Index(fields=["agent_type"], name="agents_agent_type_idx"),
            models.Index(
                fields=["is_active"],
                name="agents_agent_active_idx",
                condition=models.Q(is_active=True),
            ),
            # Which agents subscribe to an event: trigger_events @> ARRAY['crm.contact.created'].
            GinIndex(fields=["trigger_events"], name="agents_agent_triggers_gin"),
        ]
        constraints = [
            *AgentConfig.Meta.constraints,
            models.UniqueConstraint(fields=["site", "slug"], name="agents_agent_unique_slug"),
            # The target of executions' (agent, agency) foreign key (migration agents 0007).
            models.UniqueConstraint(fields=["id", "agency"], name="agents_agent_id_agency"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        # Foreign-key checks bypass row-level security: keep a site inside its own agency. A site
        # hidden by RLS (another tenant's) reads as missing, which is refused the same way. (The
        # database refuses it too, migration agents 0007; this gives the form a message.)
        if self.site_id and self.agency_id:
            site_agency = (
                Site.objects.filter(pk=self.site_id).values_list("agency_id", flat=True).first()
            )
            if site_agency != self.agency_id:
                raise ValidationError({"site": "The site belongs to another agency."})
