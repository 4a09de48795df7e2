"""The agent editor's "Test this draft against a dataset": the editor's form, posted as it is
(unsaved) to this view, is validated as a save would validate it (the agent admin's own form,
whose clean runs the agent services' checks), and an experiment (kind "draft") runs the
dataset on that configuration: nothing is saved to the agent and no version is made; the
configuration is kept in the experiment's ``draft_config``, which evals/run_plugin.py puts on
the runs' agent. A draft that is not valid gets a page naming each fault and a way back to the
form as it was."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from agents.models import Agent
from agents.services.versions import config_of
from core.exceptions import ApplicationError
from evals.models import Dataset, ExperimentKind
from evals.services.experiments import experiment_start


def _faults(form: Any) -> list[str]:
    faults = []
    for name, errors in form.errors.items():
        field = form.fields.get(name)
        label = str(field.label) if field is not None and field.label else name
        faults += [f"{label}: {error}" if name != "__all__" else str(error) for error in errors]
    return faults


def _dataset(agent: Agent, picked: str) -> Dataset | None:
    try:
        pk = uuid.UUID(picked)
    except ValueError:
        return None
    found = Dataset.objects.filter(agency_id=agent.agency_id, pk=pk)
    return found.select_related("current_version").first()


def test_draft(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, agent_id: str, *, dataset_field: str
) -> HttpResponse:
    """POST only (the agent editor's form). Starts the experiment and opens its page."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    agent_admin = model_admin.admin_site._registry[Agent]
    agent = agent_admin.get_object(request, agent_id)  # None for another agency's agent
    if agent is None:
        raise PermissionDenied
    if not agent_admin.has_change_permission(request, agent):
        raise PermissionDenied
    form = agent_admin.get_form(request, agent, change=True)(
        request.POST, request.FILES, instance=agent
    )
    faults = [] if form.is_valid() else _faults(form)
    # The form's values, on its instance in memory only (its clean ran the services' checks).
    draft = config_of(form.instance) if not faults else {}
    fresh = Agent.objects.get(pk=agent.pk)  # the saved agent: its switches, not the draft's
    dataset = _dataset(fresh, str(request.POST.get(dataset_field, "")))
    if dataset is None:
        faults.append("Pick a dataset to test the draft against.")
    if not faults:
        assert dataset is not None
        assert dataset.current_version is not None
        try:
            with transaction.atomic():
                experiment = experiment_start(
                    agent=fresh,
                    dataset_version=dataset.current_version,
                    user_id=request.user.pk,
                    kind=ExperimentKind.DRAFT,
                    draft_config=draft,
                )
        except ApplicationError as exc:
            faults.append(exc.message)
        else:
            model_admin.message_user(
                request,
                f"Testing the draft of {fresh.name} against {dataset.name}: "
                f"{experiment.case_count} case(s). Nothing was saved to the agent.",
            )
            return HttpResponseRedirect(
                reverse("admin:evals_experiment_change", args=[experiment.pk])
            )
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": agent_admin.opts,
        "app_label": agent_admin.opts.app_label,
        "title": f"The draft of {fresh.name} cannot be tested yet",
        "original": fresh,
        "faults": faults,
        "agent_url": reverse("admin:agents_agent_change", args=[fresh.pk]),
    }
    return TemplateResponse(request, "admin/evals/draft_invalid.html", context, status=400)
