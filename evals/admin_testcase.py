"""Test cases in the admin: written here by hand (the dataset picked), saved from a run, imported
over the API. A dataset version never changes, so every write goes through the services as a
new version of the dataset: a case added or edited here is saved into a new version (the one
shown is left as it was), and deleting a case makes a new version without it (version N and the
experiments that ran it keep it). A case of an older version opens read only, saying which
version is current and linking the case there."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.options import ActionLocation
from django.db.models import Model
from django.forms import ModelForm
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core.admin_empty import EmptyState
from core.admin_scoping import AgencyScopedAdmin
from evals.admin_case import CASE_FIELDS, TestCaseForm
from evals.models import Dataset, TestCase
from evals.services.datasets import dataset_case_add, dataset_case_change, dataset_case_remove

_LINK = "text-primary-600 dark:text-primary-500"


def is_current(case: TestCase) -> bool:
    """Whether ``case`` is of its dataset's current version (an older version's never changes:
    a change or a removal makes a new version from the current one)."""
    return case.version.dataset.current_version_id == case.version_id


def older_version_note(case: TestCase) -> SafeString:
    """An older version's case: read only, and where its current self is (if it still is)."""
    dataset = case.version.dataset
    current = TestCase.objects.filter(version_id=dataset.current_version_id, key=case.key).first()
    if current is not None:
        where = reverse("admin:evals_testcase_change", args=[current.pk])
        link = "open it in the current version"
    else:
        where = reverse("admin:evals_dataset_change", args=[dataset.pk])
        link = "the current version no longer has it (the dataset's page)"
    number = dataset.current_version.number if dataset.current_version else "-"
    return format_html(
        "This case belongs to version {} of {}, and a version never changes: it is shown "
        'read only. The current version is {}: <a href="{}" class="{}">{}</a>.',
        case.version.number,
        dataset.name,
        number,
        where,
        _LINK,
        link,
    )


def removal_summary(case: TestCase) -> str:
    """What deleting ``case`` in the admin does, said on the confirmation page."""
    dataset = case.version.dataset
    return (
        f"{case.name}: left out of a new version of {dataset.name} (version "
        f"{case.version.number}, and the experiments that ran it, keep it)"
    )


@admin.register(TestCase)
class TestCaseAdmin(AgencyScopedAdmin):
    empty_state = EmptyState(
        "No test case yet",
        "A test case is what a run started with and what it must do. Save one from an ended "
        "run's page (Save as a test case), write one here into a dataset, or import JSONL "
        "over the API.",
        "Datasets",
        "admin:evals_dataset_changelist",
    )
    form = TestCaseForm
    list_display = ["name", "version", "position", "updated_at"]
    list_select_related = ["version__dataset__current_version"]
    search_fields = ["name", "input", "version__dataset__name"]
    fields = ["version", "key", *CASE_FIELDS, "saved_from"]
    readonly_fields = ["version", "key", "saved_from"]

    def get_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        if obj is None:
            return ["dataset", *CASE_FIELDS]
        return self.fields if is_current(obj) else ["older_version", *self.fields]  # type: ignore[arg-type]

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        return [*self.readonly_fields, "older_version"] if obj is not None else []

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        # An older version's case is read only (saving it would change no current case).
        current = obj is None or is_current(obj)  # type: ignore[arg-type]
        return current and super().has_change_permission(request, obj)

    def get_form(
        self, request: HttpRequest, obj: Model | None = None, change: bool = False, **kwargs: Any
    ) -> Any:
        form = super().get_form(request, obj, change, **kwargs)
        # The datasets the dataset admin shows this request (its agency's).
        datasets = self.admin_site.get_model_admin(Dataset).get_queryset(request)
        return type(form.__name__, (form,), {"datasets": datasets})

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        # Deleting a current case makes a new version without it (delete_model).
        current = obj is None or is_current(obj)  # type: ignore[arg-type]
        return current and super().has_delete_permission(request, obj)

    def get_actions(
        self, request: HttpRequest, action_location: ActionLocation = ActionLocation.CHANGE_LIST
    ) -> Any:
        actions = super().get_actions(request, action_location)
        actions.pop("delete_selected", None)  # one case at a time, from its page
        return actions

    @admin.display(description="Older version")
    def older_version(self, obj: TestCase) -> SafeString:
        return older_version_note(obj)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> Any:
        # Nothing is deleted: the case is left out of a new version (delete_model).
        return [removal_summary(case) for case in objs], {}, set(), []

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        dataset = obj.version.dataset
        version = dataset_case_remove(dataset=dataset, key=str(obj.key), user_id=request.user.pk)
        messages.info(
            request,
            f"Saved as version {version.number} of {dataset.name}, without {obj.name} "
            f"(version {obj.version.number} keeps it).",
        )

    @admin.display(description="Saved from run")
    def saved_from(self, obj: TestCase) -> SafeString | str:
        if obj.source_execution_id is None:
            return "-"
        url = reverse("admin:agents_execution_change", args=[obj.source_execution_id])
        return format_html(
            '<a href="{}" class="{}">{}</a>', url, _LINK, str(obj.source_execution_id)[:8]
        )

    def save_model(
        self, request: HttpRequest, obj: Any, form: ModelForm[Any], change: bool
    ) -> None:
        """Through the services (the form has checked the case by their rules): a new version
        of the dataset, the page going on with its copy of the case."""
        assert isinstance(form, TestCaseForm)
        if change:
            dataset = obj.version.dataset
            changes = {name: form.cleaned_data[name] for name in form.changed_data}
            version = dataset_case_change(
                dataset=dataset, key=str(obj.key), changes=changes, user_id=request.user.pk
            )
            new = TestCase.objects.get(version=version, key=obj.key)
        else:
            dataset = form.cleaned_data["dataset"]
            version = dataset_case_add(dataset=dataset, case=form.case(), user_id=request.user.pk)
            new = TestCase.objects.filter(version=version).order_by("-position")[0]
        obj.pk, obj.key, obj.version = new.pk, new.key, version  # the old case is unchanged
        obj._state.adding = False
        messages.info(request, f"Saved as version {version.number} of {dataset.name}.")
