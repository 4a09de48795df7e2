"""Learning in the admin: learned patterns (see, edit, delete; they come from good runs, never
added by hand), run qualities and investigations (read-only), and the page where staff mark a
run good or bad (linked from the run's quality panel)."""

from __future__ import annotations

import uuid
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from agents.admin import panels
from agents.admin.common import EMPTY, id_column, json_display, link
from agents.models import Execution
from core.admin_empty import EmptyState
from core.admin_scoping import AgencyScopedAdmin, ReadOnlyAdminMixin, request_agency
from core.exceptions import ApplicationError
from memory.learning.models import HumanMark, Investigation, LearnedPattern, RunQuality
from memory.learning.panels import agent_quality_panel, quality_panel
from memory.learning.services import PATTERN_EDITABLE, pattern_delete, pattern_update

AGENT_FILTER = ("agent", admin.RelatedOnlyFieldListFilter)


class LearnedPatternForm(forms.ModelForm[LearnedPattern]):
    class Meta:
        model = LearnedPattern
        fields = list(PATTERN_EDITABLE)
        help_texts = {
            "steps": "The tools in order: "
            '[{"tool": "name", "arguments": {"key": "<placeholder>"}}].',
            "confidence": "0-1. Runs are given the patterns most like their task, by similarity "
            "times confidence; below 0.30 a pattern is no longer given.",
            "is_active": "Given to the agent's runs.",
        }

    def clean_steps(self) -> Any:
        steps = self.cleaned_data["steps"]
        if not isinstance(steps, list) or not all(
            isinstance(s, dict) and isinstance(s.get("tool"), str) and s["tool"] for s in steps
        ):
            raise forms.ValidationError('A list of {"tool": name, "arguments": {...}} objects.')
        return steps


@admin.register(LearnedPattern)
class LearnedPatternAdmin(AgencyScopedAdmin):
    form = LearnedPatternForm
    list_display = [
        "__str__", "agent", "task_type", "confidence", "success_count", "failure_count",
        "is_active", "last_used_at", "updated_at",
    ]  # fmt: skip
    list_filter = ["is_active", AGENT_FILTER]
    list_select_related = ["agent"]
    search_fields = ["task_type", "description"]
    readonly_fields = [
        "agent", "tool_sequence", "success_count", "failure_count", "sources",
        "embedding_summary", "last_used_at", "created_at", "updated_at",
    ]  # fmt: skip
    fieldsets = [
        (None, {"fields": ["agent", *PATTERN_EDITABLE]}),
        (
            "Record",
            {
                "fields": [
                    "tool_sequence",
                    "success_count",
                    "failure_count",
                    "sources",
                    "embedding_summary",
                    "last_used_at",
                    "created_at",
                    "updated_at",
                ]
            },
        ),
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # learned from good runs only

    @admin.display(description="Learned from")
    def sources(self, obj: LearnedPattern | None) -> SafeString | str:
        if obj is None or not obj.source_executions:
            return EMPTY
        runs = Execution.objects.filter(pk__in=obj.source_executions).order_by("-created_at")
        return format_html_join("", "<div>{}</div>", ((link(run),) for run in runs[:20]))

    @admin.display(description="Embedding")
    def embedding_summary(self, obj: LearnedPattern | None) -> str:
        if obj is None or obj.embedding is None:
            return "not embedded (found by its task type only)"
        return f"{len(obj.embedding)}-dimensional vector from {obj.embedding_model}"

    def save_model(
        self, request: HttpRequest, obj: LearnedPattern, form: Any, change: bool
    ) -> None:
        original = LearnedPattern.objects.get(pk=obj.pk)
        changed = {name: form.cleaned_data[name] for name in form.changed_data}
        try:
            pattern_update(pattern=original, **changed)
        except ApplicationError as exc:  # (the form checked the same)
            self.message_user(request, exc.message, messages.ERROR)

    def delete_model(self, request: HttpRequest, obj: LearnedPattern) -> None:
        pattern_delete(pattern=obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[LearnedPattern]) -> None:
        for pattern in queryset:
            pattern_delete(pattern=pattern)


@admin.register(RunQuality)
class RunQualityAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = ["quality", "run", "agent", "score_percent", "human_mark", "scored_at"]
    list_display_links = ["quality"]
    quality = id_column("Quality", ordering="scored_at")
    list_filter = ["human_mark", AGENT_FILTER]
    list_select_related = ["agent", "execution"]
    date_hierarchy = "scored_at"
    signals_pretty = json_display("signals", "Signals")
    fields = [
        "execution", "agent", "score", "threshold", "signals_pretty", "judge_score",
        "judge_verdict", "judge_reason", "human_mark", "human_note", "marked_by", "marked_at",
        "pattern", "scored_at",
    ]  # fmt: skip

    @admin.display(description="Run")
    def run(self, obj: RunQuality) -> SafeString:
        return link(obj.execution, str(obj.execution_id)[:8])

    @admin.display(description="Score", ordering="score")
    def score_percent(self, obj: RunQuality) -> str:
        return f"{obj.score:.0%}"

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "mark/<path:execution_id>/<str:mark>/",
                self.admin_site.admin_view(self.mark_view),
                name="memory_runquality_mark",
            ),
            *super().get_urls(),
        ]

    def mark_view(self, request: HttpRequest, execution_id: str, mark: str) -> HttpResponse:
        """GET: what marking the run does, and the confirm button. POST: mark it, back to the
        run's page."""
        if request.method not in ("GET", "POST"):
            return HttpResponseNotAllowed(["GET", "POST"])
        if not (self.has_module_permission(request) and self._can_write(request)):
            raise PermissionDenied
        if mark not in (HumanMark.GOOD, HumanMark.BAD):
            raise Http404("No such mark.")
        execution = self._execution(request, execution_id)
        run_url = reverse("admin:agents_execution_change", args=[execution.pk])
        if request.method == "POST":
            try:
                row = _mark(execution, mark, request)
            except ApplicationError as exc:
                return HttpResponseBadRequest(exc.message)
            self.message_user(
                request, f"Run marked {mark} (quality {row.score:.0%}).", messages.SUCCESS
            )
            return HttpResponseRedirect(run_url)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Mark run {execution.pk} {mark}?",
            "mark": mark,
            "execution": execution,
            "row": RunQuality.objects.filter(execution_id=execution.pk).first(),
            "ended": execution.is_terminal,
            "run_url": run_url,
        }
        return TemplateResponse(request, "memory/learning/mark_confirm.html", context)

    def _execution(self, request: HttpRequest, execution_id: str) -> Execution:
        runs = Execution.objects.all()
        agency = request_agency(request)
        if agency is not None:
            runs = runs.filter(agency=agency)
        elif not request.user.is_superuser:
            raise Http404("No such run.")
        try:
            execution = runs.filter(pk=uuid.UUID(execution_id)).first()
        except ValueError:  # a malformed id is the same not-found
            execution = None
        if execution is None:
            raise Http404("No such run.")
        return execution


