"""The deploy gate in the admin (issue 28): the gates list and form (Evaluations -> Deploy
gates, or "Set a deploy gate" on the agent page), checked by the service's own rules
(evals.services.gate), and the agent page's "Deploy gate and tests" panel: the gate, the
version waiting for it (with its progress) or the one that failed it (its failed cases, a link
to the experiment), and "Test this draft against a dataset", which runs an experiment on the
editor's unsaved configuration (evals/admin_draft.py)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count, Q
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agents.admin import panels
from agents.models import Agent, AgentVersion
from core.admin_empty import EmptyState
from core.admin_scoping import AgencyScopedAdmin
from core.exceptions import ApplicationError
from evals.admin_draft import test_draft
from evals.models import (
    Dataset,
    DeployGate,
    Experiment,
    ExperimentKind,
    ExperimentStatus,
    ResultStatus,
)
from evals.services.gate import deploy_gate_set, deploy_gate_validate

_LINK = "text-primary-600 dark:text-primary-500"
_SUBTLE = "text-font-subtle-light dark:text-font-subtle-dark"
DRAFT_DATASET = "_draft_dataset"  # the panel's picker, posted with the agent form


class DeployGateForm(ModelForm[DeployGate]):
    class Meta:
        model = DeployGate
        fields = ["agent", "dataset", "min_pass_rate", "is_active"]
        labels = {"min_pass_rate": "Pass rate needed"}
        help_texts = {
            "dataset": "A dataset of this agent, or of the agency, with at least one case.",
            "min_pass_rate": "From 0 to 1: 0.9 lets a version through when 90 % of the cases pass.",
            "is_active": "Off: a saved change is current at once, as without a gate.",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        agent = data.get("agent")
        if agent is not None and "min_pass_rate" in data:
            try:
                deploy_gate_validate(
                    agent=agent, dataset=data.get("dataset"), min_pass_rate=data["min_pass_rate"]
                )
            except ApplicationError as exc:
                for field, problems in exc.extra.get("fields", {}).items():
                    self.add_error(field, problems)
        return data


@admin.register(DeployGate)
class DeployGateAdmin(AgencyScopedAdmin):
    empty_state = EmptyState(
        "No deploy gate yet",
        "A deploy gate keeps an agent's new version from becoming current until it passes "
        "a dataset's test cases. Add one, or open an agent and follow 'Set a deploy gate'.",
    )
    form = DeployGateForm
    list_display = ["agent", "dataset", "threshold", "is_active"]
    list_select_related = ["agent", "dataset"]
    search_fields = ["agent__name", "dataset__name"]

    @admin.display(description="Pass rate needed", ordering="min_pass_rate")
    def threshold(self, obj: DeployGate) -> str:
        return f"{obj.min_pass_rate:.0%}"

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {**super().get_changeform_initial_data(request), "min_pass_rate": "0.9"}

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ["agent"] if obj is not None else []  # one gate per agent: change it, not move

    def save_model(
        self, request: HttpRequest, obj: DeployGate, form: ModelForm[Any], change: bool
    ) -> None:
        data = form.cleaned_data
        saved = deploy_gate_set(
            agent=obj.agent,
            dataset=data["dataset"],
            min_pass_rate=data["min_pass_rate"],
            is_active=data.get("is_active", True),
        )
        obj.pk, obj.agency_id, obj._state.adding = saved.pk, saved.agency_id, False
        obj.created_at, obj.updated_at = saved.created_at, saved.updated_at

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.test_draft_view)
        mine = [path("test-draft/<str:agent_id>/", view, name="evals_deploygate_test_draft")]
        return [*mine, *super().get_urls()]

    def test_draft_view(self, request: HttpRequest, agent_id: str) -> HttpResponse:
        return test_draft(self, request, agent_id, dataset_field=DRAFT_DATASET)


def _experiment_link(experiment: Experiment, text: str) -> SafeString:
    url = reverse("admin:evals_experiment_change", args=[experiment.pk])
    return format_html('<a href="{}" class="{}">{}</a>', url, _LINK, text)


def _gate_line(agent: Agent, gate: DeployGate | None) -> SafeString:
    if gate is None:
        url = reverse("admin:evals_deploygate_add") + f"?agent={agent.pk}"
        return format_html(
            'No deploy gate: a saved change is current at once. <a href="{}" class="{}">'
            "Set a deploy gate</a>",
            url,
            _LINK,
        )
    url = reverse("admin:evals_deploygate_change", args=[gate.pk])
    state = "" if gate.is_active else " (off)"
    return format_html(
        'Deploy gate{}: a new version becomes current once it passes {} of "{}". '
        '<a href="{}" class="{}">Change</a>',
        state,
        f"{gate.min_pass_rate:.0%}",
        gate.dataset.name,
        url,
        _LINK,
    )


def _waiting_line(agent: Agent) -> SafeString | str:
    """The newest version not current with its gate experiment: waiting, or failed."""
    latest = AgentVersion.objects.filter(agent_id=agent.pk).order_by("-number").first()
    current = agent.current_version.number if agent.current_version else 0
    if latest is None or latest.number <= current:
        return ""
    experiment = (
        Experiment.objects.filter(agent_version=latest, kind=ExperimentKind.GATE)
        .annotate(done=Count("results", filter=~Q(results__status=ResultStatus.RUNNING)))
        .order_by("-created_at")
        .first()
    )
    if experiment is None:
        return format_html("Version {} is not current (version {} is).", latest.number, current)
    if experiment.status == ExperimentStatus.RUNNING:
        return format_html(
            "Version {} is awaiting the gate: {} of {} cases done ({}). Version {} stays "
            "current until it passes.",
            latest.number,
            experiment.done,
            experiment.case_count,
            _experiment_link(experiment, "see the experiment"),
            current,
        )
    failed = experiment.results.exclude(status=ResultStatus.PASSED).order_by("case__position")
    names = format_html_join(", ", "{}", ((r.case.name,) for r in failed.select_related("case")))
    return format_html(
        '<span class="text-red-600 dark:text-red-500">Version {} failed the deploy gate</span>: '
        "{} of {} cases passed. Failed: {} ({}). Version {} stays current.",
        latest.number,
        experiment.passed_count,
        experiment.case_count,
        names,
        _experiment_link(experiment, "see the experiment"),
        current,
    )


def _draft_form(agent: Agent) -> SafeString:
    datasets = Dataset.objects.filter(agency_id=agent.agency_id).filter(
        Q(agent_id=agent.pk) | Q(agent__isnull=True)
    )
    options = format_html_join(
        "", '<option value="{}">{}</option>', ((d.pk, d.name) for d in datasets.order_by("name"))
    )
    if not options:
        return format_html(
            '<p class="{}">No dataset for this agent yet: a draft is tested against one.</p>',
            _SUBTLE,
        )
    url = reverse("admin:evals_deploygate_test_draft", args=[agent.pk])
    return format_html(
        '<div class="flex flex-wrap items-center gap-2 mt-2">'
        '<label for="id_{name}">Test this draft against</label>'
        '<select id="id_{name}" name="{name}" class="border border-base-200 rounded-default '
        'px-2 py-1 bg-white dark:bg-base-900 dark:border-base-700 max-w-full">{options}</select>'
        '<button type="submit" formaction="{url}" formnovalidate class="border border-base-200 '
        'rounded-default px-3 py-1 font-medium dark:border-base-700">Test this draft</button>'
        "</div>"
        '<p class="{subtle} mt-1">Runs the dataset on the form as it is now, unsaved: nothing '
        "is saved to the agent and no version is made.</p>",
        name=DRAFT_DATASET,
        options=options,
        url=url,
        subtle=_SUBTLE,
    )


def gate_panel(agent: Agent) -> SafeString:
    gate = DeployGate.objects.select_related("dataset").filter(agent_id=agent.pk).first()
    return format_html(
        '<div style="overflow-wrap: anywhere"><p>{}</p><p class="mt-1">{}</p>{}</div>',
        _gate_line(agent, gate),
        _waiting_line(agent),
        _draft_form(agent),
    )


panels.AGENT_PANELS.register(
    panels.AgentPanel(
        order=10,
        name="deploy_gate_display",
        label="Deploy gate and tests",
        before="name",
        render=gate_panel,
    )
)
