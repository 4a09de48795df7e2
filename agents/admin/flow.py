"""Flow tracking (seed 003), read-only: state transitions, decision points, agent messages."""

from __future__ import annotations

from django.contrib import admin
from django.utils.safestring import SafeString

from agents.admin.common import json_display, run_link
from agents.models import AgentMessage, DecisionPoint, StateTransition
from core.admin_empty import EmptyState
from core.admin_scoping import AgencyScopedAdmin, ReadOnlyAdminMixin


@admin.register(StateTransition)
class StateTransitionAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = [
        "__str__", "execution_link", "sequence", "transition_type", "triggered_by_event",
        "entered_at", "duration_ms",
    ]  # fmt: skip
    list_filter = ["to_state", "from_state", "transition_type"]
    list_select_related = ["execution"]
    date_hierarchy = "entered_at"
    search_fields = ["transition_reason", "triggered_by_event"]
    event_metadata_pretty = json_display("event_metadata", "Event metadata")
    state_data_pretty = json_display("state_data", "State data")
    fields = [
        "execution", "sequence", "from_state", "to_state", "transition_type",
        "transition_reason", "triggered_by_event", "event_metadata_pretty", "entered_at",
        "exited_at", "duration_ms", "state_data_pretty",
    ]  # fmt: skip

    @admin.display(description="Execution")
    def execution_link(self, obj: StateTransition) -> SafeString | str:
        return run_link(obj.execution)


@admin.register(DecisionPoint)
class DecisionPointAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = [
        "__str__", "execution_link", "decision_method", "confidence_score", "decided_at",
    ]  # fmt: skip
    list_filter = ["decision_type", "decision_method"]
    list_select_related = ["execution"]
    date_hierarchy = "decided_at"
    search_fields = ["decision_question", "reasoning"]
    available_options_pretty = json_display("available_options", "Available options")
    chosen_option_pretty = json_display("chosen_option", "Chosen option")
    rejected_options_pretty = json_display("rejected_options", "Rejected options")
    rejection_reasons_pretty = json_display("rejection_reasons", "Rejection reasons")
    fields = [
        "execution", "step", "decision_type", "decision_question", "available_options_pretty",
        "chosen_option_pretty", "chosen_option_index", "reasoning", "confidence_score",
        "decision_method", "rules_applied", "rejected_options_pretty",
        "rejection_reasons_pretty", "decided_at",
    ]  # fmt: skip

    @admin.display(description="Execution")
    def execution_link(self, obj: DecisionPoint) -> SafeString | str:
        return run_link(obj.execution)


@admin.register(AgentMessage)
class AgentMessageAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    empty_state = EmptyState(
        "No agent message yet",
        "When an agent hands work to another (its delegate_to_agent tool), the hand-over and "
        "the answer are listed here, each with both runs. Give an agent that tool and the agents "
        "it may call, on its Flow, teams and learning tab.",
        link_label="Agents",
        link_url_name="admin:agents_agent_changelist",
    )
    list_display = [
        "message_type", "from_agent", "to_agent", "channel", "is_request", "sent_at",
        "responded_at",
    ]  # fmt: skip
    list_filter = ["message_type", "channel", "is_request"]
    list_select_related = ["from_agent", "to_agent"]
    date_hierarchy = "sent_at"
    search_fields = ["from_agent__name", "to_agent__name"]
    content_pretty = json_display("content", "Content")
    fields = [
        "message_type", "from_agent", "from_execution", "to_agent", "to_execution",
        "content_pretty", "is_request", "request_id", "in_response_to", "channel", "sent_at",
        "received_at", "responded_at",
    ]  # fmt: skip
