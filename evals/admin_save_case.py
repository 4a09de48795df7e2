"""The run page's "Save as a test case" (its button: evals/templates/evals/save_case_tool.html,
included by the run page's header actions): a form that picks one of the datasets the run may go
into (its agent's, or the agency's) and a name, and saves the case as a new version of it."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from unfold.widgets import UnfoldAdminSelectWidget, UnfoldAdminTextInputWidget

from agents.models import Execution
from core.exceptions import ApplicationError
from core.selectors import access_object
from evals.models import Dataset, TestCase
from evals.services.cases import case_save_from_execution


class SaveCaseForm(forms.Form):
    dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.none(), widget=UnfoldAdminSelectWidget
    )
    name = forms.CharField(
        max_length=200,
        required=False,
        widget=UnfoldAdminTextInputWidget,
        help_text="The run's instruction when left blank.",
    )

    def __init__(self, *args: Any, datasets: QuerySet[Dataset], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["dataset"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = datasets


def save_case(
    model_admin: admin.ModelAdmin[Any],
    request: HttpRequest,
    execution_id: str,
    *,
    runs: QuerySet[Execution],
    datasets: QuerySet[Dataset],
) -> HttpResponse:
    """``runs`` and ``datasets``: those of the request's agency (the admin's scoping)."""
    if not model_admin.has_add_permission(request):
        raise PermissionDenied
    execution = access_object(runs.select_related("agent"), agency=None, id=execution_id)
    datasets = datasets.filter(
        Q(agent=execution.agent_id) | Q(agent__isnull=True), agency=execution.agency_id
    )
    form = SaveCaseForm(request.POST or None, datasets=datasets)
    if request.method == "POST" and form.is_valid():
        dataset = form.cleaned_data["dataset"]
        try:
            version = case_save_from_execution(
                execution=execution,
                dataset=dataset,
                name=form.cleaned_data["name"],
                user_id=request.user.pk,
            )
        except ApplicationError as exc:
            form.add_error(None, exc.message)
        else:
            case = TestCase.objects.filter(version=version).order_by("-position").first()
            messages.success(
                request, f"Saved as a test case: {dataset.name}, version {version.number}."
            )
            assert case is not None
            return HttpResponseRedirect(reverse("admin:evals_testcase_change", args=[case.pk]))
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "app_label": model_admin.opts.app_label,
        "title": "Save as a test case",
        "form": form,
        "execution": execution,
        "no_dataset": not datasets.exists(),
        "add_dataset_url": reverse("admin:evals_dataset_add"),
        "run_url": reverse("admin:agents_execution_change", args=[execution.pk]),
    }
    return TemplateResponse(request, "admin/evals/save_case.html", context)
