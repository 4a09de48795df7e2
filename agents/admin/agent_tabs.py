"""The agent editor's tabs (unfold fieldsets with the "tab" class): one per concern instead of one
6,300 px form. Every field the single form had keeps a home here; a tab holding a field with an
error opens first."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agents.models import AGENT_STATS_FIELDS

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec

TAB = ["tab"]
STATS = "Runs & stats"  # only once the agent exists
FLOW = "Flow, teams and learning"  # issue 19's settings

# The runs and what they used are counted from the runs themselves (executions_link, by
# status: the list of its executions counts the same rows), not from the agent's counters,
# which count only the runs that ended completed or failed (seed 004's rule; the API keeps
# them) and so said "3 total runs" beside 4 runs listed while one was still going, and a total
# cost below today's.
RUN_COUNTERS = (
    "total_runs", "successful_runs", "failed_runs", "total_tokens_used", "total_cost_usd",
    "total_actions_taken",
)  # fmt: skip
STATS_FIELDS = (
    "executions_link",
    "version_link",
    *(name for name in AGENT_STATS_FIELDS if name not in RUN_COUNTERS),
    "template",
    "created_by",
    "updated_by",
    "created_at",
    "updated_at",
)

FIELDSETS: _FieldsetSpec = [
    (
        "Identity & prompt",
        {
            "classes": TAB,
            "fields": [
                "name",
                "slug",
                "site",
                "agent_type",
                "domain",
                "description",
                "avatar_url",
                "capabilities",
                "is_active",
                "is_public",
                "personality",
                "system_prompt",
                "examples",
            ],
        },
    ),
    (
        "Model",
        {"classes": TAB, "fields": ["llm_provider", "llm_model", "temperature", "max_tokens"]},
    ),
    (
        "Tools & policies",
        {
            "classes": TAB,
            "description": "Which of the registry's tools the agent may call, and what it "
            "must not do. A dangerous tool, a matching risk rule or an approval constraint "
            "makes a call wait for a person.",
            "fields": [
                "allowed_tools",
                "denied_tools",
                "effective_tools_display",
                "constraints",
            ],
        },
    ),
    (
        "Triggers & inputs",
        {
            "classes": TAB,
            "fields": [
                "trigger_events",
                "trigger_schedule",
                "schedule_display",
                "trigger_conditions",
                "input_schema",
            ],
        },
    ),
    (
        "Limits & budget",
        {
            "classes": TAB,
            "fields": [
                "max_steps_per_run",
                "max_tool_calls_per_step",
                "timeout_seconds",
                "max_runs_per_hour",
                "max_runs_per_day",
                "budget_display",
            ],
        },
    ),
    (
        "People in the loop",
        {
            "classes": TAB,
            "fields": [
                "human_timeout_minutes",
                "max_corrections",
                "deny_may_continue",
                "understanding_enabled",
                "understanding_threshold",
            ],
        },
    ),
    (
        "Memory",
        {
            "classes": TAB,
            "description": "What a run starts with (relevant memories and similar past runs, "
            "the recent conversation), what it learns afterwards, and how much of its own "
            "history each model call carries.",
            "fields": [
                "memory_token_budget",
                "memory_extraction_enabled",
                "context_token_budget",
                "conversation_window",
                "conversation_ttl_hours",
            ],
        },
    ),
    (
        FLOW,
        {
            "classes": TAB,
            "description": "Loops and stuck runs (flow analysis), which agents this one may "
            "hand work to, and what it learns from its good runs. Expected workflows are "
            "defined under Flow analysis.",
            "fields": [
                "loop_threshold",
                "loop_same_state",
                "loop_action",
                "stuck_after_seconds",
                "stuck_action",
                "delegate_agents",
                "denied_delegate_agents",
                "learning_enabled",
                "quality_threshold",
                "quality_judge_enabled",
                "investigation_max_steps",
            ],
        },
    ),
    (STATS, {"classes": TAB, "fields": list(STATS_FIELDS)}),
]
