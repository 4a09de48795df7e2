"""Canary versions in the admin (README "Canary versions"): Evaluations -> Canaries, whose add
page starts one (the agent page's Canary panel links to it with the agent chosen), and a
canary's page with both arms' figures and, while it runs, Promote and Stop. Every change goes
through evals.services.canaries, as the API does. The agent page's panel shows the running
canary's figures (or the last one's outcome)."""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from unfold.widgets import (
    UnfoldAdminIntegerFieldWidget,
    UnfoldAdminSelectWidget,
    UnfoldAdminTextInputWidget,
)

from agents.admin import panels
from agents.models import Agent, AgentVersion
from core import notices
from core.admin_empty import EmptyState
from core.admin_scoping import AgencyScopedAdmin, request_agency
from core.exceptions import ApplicationError
from evals.canary_figures import canary_figures, figure_rows
from evals.models import Canary, CanaryMetric, CanaryStatus
from evals.services.canaries import canary_promote, canary_start, canary_stop

_LINK = "text-primary-600 dark:text-primary-500"


def figures_table(figures: dict[str, Any], canary: Canary) -> SafeString:
    """Both arms side by side; scrolls inside itself on a narrow screen."""
    rows = format_html_join(
        "",
        '<tr><th scope="row" style="text-align:left;padding:4px 12px 4px 0;font-weight:500">'
        '{}</th><td style="padding:4px 12px">{}</td><td style="padding:4px 0 4px 12px">{}</td>'
        "</tr>",
        figure_rows(figures),
    )
    return format_html(
        '<div class="canary-figures" style="overflow-x:auto;max-width:100%">'
        '<table style="border-collapse:collapse;min-width:16rem"><thead><tr>'
        '<th scope="col"></th><th scope="col" style="text-align:left;padding:4px 12px">'
        "Stable (v{})</th>"
        '<th scope="col" style="text-align:left;padding:4px 0 4px 12px">Candidate (v{})</th>'
        "</tr></thead><tbody>{}</tbody></table></div>",
        canary.stable.number,
        canary.candidate.number,
        rows,
    )


def _summary(canary: Canary) -> str:
    threshold = format(Decimal(canary.threshold).normalize(), "f")
    verb = "takes" if canary.status == CanaryStatus.RUNNING else "took"
    rule = f", promoted after {canary.promote_after} candidate runs" if canary.promote_after else ""
    return (
        f"Version {canary.candidate.number} {verb} {canary.share} % of new runs, version "
        f"{canary.stable.number} the rest; rolls back on {canary.get_metric_display().lower()} "
        f"(threshold {threshold}, at least {canary.min_runs} ended runs per arm){rule}."
    )


def agent_canary_panel(agent: Agent) -> SafeString:
    """The agent page's Canary panel."""
    canary = (
        Canary.objects.filter(agent=agent)
        .select_related("candidate", "stable")
        .order_by("-created_at")
        .first()
    )
    start = reverse("admin:evals_canary_add") + f"?agent={agent.pk}"
    if canary is None or canary.status != CanaryStatus.RUNNING:
        last = (
            format_html(
                'Last canary: <a href="{}" class="{}">version {}, {}</a>. ',
                reverse("admin:evals_canary_change", args=[canary.pk]),
                _LINK,
                canary.candidate.number,
                canary.get_status_display().lower(),
            )
            if canary is not None
            else "No canary yet: try a version on a share of new runs before it becomes current. "
        )
        return format_html(
            '<p>{}<a href="{}" class="{}">Start a canary</a></p>', last, start, _LINK
        )
    return format_html(
        '<p class="mb-2">{} <a href="{}" class="{}">Open the canary (promote or stop)</a></p>{}',
        _summary(canary),
        reverse("admin:evals_canary_change", args=[canary.pk]),
        _LINK,
        figures_table(canary_figures(canary), canary),
    )


