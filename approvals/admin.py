"""Approvals are decided in the approvers' inbox (``/approvals/``, approvals/inbox/), never here:
the admin lists them read-only, each row and page linking to its item in the inbox, where a
decision is one approval at a time with a reason for a deny and a confirmation (the bulk
"Approve/Deny selected" actions are gone: they decided unseen rows, with no reason and no
confirmation). Risk rules: an agency's own are edited by its staff; the platform's only by
superusers."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agents.admin import panels
from agents.admin.common import changelist_link, run_link
from agents.models import Execution
from approvals.inbox.views.common import argument_rows
from approvals.models import Approval, ApprovalStatus, RiskRule
from approvals.risk import assess_risk
from approvals.risk_rules import condition_errors
from core.admin_empty import EmptyState
from core.admin_scoping import AgencyScopedAdmin, ReadOnlyAdminMixin, SharedRowsAdmin
from core.text import excerpt
from tools.models import Tool
from tools.patterns import InvalidPattern, validate_pattern


class PendingFirstFilter(admin.SimpleListFilter):
    """The queue is what approvers come for: pending approvals unless asked otherwise."""

    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [*ApprovalStatus.choices, ("all", "All")]

    def choices(self, changelist: Any) -> Any:
        for value, label in self.lookup_choices:
            yield {
                "selected": (self.value() or ApprovalStatus.PENDING) == value,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": label,
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value() or ApprovalStatus.PENDING
        return queryset if value == "all" else queryset.filter(status=value)


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = [
        "action_type", "risk_level", "status", "inbox_link", "agent", "execution_link",
        "action_summary", "created_at", "decided_by", "decided_at",
    ]  # fmt: skip
    list_filter = [PendingFirstFilter, "risk_level", ("agent", admin.RelatedOnlyFieldListFilter)]
    list_select_related = ["agent", "execution", "decided_by"]
    date_hierarchy = "created_at"
    search_fields = ["action_type", "action_description", "risk_explanation"]
    actions = None  # decisions are taken one at a time, in the inbox
    list_before_template = "approvals/admin/pending_only.html"  # says what the default hides
    # (Shown with the default filter on too: "pending" is the list's own default, not a
    # filter someone set, and pending_only.html above says when it hides decided ones.)
    empty_state = EmptyState(
        "No approval is waiting",
        "An approval is listed here when a run wants to make a call that needs a person first "
        "(a dangerous tool such as email_send, a matching risk rule, or one of the agent's "
        "constraints): the run waits until an approver approves, edits or denies it in the "
        "inbox. Decided ones are listed under Filters, by status.",
        link_label="Open the inbox",
        link_url_name="approvals_inbox:list",
    )
    fields = [
        "inbox_link", "action_type", "action_description", "proposed_arguments_rows",
        "edited_arguments_rows", "risk_level", "risk_explanation", "risk_rule", "status",
        "agent", "site", "execution", "tool_call", "decided_by", "decided_at",
        "decision_reason", "expires_at", "created_at",
    ]  # fmt: skip

    class Media:
        css = {"all": ["approvals/inbox.css"]}  # the argument rows' style, the inbox's own

    def get_queryset(self, request: HttpRequest) -> QuerySet[Approval]:
        # The title and the rows name the call by its tool (display name, schema).
        return super().get_queryset(request).select_related("tool_call__tool")

    @admin.display(description="Proposed arguments")
    def proposed_arguments_rows(self, obj: Approval) -> SafeString:
        return _arguments(obj, obj.proposed_arguments)

    @admin.display(description="Edited arguments")
    def edited_arguments_rows(self, obj: Approval) -> SafeString | None:
        return None if obj.edited_arguments is None else _arguments(obj, obj.edited_arguments)

    @admin.display(description="Action")
    def action_summary(self, obj: Approval) -> SafeString:
        """The call, cut to a few lines in the list; the whole of it on hover and on its page."""
        text = obj.action_description
        return format_html('<span title="{}">{}</span>', text, excerpt(text, 160))

    @admin.display(description="Execution")
    def execution_link(self, obj: Approval) -> SafeString | str:
        return run_link(obj.execution)

    @admin.display(description="Inbox")
    def inbox_link(self, obj: Approval) -> SafeString:
        """Where the approval is decided (or, once settled, how it went)."""
        pending = obj.status == ApprovalStatus.PENDING
        text = "Decide in the inbox" if pending else "Open in the inbox"
        url = reverse("approvals_inbox:approval", args=[obj.pk])
        return format_html('<a class="text-primary-600 font-medium" href="{}">{}</a>', url, text)


def _arguments(approval: Approval, arguments: Any) -> SafeString:
    """A call's arguments as the inbox shows them: rows named in words, text as written."""
    call = approval.tool_call
    schema = call.tool.parameters_schema if call is not None and call.tool is not None else None
    rows = argument_rows(arguments, schema)
    return render_to_string("approvals/inbox/_arguments.html", {"rows": rows})


