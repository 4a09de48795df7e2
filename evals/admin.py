"""Evaluations in the admin: datasets (added here; the page lists its current cases and its
versions, and runs an experiment), their immutable versions, test cases (written here by hand,
saved from a run, imported over the API; a case added or edited here is saved as a new version
of its dataset: the one shown is never changed), and experiments with each case's score (read
only: started from a dataset's page, the API or the command, never "added"; the admin has no
add page for them, rather than one that answers 403)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Model, QuerySet
from django.forms import ModelForm
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from unfold.decorators import action
from unfold.enums import ActionVariant

from agents.admin.common import ReadOnlyInline
from agents.models import Execution
from core.admin_empty import EmptyState
from core.admin_scoping import (
    AgencyScopedAdmin,
    ReadOnlyAdminMixin,
    ScopedInlineMixin,
    StackedInline,
    request_agency,
)
from core.exceptions import ApplicationError
from evals import (
    admin_canary,  # noqa: F401 - the canaries' admin and agent page panel
    admin_testcase,  # noqa: F401 - registers the test cases' admin
)
from evals.admin_case import expectations_summary
from evals.admin_compare import compare_url, compare_view
from evals.admin_run import run_experiment
from evals.admin_save_case import save_case
from evals.models import (
    Dataset,
    DatasetVersion,
    Experiment,
    ExperimentResult,
    ExperimentStatus,
    ResultStatus,
    TestCase,
)
from evals.services.datasets import (
    dataset_create,
    export_jsonl,
)

_LINK = "text-primary-600 dark:text-primary-500"
_VERSIONS_SHOWN = 20


class NoAddPageMixin:
    """For rows staff never add by hand: no add URL at all (a 404 like any unknown page), not
    one that answers 403 "Not allowed"."""

    def get_urls(self) -> list[URLPattern]:
        urls: list[URLPattern] = super().get_urls()  # type: ignore[misc]
        return [u for u in urls if not (u.name or "").endswith("_add")]


@admin.register(Dataset)
class DatasetAdmin(AgencyScopedAdmin):
    empty_state = EmptyState(
        "No dataset yet",
        "A dataset groups test cases of an agent. Add one, then save finished runs into it "
        "from their run page (Save as a test case), or import a JSONL file over the API.",
    )
    list_display = ["name", "agent", "version", "case_count", "updated_at"]
    search_fields = ["name", "agent__name"]
    list_select_related = ["agent", "current_version"]
    fields = ["name", "agent", "description", "current_version", "cases_list", "versions_list"]
    readonly_fields = ["current_version", "cases_list", "versions_list"]
    actions = ["export"]
    actions_detail = ["run_experiment", "compare_versions"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        return super().get_queryset(request).annotate(cases=Count("current_version__cases"))

    def get_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        return self.fields if obj is not None else ["name", "agent", "description"]

    def get_readonly_fields(self, request: HttpRequest, obj: Model | None = None) -> Any:
        return [*self.readonly_fields, "agent"] if obj is not None else []

    @admin.display(description="Test cases")
    def cases_list(self, obj: Dataset) -> SafeString:
        """The current version's cases: each a link to its page, with what it expects."""
        cases = TestCase.objects.filter(version_id=obj.current_version_id).order_by("position")
        rows = format_html_join(
            "",
            '<li class="py-1"><a href="{}" class="{}">{}</a>'
            '<div class="text-font-subtle-light dark:text-font-subtle-dark">Expects: {}</div>'
            "</li>",
            (
                (
                    reverse("admin:evals_testcase_change", args=[c.pk]),
                    _LINK,
                    c.name,
                    expectations_summary(c.expectations),
                )
                for c in cases
            ),
        )
        add = reverse("admin:evals_testcase_add") + f"?dataset={obj.pk}"
        empty = "" if rows else "No test case in this version yet. "
        return format_html(
            '<ol class="list-decimal pl-5" style="overflow-wrap: anywhere">{}</ol>'
            '<p class="mt-2">{}<a href="{}" class="{}">Write a test case by hand</a>, or save '
            "one from an ended run's page.</p>",
            rows,
            empty,
            add,
            _LINK,
        )

    @admin.display(description="Versions")
    def versions_list(self, obj: Dataset) -> SafeString:
        versions = obj.versions.annotate(n=Count("cases")).order_by("-number")
        return format_html_join(
            "",
            '<div class="py-0.5"><a href="{}" class="{}">Version {}</a>{}: {}, {} case{}, {}</div>',
            (
                (
                    reverse("admin:evals_datasetversion_change", args=[v.pk]),
                    _LINK,
                    v.number,
                    " (current)" if v.pk == obj.current_version_id else "",
                    v.change_summary or "-",
                    v.n,
                    "" if v.n == 1 else "s",
                    v.created_at.strftime("%b %-d, %Y %H:%M"),
                )
                for v in versions[:_VERSIONS_SHOWN]
            ),
        )

    def has_run_experiment_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_change_permission(request)

    @action(
        description="Run experiment",
        icon="play_arrow",
        variant=ActionVariant.PRIMARY,
        url_path="run-experiment",
        permissions=["run_experiment"],
    )
    def run_experiment(self, request: HttpRequest, object_id: str) -> HttpResponse:
        return run_experiment(self, request, self.get_object(request, object_id))

    @action(description="Compare versions", icon="compare_arrows", url_path="compare")
    def compare_versions(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Its last experiment of each agent version, side by side (evals/admin_compare.py)."""
        dataset = self.get_object(request, object_id)
        if dataset is None:
            raise Http404
        url = reverse("admin:evals_experiment_compare") + f"?dataset={dataset.pk}"
        return HttpResponseRedirect(url)

    @admin.display(description="Version", ordering="current_version__number")
    def version(self, obj: Dataset) -> str:
        return f"v{obj.current_version.number}" if obj.current_version else "-"

    @admin.display(description="Cases", ordering="cases")
    def case_count(self, obj: Any) -> int:
        return int(obj.cases)

    def save_model(
        self, request: HttpRequest, obj: Any, form: ModelForm[Any], change: bool
    ) -> None:
        if change:
            obj.save(update_fields=["name", "description", "updated_at"])
            return
        agency = request_agency(request)
        agency_id = agency.pk if agency is not None else obj.agency_id
        try:
            made = dataset_create(
                agency_id=agency_id,
                name=obj.name,
                agent=obj.agent,
                description=obj.description,
                user_id=request.user.pk,
            )
        except ApplicationError as exc:
            messages.error(request, exc.message)
            raise
        obj.pk, obj.agency_id, obj.current_version_id = (
            made.pk,
            made.agency_id,
            made.current_version_id,
        )
        obj.created_at, obj.updated_at = made.created_at, made.updated_at
        obj._state.adding = False

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.save_case_view)
        mine = [path("save-case/<uuid:execution_id>/", view, name="evals_dataset_save_case")]
        return [*mine, *super().get_urls()]

    def save_case_view(self, request: HttpRequest, execution_id: str) -> HttpResponse:
        agency = request_agency(request)
        runs = Execution.objects.all()
        if not request.user.is_superuser:
            runs = runs.filter(agency=agency) if agency is not None else runs.none()
        return save_case(
            self, request, execution_id, runs=runs, datasets=self.get_queryset(request)
        )

    @admin.action(description="Export the current version as JSONL")
    def export(self, request: HttpRequest, queryset: QuerySet[Dataset]) -> HttpResponse | None:
        found = [d for d in queryset.select_related("current_version") if d.current_version]
        if len(found) != 1:
            self.message_user(request, "Choose one dataset to export.", messages.WARNING)
            return None
        version = found[0].current_version
        assert version is not None
        response = HttpResponse(export_jsonl(version), content_type="application/x-ndjson")
        filename = f"{found[0].name}-v{version.number}.jsonl".replace('"', "")
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response


class CaseInline(ReadOnlyInline):
    model = TestCase
    fields = ["position", "name", "input"]


@admin.register(DatasetVersion)
class DatasetVersionAdmin(NoAddPageMixin, ReadOnlyAdminMixin, AgencyScopedAdmin):
    list_display = ["dataset", "number", "change_summary", "created_at"]
    list_select_related = ["dataset"]
    search_fields = ["dataset__name"]
    fields = readonly_fields = ("dataset", "number", "change_summary", "created_by", "created_at")
    inlines = [CaseInline]


class ResultInline(ScopedInlineMixin, StackedInline):
    """One block per case (its checks read as lines, on a phone too), never edited."""

    model = ExperimentResult
    extra = 0
    can_delete = False
    fields = readonly_fields = ("case", "status", "run", "steps", "tokens", "cost_usd",
                                "latency_ms", "unrecorded_calls", "loops_flagged",
                                "checks_list")  # fmt: skip

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    @admin.display(description="Run")
    def run(self, obj: ExperimentResult) -> SafeString | str:
        if obj.execution_id is None:
            return "-"
        url = reverse("admin:agents_execution_change", args=[obj.execution_id])
        return format_html('<a href="{}" class="{}">{}</a>', url, _LINK, str(obj.execution_id)[:8])

    @admin.display(description="Tokens")
    def tokens(self, obj: ExperimentResult) -> int:
        return obj.tokens_total

    @admin.display(description="Checks")
    def checks_list(self, obj: ExperimentResult) -> SafeString:
        return format_html_join(
            "",
            '<div style="overflow-wrap: anywhere">{} {}{}</div>',
            (
                (
                    "✓" if c["passed"] else "✗",
                    c["check"],
                    f" ({c['detail']})" if c["detail"] else "",
                )
                for c in obj.checks
            ),
        )


@admin.register(Experiment)
class ExperimentAdmin(NoAddPageMixin, ReadOnlyAdminMixin, AgencyScopedAdmin):
    empty_state = EmptyState(
        "No experiment yet",
        "An experiment runs a dataset against an agent version: start one from a dataset's "
        "page (Run experiment), over the API or with manage.py eval run.",
        "Datasets",
        "admin:evals_dataset_changelist",
    )
    list_display = ["agent", "agent_version", "dataset_version", "status", "pass_rate_shown",
                    "cost_usd", "created_at"]  # fmt: skip
    list_filter = ["status"]
    list_select_related = ["agent", "agent_version", "dataset_version__dataset"]
    fields = readonly_fields = ("agent", "agent_version", "dataset_version", "status",
                                "progress", "pass_rate_shown", "tokens", "cost_usd", "created_at",
                                "finished_at")  # fmt: skip
    inlines = [ResultInline]
    actions = ["compare"]

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.compare_view)
        mine = [path("compare/", view, name="evals_experiment_compare")]
        return [*mine, *super().get_urls()]

    def compare_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return compare_view(self, request, self.get_queryset(request))

    @admin.action(description="Compare side by side (experiments of one dataset)")
    def compare(self, request: HttpRequest, queryset: QuerySet[Experiment]) -> HttpResponse:
        return HttpResponseRedirect(compare_url(list(queryset.values_list("pk", flat=True))))

    @admin.display(description="Progress")
    def progress(self, obj: Experiment) -> str:
        done = obj.results.exclude(status=ResultStatus.RUNNING).count()
        if obj.status == ExperimentStatus.COMPLETED:
            return f"{done} of {obj.case_count} cases done"
        # templates/admin/evals/experiment/change_form.html reloads the page while it runs.
        return f"{done} of {obj.case_count} cases done (this page reloads until all are)"

    @admin.display(description="Passed")
    def pass_rate_shown(self, obj: Experiment) -> str:
        return f"{obj.passed_count} of {obj.case_count} ({obj.pass_rate:.0%})"

    @admin.display(description="Tokens")
    def tokens(self, obj: Experiment) -> int:
        return obj.tokens_total


# The deploy gates' admin and the agent page's "Deploy gate and tests" panel.
from evals import admin_gate  # noqa: E402, F401 - registers them
