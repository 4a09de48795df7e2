"""Flow analysis in the admin: expected workflows (staff define them; a definition that does not
fit its JSON Schema, or names a state twice, is refused with the reason), and, read-only, the
completeness analyses, loops caught and stuck runs."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.utils.safestring import SafeString

from agents.admin import panels
from agents.admin.common import json_display, run_link
from agents.admin.forms import JSONListField, JSONObjectField
from agents.models import Execution
from core.admin_empty import EmptyState
from core.admin_scoping import AgencyScopedAdmin, ReadOnlyAdminMixin
from flow.diagrams.views import diagrams_panel
from flow.models import CompletenessAnalysis, ExpectedWorkflow, LoopDetection, StuckRun
from flow.panels import completeness_panel, flow_panel
from flow.replay.views import RETRY_ACTION, run_urls

# Each JSON box's example, shown in it while it is empty (an empty box: nothing expected).
EXAMPLES = {
    "expected_states": '[{"state": "running", "is_required": true, "max_duration_seconds": 300}, '
    '{"state": "completed", "is_required": true}]',
    "expected_actions": '[{"action": "crm_get_contact", "is_required": true}, '
    '{"action": "email_*", "max_count": 1}]',
    "expected_transitions": '[{"from": "running", "to": "completed", "is_required": true}]',
    "success_conditions": '{"status": "completed"}',
}


class ExpectedWorkflowForm(forms.ModelForm[ExpectedWorkflow]):
    class Meta:
        model = ExpectedWorkflow
        fields = list(EXAMPLES)  # the admin adds the other fields of its fieldsets
        field_classes = {
            "expected_states": JSONListField,
            "expected_actions": JSONListField,
            "expected_transitions": JSONListField,
            "success_conditions": JSONObjectField,
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, example in EXAMPLES.items():
            if name in self.fields:  # a reader's form has its fields read-only, not in the form
                self.fields[name].widget.attrs["placeholder"] = f"e.g. {example}"


@admin.register(ExpectedWorkflow)
class ExpectedWorkflowAdmin(AgencyScopedAdmin):
    form = ExpectedWorkflowForm
    empty_state = EmptyState(
        "No expected workflow yet",
        "An expected workflow lists the states, tools and transitions a run of an agent (or of "
        "every agent of a type) should go through. Add one: each of their runs that ends is "
        "then compared with it under Completeness.",
    )
    list_display = ["name", "agent_type", "agent", "category", "is_active", "updated_at"]
    list_filter = ["agent_type", "is_active", "category"]
    list_select_related = ["agent"]
    search_fields = ["name", "description", "category"]
    readonly_fields = ["created_at", "updated_at"]
    fieldsets = [
        (
            None,
            {
                "fields": ["name", "category", "description", "agent_type", "agent", "is_active"],
                "description": "Applies to every agent of the type, or to one agent (which wins "
                "over its type's). Each finished run of those agents gets a completeness "
                "analysis against it.",
            },
        ),
        (
            "Expected flow",
            {
                "fields": ["expected_states", "expected_actions", "expected_transitions"],
                "description": "Each box takes a JSON list, as its example shows; leave it "
                "empty to expect nothing of that kind.",
            },
        ),
        (
            "Bounds and success",
            {"fields": ["max_duration_ms", "max_cost_usd", "max_llm_calls", "success_conditions"]},
        ),
        ("History", {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
    ]


@admin.register(CompletenessAnalysis)
class CompletenessAnalysisAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    empty_state = EmptyState(
        "No run analysed yet",
        "A minute or so after a run ends, it is compared here with its agent's expected "
        "workflow: which states and tools it missed or added, with a score. Only agents with an "
        "expected workflow get one: start there.",
        link_label="Expected workflows",
        link_url_name="admin:flow_expectedworkflow_changelist",
    )
    list_display = [
        "execution_link", "agent", "workflow", "score", "is_complete", "analyzed_at",
    ]  # fmt: skip
    list_filter = ["is_complete", ("agent", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["execution", "agent", "workflow"]
    date_hierarchy = "analyzed_at"
    anomalies_pretty = json_display("anomalies", "Anomalies")
    analysis_result_pretty = json_display("analysis_result", "Analysis result")
    fields = [
        "execution", "agent", "workflow", "completeness_score", "is_complete",
        "expected_states_visited", "expected_states_total", "visited_states", "missing_states",
        "unexpected_states_visited", "expected_actions_performed", "expected_actions_total",
        "performed_actions", "missing_actions", "unexpected_actions_performed",
        "expected_transitions_followed", "expected_transitions_total", "unexpected_transitions",
        "duration_within_bounds", "cost_within_bounds", "llm_calls_within_bounds",
        "anomalies_pretty", "analysis_result_pretty", "analyzed_at",
    ]  # fmt: skip

    @admin.display(description="Execution")
    def execution_link(self, obj: CompletenessAnalysis) -> SafeString | str:
        return run_link(obj.execution)

    @admin.display(description="Score", ordering="completeness_score")
    def score(self, obj: CompletenessAnalysis) -> str:
        return f"{obj.completeness_score:.0%}"


@admin.register(LoopDetection)
class LoopDetectionAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    empty_state = EmptyState(
        "No loop caught",
        "When a run repeats the same tool call or reply over and over, it is caught and listed "
        "here with what it repeated and what was done (a person asked, or the run ended). "
        "Nothing to do until then.",
    )
    list_display = ["execution_link", "agent", "kind", "outcome", "occurrences", "detected_at"]
    list_filter = ["outcome", "kind"]
    list_select_related = ["execution", "agent"]
    date_hierarchy = "detected_at"
    repeated_pretty = json_display("repeated", "Repeated")
    fields = [
        "execution", "agent", "kind", "outcome", "repeated_pretty", "occurrences", "threshold",
        "question", "fingerprint", "detected_at",
    ]  # fmt: skip

    @admin.display(description="Execution")
    def execution_link(self, obj: LoopDetection) -> SafeString | str:
        return run_link(obj.execution)


@admin.register(StuckRun)
class StuckRunAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    empty_state = EmptyState(
        "No stuck run",
        "A run that stays in one state longer than its expected workflow (or the usual time) "
        "allows is flagged here, with what was done about it. Nothing to do until then.",
    )
    list_display = [
        "execution_link", "agent", "state", "entered_at", "expected_seconds", "action_taken",
        "flagged_at",
    ]  # fmt: skip
    list_filter = ["state", "action_taken"]
    list_select_related = ["execution", "agent"]
    date_hierarchy = "flagged_at"
    fields = [
        "execution", "agent", "state", "state_sequence", "entered_at", "expected_seconds",
        "expected_from", "action_taken", "flagged_at",
    ]  # fmt: skip

    @admin.display(description="Execution")
    def execution_link(self, obj: StuckRun) -> SafeString | str:
        return run_link(obj.execution)


def _diagrams(execution: Execution) -> SafeString:
    return diagrams_panel(execution, can_replay=True)


# The run page: the run against its expected workflow, its loops and stuck flags; the run as
# Mermaid sequence and state diagrams with replay (dry); "Retry from here" on the timeline's
# steps; and the pages behind them (downloads, replay, retry).
panels.RUN_PANELS.register(
    panels.RunPanel(
        order=20,
        name="flow_analysis",
        title="Flow analysis",
        label="Completeness",
        render=completeness_panel,
    )
)
panels.RUN_PANELS.register(
    panels.RunPanel(
        order=40, name="flow_diagrams", title="Diagrams", label="Flow", render=_diagrams
    )
)
panels.RUN_STEP_ACTIONS.register(RETRY_ACTION)
panels.RUN_URLS.register(panels.RunUrls(order=10, name="flow", urls=run_urls))
# The agent page: its flow over the last days, above the loop and stuck settings.
panels.AGENT_PANELS.register(
    panels.AgentPanel(
        order=10,
        name="flow_display",
        label="Flow analysis",
        before="loop_threshold",
        render=flow_panel,
    )
)