def _mark(execution: Execution, mark: str, request: HttpRequest) -> RunQuality:
    from memory.learning.services import quality_mark  # noqa: PLC0415 - one entry point

    note = str(request.POST.get("note", ""))
    return quality_mark(execution=execution, mark=mark, note=note, user=request.user)


@admin.register(Investigation)
class InvestigationAdmin(ReadOnlyAdminMixin, AgencyScopedAdmin):
    empty_state = EmptyState(
        "No investigation yet",
        "When a tool returns nothing, or an error that contradicts the task, a run may spend "
        "extra steps finding out why before it answers; each such investigation is listed here "
        "with what it found. An agent investigates only if its Flow, teams and learning tab "
        "grants it investigation steps (0 by default).",
        link_label="Agents",
        link_url_name="admin:agents_agent_changelist",
    )
    list_display = [
        "investigation", "run", "agent", "tool_name", "trigger", "steps_used",
        "steps_granted", "outcome", "created_at",
    ]  # fmt: skip
    list_display_links = ["investigation"]
    investigation = id_column("Investigation")
    list_filter = ["trigger", "outcome", AGENT_FILTER]
    list_select_related = ["agent", "execution"]
    date_hierarchy = "created_at"
    search_fields = ["tool_name", "findings"]
    tool_result_pretty = json_display("tool_result", "Tool result")
    fields = [
        "execution", "agent", "tool_name", "tool_call_id", "trigger", "tool_result_pretty",
        "started_at_step", "steps_granted", "steps_used", "findings", "outcome", "finished_at",
        "created_at",
    ]  # fmt: skip

    @admin.display(description="Run")
    def run(self, obj: Investigation) -> SafeString:
        return link(obj.execution, str(obj.execution_id)[:8])


# The run page: the run's quality score, its mark, patterns and investigations.
panels.RUN_PANELS.register(
    panels.RunPanel(
        order=30, name="quality_panel", title="Quality", label="Quality", render=quality_panel
    )
)
# The agent page: its quality over the last days and its learned patterns, above the settings.
panels.AGENT_PANELS.register(
    panels.AgentPanel(
        order=10,
        name="learning_display",
        label="Quality and learning",
        before="learning_enabled",
        render=agent_quality_panel,
    )
)