class CanaryStartForm(forms.Form):
    agent = forms.ModelChoiceField(queryset=Agent.objects.none(), widget=UnfoldAdminSelectWidget)
    candidate = forms.IntegerField(
        label="Candidate version",
        min_value=1,
        widget=UnfoldAdminIntegerFieldWidget,
        help_text="The number of a version of the agent that is not its current one.",
    )
    share = forms.IntegerField(
        label="Share of new runs (%)",
        initial=10,
        widget=UnfoldAdminIntegerFieldWidget,
        help_text="1 to 99: the candidate's share; the rest stay on the current version.",
    )
    metric = forms.ChoiceField(
        label="Roll back on",
        choices=CanaryMetric.choices,
        initial=CanaryMetric.FAILURE_RATE,
        widget=UnfoldAdminSelectWidget,
    )
    threshold = forms.CharField(
        initial="0.05",
        widget=UnfoldAdminTextInputWidget,
        help_text="Failure rate: how far above stable's, in points (0.05 = 5 points). Cost or "
        "steps: how far above stable's mean, as a fraction (0.25 = 25 %).",
    )
    min_runs = forms.IntegerField(
        label="Minimum runs per arm",
        initial=20,
        widget=UnfoldAdminIntegerFieldWidget,
        help_text="Ended runs each version needs before a rollback can be decided (at least 5).",
    )
    promote_after = forms.IntegerField(
        label="Promote after (candidate runs)",
        required=False,
        widget=UnfoldAdminIntegerFieldWidget,
        help_text="Blank: promote by hand only.",
    )

    def __init__(self, *args: Any, agents: Any, agent: Agent | None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["agent"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = agents
        if agent is not None:
            field.initial = agent.pk
            numbers = (
                AgentVersion.objects.filter(agent=agent)
                .exclude(id__in=[agent.current_version_id] if agent.current_version_id else [])
                .order_by("-number")
                .values_list("number", flat=True)
            )
            self.fields["candidate"] = forms.TypedChoiceField(
                label="Candidate version",
                coerce=int,
                choices=[(n, f"Version {n}") for n in numbers],
                widget=UnfoldAdminSelectWidget,
                help_text="A version that is not the agent's current one "
                f"(version {agent.current_version.number if agent.current_version else '-'}).",
            )


class CanaryAdmin(AgencyScopedAdmin):
    empty_state = EmptyState(
        "No canary yet",
        "A canary sends a share of an agent's new runs to another of its versions, shows both "
        "versions' figures side by side, and rolls back by itself when the candidate does "
        "worse. Start one from an agent's page (Runs & stats -> Canary).",
    )
    list_display = ["agent", "candidate_version", "status", "share", "metric", "created_at"]
    list_filter = ["status"]
    list_select_related = ["agent", "candidate", "stable"]
    fields = (
        "agent", "status", "summary", "figures_display", "reason", "created_at", "ended_at",
        "promoted_version",
    )  # fmt: skip
    readonly_fields = fields
    change_form_template = "admin/evals/canary/change_form.html"

    @admin.display(description="Candidate")
    def candidate_version(self, obj: Canary) -> str:
        return f"Version {obj.candidate.number} (stable {obj.stable.number})"

    @admin.display(description="Canary")
    def summary(self, obj: Canary) -> str:
        return _summary(obj)

    @admin.display(description="Figures")
    def figures_display(self, obj: Canary) -> SafeString:
        running = obj.status == CanaryStatus.RUNNING
        return figures_table(canary_figures(obj) if running else obj.figures, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # the record of what was tried stays

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/promote/", wrap(self.promote_view), name="evals_canary_promote"),
            path("<path:object_id>/stop/", wrap(self.stop_view), name="evals_canary_stop"),
            *super().get_urls(),
        ]

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        if not self.has_add_permission(request):
            return super().add_view(request, form_url, extra_context)  # the admin's refusal
        agency = request_agency(request)
        agents = Agent.objects.select_related("current_version").order_by("name")
        if agency is not None:
            agents = agents.filter(agency=agency)
        wanted = request.GET.get("agent", "")
        chosen = agents.filter(pk=wanted).first() if _is_uuid(wanted) else None
        form = CanaryStartForm(request.POST or None, agents=agents, agent=chosen)
        if request.method == "POST" and form.is_valid():
            agent = form.cleaned_data["agent"]
            try:
                with transaction.atomic():
                    candidate = AgentVersion.objects.filter(
                        agent=agent, number=form.cleaned_data["candidate"]
                    ).first()
                    if candidate is None:
                        raise ApplicationError("invalid", "No such version of this agent.")
                    canary = canary_start(
                        agent=agent,
                        candidate=candidate,
                        share=form.cleaned_data["share"],
                        metric=form.cleaned_data["metric"],
                        threshold=form.cleaned_data["threshold"],
                        min_runs=form.cleaned_data["min_runs"],
                        promote_after=form.cleaned_data["promote_after"],
                        user_id=request.user.pk,
                    )
            except ApplicationError as exc:
                field = exc.extra.get("field")
                form.add_error(field if field in form.fields else None, exc.message)
            else:
                messages.success(request, f"Canary started: {_summary(canary)}")
                return HttpResponseRedirect(reverse("admin:evals_canary_change", args=[canary.pk]))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "title": "Start a canary",
            "form": form,
            "agent": chosen,
        }
        return TemplateResponse(request, "admin/evals/canary/start.html", context)

    def _act(self, request: HttpRequest, object_id: str, verb: str) -> HttpResponse:
        canary = self.get_object(request, object_id)
        if canary is None:
            raise Http404("No such canary.")
        url = reverse("admin:evals_canary_change", args=[canary.pk])
        if request.method != "POST" or not self.may_act(request):
            return HttpResponseRedirect(url)
        try:
            if verb == "promote":
                canary_promote(canary=canary, user_id=request.user.pk)
                messages.success(request, "Promoted: the candidate's configuration is current.")
            else:
                canary_stop(canary=canary, user_id=request.user.pk)
                messages.success(request, "Stopped: new runs go to the current version.")
        except ApplicationError as exc:
            messages.error(request, exc.message)
        return HttpResponseRedirect(url)

    def promote_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return self._act(request, object_id, "promote")

    def stop_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return self._act(request, object_id, "stop")

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        canary = self.get_object(request, object_id)
        extra = {
            **(extra_context or {}),
            "canary_running": canary is not None and canary.status == CanaryStatus.RUNNING,
            "can_act": self.may_act(request),
        }
        return super().change_view(request, object_id, form_url, extra)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # nothing to edit: promote and stop are actions (may_act)

    def may_act(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request) and self._can_write(request)


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


# How long the inbox shows a rollback.
NOTICE_DAYS = 7


def rollback_notices(agency_id: uuid.UUID) -> list[notices.Notice]:
    """The staff inbox's notices: canaries that rolled back by themselves in the last days."""
    since = timezone.now() - datetime.timedelta(days=NOTICE_DAYS)
    rolled_back = (
        Canary.objects.filter(
            agency_id=agency_id, status=CanaryStatus.ROLLED_BACK, ended_at__gte=since
        )
        .select_related("agent", "candidate")
        .order_by("-ended_at")[:20]
    )
    return [
        notices.Notice(
            title=f"{c.agent.name}: canary of version {c.candidate.number} rolled back",
            text=c.reason,
            url=reverse("admin:evals_canary_change", args=[c.pk]),
            at=c.ended_at or c.created_at,
        )
        for c in rolled_back
    ]


admin.site.register(Canary, CanaryAdmin)
notices.register("canary_rollbacks", rollback_notices)
# The agent page: the canary's figures, in Runs & stats above the versions link's neighbours.
panels.AGENT_PANELS.register(
    panels.AgentPanel(
        order=20,
        name="canary_display",
        label="Canary",
        before="template",
        render=agent_canary_panel,
    )
)
