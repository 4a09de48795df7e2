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


class ExperimentKind(models.TextChoices):
    MANUAL = "manual", "Started by hand"  # the admin, the API or `manage.py eval run`
    GATE = "gate", "Deploy gate"  # a new version waits for it before it becomes current
    DRAFT = "draft", "Unsaved draft"  # the editor's unsaved configuration (``draft_config``)


class Experiment(AgencyOwnedModel):
    """A dataset version run against an agent version (or an unsaved draft of the editor: its
    configuration in ``draft_config``, ``agent_version`` the one it was drafted from): one run
    per case."""

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
    kind = models.CharField(
        max_length=16, choices=ExperimentKind.choices, default=ExperimentKind.MANUAL
    )
    draft_config = models.JSONField(null=True, blank=True)
    # A gate's threshold as it was when the experiment started (the gate may change later).
    min_pass_rate = models.DecimalField(max_digits=4, decimal_places=3, null=True, blank=True)
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
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=ExperimentStatus.values),
                name="evals_experiment_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(kind__in=ExperimentKind.values),
                name="evals_experiment_kind_valid",
            ),
        ]

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
    # Loops the run's loop detection caught (flow's LoopDetection rows): flagged even when the
    # run went on to pass.
    loops_flagged = models.PositiveIntegerField(default=0)
    # The LLM judge's verdict on the case's ``judge_rubric`` (0 to 1, its reason), and what the
    # judge's model call cost (counted in usage as evaluation spend).
    judge_score = models.FloatField(null=True, blank=True)
    judge_reason = models.TextField(blank=True)
    judge_cost_usd = models.DecimalField(
        "judge cost (USD)", max_digits=12, decimal_places=6, default=0
    )
    scored_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["experiment", "case__position"]
        constraints = [
            models.UniqueConstraint(
                fields=["experiment", "case"], name="evals_experimentresult_unique_case"
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=ResultStatus.values),
                name="evals_experimentresult_status_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(judge_score__gte=0, judge_score__lte=1)
                | models.Q(judge_score__isnull=True),
                name="evals_experimentresult_judge_score_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.case} ({self.status})"


class DeployGate(AgencyOwnedModel):
    """An agent's deploy gate: a new version of it becomes current only once an experiment of
    ``dataset`` (its current version) on that version passes at least ``min_pass_rate`` of the
    cases. Off while ``is_active`` is false."""

    agent = models.OneToOneField(
        "agents.Agent", on_delete=models.CASCADE, related_name="deploy_gate"
    )
    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="+")
    min_pass_rate = models.DecimalField(max_digits=4, decimal_places=3, default=1)
    is_active = models.BooleanField(default=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(min_pass_rate__gte=0, min_pass_rate__lte=1),
                name="evals_deploygate_min_pass_rate_range",
            )
        ]

    def __str__(self) -> str:
        return f"{self.agent}: {self.dataset} at {self.min_pass_rate:.0%}"


class CanaryStatus(models.TextChoices):
    RUNNING = "running", "Running"
    PROMOTED = "promoted", "Promoted"
    ROLLED_BACK = "rolled_back", "Rolled back"
    STOPPED = "stopped", "Stopped"


class CanaryMetric(models.TextChoices):
    """The figure a canary rolls back on (evals/canary_rule.py states each rule)."""

    FAILURE_RATE = "failure_rate", "Failure rate"
    COST_PER_RUN = "cost_per_run", "Cost per run"
    STEPS = "steps", "Steps per run"


class Canary(AgencyOwnedModel):
    """A candidate version of an agent taking ``share`` % of its new runs (the rest on
    ``stable``, its current version when the canary started) until it is promoted, rolled back
    or stopped. One running canary per agent. ``figures`` and ``reason``: both arms' figures
    and why it ended, kept when it ends."""

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="+")
    candidate = models.ForeignKey("agents.AgentVersion", on_delete=models.CASCADE, related_name="+")
    stable = models.ForeignKey("agents.AgentVersion", on_delete=models.CASCADE, related_name="+")
    share = models.PositiveSmallIntegerField(default=10)  # % of new runs on the candidate
    status = models.CharField(
        max_length=16, choices=CanaryStatus.choices, default=CanaryStatus.RUNNING
    )
    metric = models.CharField(
        "roll back on",
        max_length=16,
        choices=CanaryMetric.choices,
        default=CanaryMetric.FAILURE_RATE,
    )
    # Failure rate: the candidate's rate above stable's by at least this (0.05: 5 points);
    # cost or steps: the candidate's mean above stable's by this fraction (0.25: 25 %).
    threshold = models.DecimalField(max_digits=5, decimal_places=3, default=0.05)
    min_runs = models.PositiveIntegerField("min runs per arm", default=20)
    # Promote once the candidate has this many ended runs and no rollback (null: by hand only).
    promote_after = models.PositiveIntegerField(null=True, blank=True)
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    ended_at = models.DateTimeField(null=True, blank=True)
    ended_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField(blank=True)
    figures = models.JSONField(default=dict, blank=True)
    # The version promotion made current (a copy of the candidate, as a restore makes).
    promoted_version = models.ForeignKey(
        "agents.AgentVersion", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "canaries"
        constraints = [
            models.UniqueConstraint(
                fields=["agent"],
                condition=models.Q(status="running"),
                name="evals_canary_one_running",
            ),
            models.CheckConstraint(
                condition=models.Q(status__in=CanaryStatus.values), name="evals_canary_status_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(metric__in=CanaryMetric.values), name="evals_canary_metric_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(share__gte=1, share__lte=99), name="evals_canary_share_range"
            ),
            models.CheckConstraint(
                condition=models.Q(min_runs__gte=5), name="evals_canary_min_runs_range"
            ),
            models.CheckConstraint(
                condition=models.Q(threshold__gte=0), name="evals_canary_threshold_range"
            ),
            models.CheckConstraint(
                condition=~models.Q(candidate=models.F("stable")),
                name="evals_canary_candidate_not_stable",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent}: canary at {self.share} %"
