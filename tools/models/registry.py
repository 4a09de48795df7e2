"""The tool registry (seed 004 ``ai_agent_tools``) and every call (``ai_agent_tool_calls``)."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models

from agents.models import Agent, Execution, ExecutionStep
from core.models import AgencyOwnedModel
from tools.models.mcp import McpServer

# Function names as the OpenAI and Anthropic APIs accept them, lower case (tools/patterns.py).
TOOL_NAME_REGEX = r"^[a-z][a-z0-9_]{0,63}$"


class ToolCategory(models.TextChoices):
    CRM = "crm", "CRM"
    COMMUNICATION = "communication", "Communication"
    CALENDAR = "calendar", "Calendar"
    TASK = "task", "Tasks"
    DATA = "data", "Data"
    WEB = "web", "Web"
    SYSTEM = "system", "System"
    CUSTOM = "custom", "Custom"


class HandlerType(models.TextChoices):
    INTERNAL = "internal", "Internal (platform function)"
    MODULE = "module", "Module (platform module action)"
    EXTERNAL = "external", "External API"
    WORKFLOW = "workflow", "Automation workflow"


class Tool(AgencyOwnedModel):
    """A tool agents may call.

    System tools (the 17 defaults of seed 004, seeded by a migration) have no agency: every agency
    reads them and none can change them (``core.rls.allow_read_shared_rows``); an agency's own
    tools carry its agency. Names are unique platform-wide, as in the seed, so that a tool call
    from a model resolves to exactly one tool.
    """

    agency = models.ForeignKey(  # type: ignore[assignment]
        "core.Agency", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    name = models.CharField(max_length=64, unique=True)
    display_name = models.CharField(max_length=200)
    description = models.TextField()
    category = models.CharField(max_length=20, choices=ToolCategory.choices)

    # JSON Schema of the arguments (OpenAI function-calling format) and of the result.
    parameters_schema = models.JSONField()
    returns_schema = models.JSONField(null=True, blank=True)

    handler_type = models.CharField(max_length=10, choices=HandlerType.choices)
    handler_config = models.JSONField(default=dict, blank=True)
    # A tool discovered on an agency's MCP server (tools/mcp/): goes with the server.
    mcp_server = models.ForeignKey(
        McpServer, null=True, blank=True, on_delete=models.CASCADE, related_name="tools"
    )

    requires_permissions = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    requires_modules = ArrayField(models.CharField(max_length=100), default=list, blank=True)

    rate_limit_per_minute = models.PositiveIntegerField(null=True, blank=True)
    rate_limit_per_hour = models.PositiveIntegerField(null=True, blank=True)

    # Dangerous tools always need a human approval before they run.
    is_dangerous = models.BooleanField("dangerous", default=False)
    is_system = models.BooleanField("built-in", default=False)
    is_active = models.BooleanField("active", default=True)

    class Meta:
        ordering = ["category", "name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(category__in=ToolCategory.values),
                name="tools_tool_category_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(handler_type__in=HandlerType.values),
                name="tools_tool_handler_type_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(name__regex=TOOL_NAME_REGEX), name="tools_tool_name_format"
            ),
            models.CheckConstraint(
                condition=models.Q(is_system=True, agency__isnull=True)
                | models.Q(is_system=False, agency__isnull=False),
                name="tools_tool_system_iff_platform",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class ToolCallStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    WAITING_APPROVAL = "waiting_approval", "Waiting for approval"
    WAITING_INPUT = "waiting_input", "Waiting for an answer"  # ask_user's question
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"
    FAILED = "failed", "Failed"
    DENIED = "denied", "Denied"  # by policy or by an approver
    CANCELLED = "cancelled", "Cancelled"  # the execution stopped before it ran


def idempotency_key_for(execution_id: object, tool_call_id: str) -> str:
    """The key a handler uses so that a redelivered tool call runs at most once."""
    return f"{execution_id}:{tool_call_id}"


class ToolCall(AgencyOwnedModel):
    """One call of a tool by an agent during an execution.

    ``idempotency_key`` (execution id + the provider's tool call id, see
    :func:`idempotency_key_for`) is unique in the database: recording the same call twice fails,
    so a resumed or redelivered run finds the existing row instead of running the tool again.
    """

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tool_calls")
    # SET_NULL keeps the history when an agency deletes one of its tools; tool_name stays.
    tool = models.ForeignKey(
        Tool, null=True, blank=True, on_delete=models.SET_NULL, related_name="calls"
    )
    tool_name = models.CharField(max_length=64)
    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="tool_calls")
    step = models.ForeignKey(
        ExecutionStep, null=True, blank=True, on_delete=models.SET_NULL, related_name="tool_calls"
    )
    tool_call_id = models.CharField(max_length=200)  # the provider's id of this call
    idempotency_key = models.CharField(max_length=300)  # unique: see Meta.constraints

    input = models.JSONField(default=dict, blank=True)
    output = models.JSONField(null=True, blank=True)
    status = models.CharField(
        max_length=20, choices=ToolCallStatus.choices, default=ToolCallStatus.PENDING
    )
    error = models.TextField(blank=True)
    error_code = models.CharField(max_length=64, blank=True)  # for the structured tool error

    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField("duration (ms)", null=True, blank=True)
    tokens_used = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["created_at"]
        indexes = [
            models.Index(fields=["tool_name", "-created_at"], name="tools_toolcall_name_idx"),
            models.Index(fields=["status"], name="tools_toolcall_status_idx"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=ToolCallStatus.values),
                name="tools_toolcall_status_valid",
            ),
            models.CheckConstraint(
                condition=~models.Q(idempotency_key=""), name="tools_toolcall_key_not_blank"
            ),
            # A constraint rather than unique=True: the same unique index, without the
            # varchar_pattern_ops twin Django adds for LIKE queries that nothing runs (one index
            # write less per tool call).
            models.UniqueConstraint(
                fields=["idempotency_key"], name="tools_toolcall_idempotency_key_unique"
            ),
        ]

    @property
    def tool_label(self) -> str:
        """The tool as people read it: its display name, its name once the tool row is gone."""
        return (self.tool.display_name if self.tool is not None else "") or self.tool_name

    def __str__(self) -> str:
        # The admin's links and titles: "Send email (waiting for approval)", not the stored
        # "email_send (waiting_approval)".
        return f"{self.tool_label} ({self.get_status_display().lower()})"
