"""The dataset page's "Run experiment": a form that picks the agent (the dataset's own, or one of
the agency's for an agency dataset) and its version (the current one or an older number), starts
the experiment through the same service as the API and ``manage.py eval run``
(evals.services.experiments.experiment_start), and opens the experiment's page, which shows its
progress and each case's result."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from unfold.widgets import UnfoldAdminIntegerFieldWidget, UnfoldAdminSelectWidget

from agents.models import Agent, AgentVersion
from core.exceptions import ApplicationError
from evals.models import Dataset
from evals.services.experiments import experiment_start

CURRENT = ""


class RunExperimentForm(forms.Form):
    agent = forms.ModelChoiceField(queryset=Agent.objects.none(), widget=UnfoldAdminSelectWidget)
    version = forms.CharField(
        required=False,
        label="Agent version",
        widget=UnfoldAdminIntegerFieldWidget,
        help_text="Blank: the agent's current version; or an older version's number.",
    )

    def __init__(self, *args: Any, agents: QuerySet[Agent], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["agent"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = agents
        if len(agents) == 1:  # the dataset's agent: its versions to choose from
            agent = agents[0]
            field.initial = agent.pk
            numbers = AgentVersion.objects.filter(agent=agent).values_list("number", flat=True)
            current = next((v.number for v in [agent.current_version] if v is not None), None)
            self.fields["version"] = forms.TypedChoiceField(
                label="Agent version",
                required=False,
                coerce=str,
                empty_value=CURRENT,
                choices=[(CURRENT, f"Current (version {current})" if current else "Current")]
                + [(str(n), f"Version {n}") for n in numbers if n != current],
                widget=UnfoldAdminSelectWidget,
            )

    def clean_version(self) -> int | None:
        value = str(self.cleaned_data.get("version") or "").strip()
        if not value:
            return None
        if not value.isdigit() or int(value) < 1:
            raise forms.ValidationError("A version number (1, 2, ...) or blank.")
        return int(value)


def run_experiment(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, dataset: Dataset
) -> HttpResponse:
    """Precondition: ``dataset`` fetched through the admin (the request's agency); the action
    has checked the permission."""
    agents = Agent.objects.filter(agency_id=dataset.agency_id).select_related("current_version")
    if dataset.agent_id is not None:
        agents = agents.filter(pk=dataset.agent_id)
    form = RunExperimentForm(request.POST or None, agents=agents.order_by("name"))
    version = dataset.current_version
    if request.method == "POST" and form.is_valid() and version is not None:
        try:
            with transaction.atomic():
                experiment = experiment_start(
                    agent=form.cleaned_data["agent"],
                    dataset_version=version,
                    version_number=form.cleaned_data["version"],
                    user_id=request.user.pk,
                )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            messages.success(request, f"Experiment started: {experiment.case_count} case(s).")
            url = reverse("admin:evals_experiment_change", args=[experiment.pk])
            return HttpResponseRedirect(url)
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "app_label": model_admin.opts.app_label,
        "title": "Run experiment",
        "form": form,
        "dataset": dataset,
        "case_count": version.cases.count() if version is not None else 0,
        "dataset_url": reverse("admin:evals_dataset_change", args=[dataset.pk]),
    }
    return TemplateResponse(request, "admin/evals/run_experiment.html", context, status=200)