class RiskRuleForm(forms.ModelForm[RiskRule]):
    class Meta:
        model = RiskRule
        fields = ("tool_pattern",)  # the admin adds the other fields
        help_texts = {
            "tool_pattern": "A tool-name pattern: 'email_send', 'crm_delete_*', '*'.",
            "condition": (
                'JSON narrowing the rule to certain arguments, e.g. {"argument": "to", '
                '"min_items": 10}; {} matches every call.'
            ),
        }

    def clean_tool_pattern(self) -> str:
        pattern: str = self.cleaned_data["tool_pattern"]
        try:
            validate_pattern(pattern)
        except InvalidPattern as exc:
            raise forms.ValidationError(exc.message, code="invalid_pattern") from exc
        return pattern

    def clean_condition(self) -> Any:
        # The same check as the API: a malformed condition would fail every call of the tool
        # when approvals.risk.condition_matches reads it.
        condition = self.cleaned_data.get("condition")
        if condition is None:  # a cleared field: the column's default, every call
            return {}
        if errors := condition_errors(condition):
            raise forms.ValidationError(" ".join(errors), code="invalid_condition")
        return condition


@admin.register(RiskRule)
class RiskRuleAdmin(SharedRowsAdmin):
    form = RiskRuleForm
    list_display = [
        "name", "tool_pattern", "risk_level", "requires_approval", "priority", "is_active",
        "platform_rule",
    ]  # fmt: skip
    list_filter = ["risk_level", "requires_approval", "is_active"]
    search_fields = ["name", "tool_pattern", "description"]
    readonly_fields = ["created_at", "updated_at"]
    fieldsets = [
        (None, {"fields": ["name", "description", "tool_pattern", "condition"]}),
        ("Decision", {"fields": ["risk_level", "requires_approval", "priority", "is_active"]}),
        ("History", {"fields": ["created_at", "updated_at"], "classes": ["collapse"]}),
    ]

    @admin.display(description="Platform rule", boolean=True)
    def platform_rule(self, obj: RiskRule) -> bool:
        return obj.agency_id is None


def _run_approvals(execution: Execution) -> SafeString:
    return changelist_link(Approval, "approvals", execution__id__exact=execution.pk, status="all")


def _approval_note(agency_id: uuid.UUID, tool: Tool, constraints: Sequence[Any]) -> str:
    """Why a call of ``tool`` waits for a person (its danger flag, a risk rule, a constraint)."""
    risk = assess_risk(
        agency_id=agency_id,
        tool_name=tool.name,
        arguments={},
        dangerous=tool.is_dangerous,
        constraints=list(constraints),
    )
    return risk.reason if risk.needs_approval else ""


# The run page's "Related" links; the agent page's tool preview (what waits for an approval).
panels.RUN_LINKS.register(panels.RunLink(order=10, name="approvals", render=_run_approvals))
panels.TOOL_NOTES.register(panels.ToolNote(order=10, name="approval", note=_approval_note))
