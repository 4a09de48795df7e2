"""Evaluations (issue 28): datasets of test cases, versioned like agents, and experiments that
run a dataset version against an agent version on the real workers, tool calls answered from
each case's recording (evals/tool_gate.py).

A dataset version is immutable: adding, changing or removing a case makes a new version with a
copy of every case (evals.services.datasets). A case keeps ``key`` across versions, so one case
can be followed from version to version."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from core.models import AgencyOwnedModel


class Dataset(AgencyOwnedModel):
    """Test cases of one agent (``agent`` set) or of the agency (any agent may be run on it)."""

    agent = models.ForeignKey(
        "agents.Agent", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    current_version = models.ForeignKey(
        "DatasetVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["agency", "name"], name="evals_dataset_unique_name")
        ]

    def __str__(self) -> str:
        return self.name


class DatasetVersion(AgencyOwnedModel):
    """One immutable set of cases, numbered 1, 2, ... per dataset."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    change_summary = models.CharField(max_length=300, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["dataset", "-number"]
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "number"], name="evals_datasetversion_unique_number"
            )
        ]

    def __str__(self) -> str:
        return f"{self.dataset} v{self.number}"


class TestCase(AgencyOwnedModel):
    """One case of a dataset version: what a run starts with (input, trigger payload, the
    conversation it continued), the tool calls its recording answers (``recorded_calls``:
    ``[{"tool", "arguments", "output", "status"}]``) and what a run must do
    (``expectations``: evals/expectations.py). Never changed once written."""

    __test__ = False  # not a pytest class, whatever its name

    version = models.ForeignKey(DatasetVersion, on_delete=models.CASCADE, related_name="cases")
    key = models.UUIDField(default=uuid.uuid4)  # the same case across versions
    position = models.PositiveIntegerField(default=0)
    name = models.CharField(max_length=200)
    input = models.TextField(blank=True)
    trigger_type = models.CharField(max_length=16, default="manual")
    trigger_payload = models.JSONField(default=dict, blank=True)
    conversation = models.JSONField(default=list, blank=True)
    recorded_calls = models.JSONField(default=list, blank=True)
    expectations = models.JSONField(default=dict, blank=True)
    # The run it was saved from (an id, not a key: retention may delete the run, not the case).
    source_execution_id = models.UUIDField(null=True, blank=True)

    class Meta:
        ordering = ["version", "position"]
        constraints = [
            models.UniqueConstraint(fields=["version", "key"], name="evals_testcase_unique_key")
        ]

    def __str__(self) -> str:
        return self.name


class ExperimentStatus(models.TextChoices):
    RUNNING = "running", "Running"
    COMPLETED = "completed", "Completed"


class Experiment(AgencyOwnedModel):
    """A dataset version run against an agent version: one run per case."""

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="+")
    agent_version = models.ForeignKey(
        "agents.AgentVersion", null=True, on_delete=models.SET_NULL, related_name="+"
    )
    dataset_version = models.ForeignKey(
        DatasetVersion, on_delete=models.RESTRICT, related_name="experiments"
    )
    status = models.CharField(
        max_length=16, choices=ExperimentStatus.choices, default=ExperimentStatus.RUNNING
    )
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    case_count = models.PositiveIntegerField(default=0)
    passed_count = models.PositiveIntegerField(default=0)
    tokens_total = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField("cost (USD)", max_digits=12, decimal_places=6, default=0)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.agent} on {self.dataset_version}"

    @property
    def pass_rate(self) -> float:
        return self.passed_count / self.case_count if self.case_count else 0.0


class ResultStatus(models.TextChoices):
    RUNNING = "running", "Running"
    PASSED = "passed", "Passed"
    FAILED = "failed", "Failed"
    NOT_STARTED = "not_started", "Not started"  # the agent could not start a run


class ExperimentResult(AgencyOwnedModel):
    """One case's run in an experiment and its score: each expectation pass or fail
    (``checks``: ``[{"check", "passed", "detail"}]``), steps, tokens, cost, latency."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="results")
    case = models.ForeignKey(TestCase, on_delete=models.RESTRICT, related_name="+")
    execution = models.ForeignKey(
        "agents.Execution", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    status = models.CharField(
        max_length=16, choices=ResultStatus.choices, default=ResultStatus.RUNNING
    )
    checks = models.JSONField(default=list, blank=True)
    steps = models.PositiveIntegerField(default=0)
    tokens_total = models.PositiveIntegerField(default=0)
    cost_usd = models.DecimalField("cost (USD)", max_digits=12, decimal_places=6, default=0)
    latency_ms = models.PositiveIntegerField("latency (ms)", null=True, blank=True)
    unrecorded_calls = models.PositiveIntegerField(default=0)
    scored_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["experiment", "case__position"]
        constraints = [
            models.UniqueConstraint(
                fields=["experiment", "case"], name="evals_experimentresult_unique_case"
            )
        ]

    def __str__(self) -> str:
        return f"{self.case} ({self.status})"
