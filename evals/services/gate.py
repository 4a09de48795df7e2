"""The deploy gate (issue 28): an agent's new version becomes current only once an experiment of
the gate's dataset on it passes the gate's threshold.

A save or a restore of a gated agent records the new configuration as a version that is not
current (agents.services.agents, through :class:`DeployGateHold`, named in
AGENTDESK_VERSION_GATES) and starts a gate experiment on it here; when that
experiment completes (:func:`gate_experiment_decide`, after its last result is scored) a pass
makes the version current by agents.services.agent_version_activate, a failure leaves it as a
version that is not current, its failed cases on the agent page. Over the API a version is made
current only once it has passed (:func:`gate_version_activate`: 409 naming the failed cases).

Preconditions: in the agency context of the agent."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from django.db import transaction

from agents.models import Agent, AgentVersion
from agents.services import agent_version_activate
from core.exceptions import ApplicationError
from evals.models import (
    Dataset,
    DeployGate,
    Experiment,
    ExperimentKind,
    ExperimentStatus,
    ResultStatus,
    TestCase,
)
from evals.services.experiments import experiment_start


def _rate(value: object) -> Decimal:
    try:
        rate = Decimal(str(value))
    except InvalidOperation:
        rate = Decimal(-1)
    if not rate.is_finite() or not Decimal(0) <= rate <= Decimal(1):
        raise ApplicationError(
            "invalid",
            "The deploy gate is invalid.",
            fields={"min_pass_rate": ["A pass rate from 0 to 1 (0.9 is 90 %)."]},
            status=422,
        )
    return rate.quantize(Decimal("0.001"))


def deploy_gate_validate(*, agent: Agent, dataset: Dataset | None, min_pass_rate: object) -> None:
    """422 naming the field (a rule broken): the dataset must be the agent's or the agency's,
    and hold a case; the threshold from 0 to 1."""
    _rate(min_pass_rate)
    if dataset is None or dataset.agency_id != agent.agency_id:
        problem = "Pick a dataset of this agency."
    elif dataset.agent_id is not None and dataset.agent_id != agent.pk:
        problem = f"Dataset {dataset.name!r} holds another agent's test cases."
    elif not TestCase.objects.filter(version_id=dataset.current_version_id).exists():
        problem = f"Dataset {dataset.name!r} has no test case yet: add one first."
    else:
        return
    raise ApplicationError(
        "invalid", "The deploy gate is invalid.", fields={"dataset": [problem]}, status=422
    )


@transaction.atomic
def deploy_gate_set(
    *, agent: Agent, dataset: Dataset, min_pass_rate: object, is_active: bool = True
) -> DeployGate:
    """Set (or change) ``agent``'s deploy gate; validated as :func:`deploy_gate_validate`."""
    deploy_gate_validate(agent=agent, dataset=dataset, min_pass_rate=min_pass_rate)
    gate, _ = DeployGate.objects.update_or_create(
        agent=agent,
        defaults={
            "agency_id": agent.agency_id,
            "dataset": dataset,
            "min_pass_rate": _rate(min_pass_rate),
            "is_active": is_active,
        },
    )
    return gate


def deploy_gate_remove(*, agent: Agent) -> None:
    DeployGate.objects.filter(agent_id=agent.pk).delete()


def active_gate(agent: Agent) -> DeployGate | None:
    return (
        DeployGate.objects.select_related("dataset")
        .filter(agent_id=agent.pk, is_active=True)
        .first()
    )


class DeployGateHold:
    """The agents services' VersionGate: holds the new versions of an agent with an active
    gate, and starts the gate's experiment on each."""

    def holds(self, agent: Agent) -> bool:
        return DeployGate.objects.filter(agent_id=agent.pk, is_active=True).exists()

    def refusal(self, agent: Agent, *, active: bool) -> str | None:
        if active:
            return None
        return (
            f"{agent.name} has a deploy gate, whose test cases cannot run while the agent is "
            "inactive: activate it (in the same save) or turn its gate off to change its "
            "configuration."
        )

    def start(self, *, agent: Agent, version: AgentVersion, user_id: int | None) -> None:
        gate = active_gate(agent)
        assert gate is not None  # holds() said so, in this transaction
        dataset_version = gate.dataset.current_version
        if dataset_version is None:
            raise ApplicationError("empty_dataset", f"{gate.dataset} has no version.", status=409)
        experiment_start(
            agent=agent,
            dataset_version=dataset_version,
            version_number=version.number,
            user_id=user_id,
            kind=ExperimentKind.GATE,
            min_pass_rate=gate.min_pass_rate,
        )


def _passes(experiment: Experiment, threshold: Decimal | None) -> bool:
    needed = threshold if threshold is not None else Decimal(1)
    return Decimal(experiment.passed_count) >= needed * experiment.case_count


def failed_cases(experiment: Experiment) -> list[str]:
    """The names of the experiment's cases that did not pass, in the dataset's order."""
    return list(
        experiment.results.exclude(status=ResultStatus.PASSED)
        .order_by("case__position")
        .values_list("case__name", flat=True)
    )


@transaction.atomic
def gate_experiment_decide(*, experiment_id: uuid.UUID | str) -> bool:
    """A completed gate experiment: make its version current when it passed (and no newer
    version is current already). Returns whether it did; again for one decided: nothing."""
    experiment = (
        Experiment.objects.select_related("agent", "agent_version")
        .filter(pk=experiment_id, kind=ExperimentKind.GATE, status=ExperimentStatus.COMPLETED)
        .first()
    )
    if experiment is None or experiment.agent_version is None:
        return False
    if not _passes(experiment, experiment.min_pass_rate):
        return False
    version = experiment.agent_version
    # Locked: the last two results scored at once both see the experiment completed.
    agent = (
        Agent.objects.select_for_update(of=("self",))
        .select_related("current_version")
        .get(pk=experiment.agent_id)
    )
    current = agent.current_version.number if agent.current_version else 0
    if version.number <= current:  # current already, or a newer one is
        return False
    agent_version_activate(agent=agent, version=version, user_id=experiment.started_by_id)
    return True


@dataclass(frozen=True, slots=True)
class GateVerdict:
    passed: bool
    message: str
    experiment: Experiment | None


def gate_verdict(*, agent: Agent, version: AgentVersion) -> GateVerdict:
    """Whether ``version`` has passed ``agent``'s active gate: its latest completed experiment
    on the gate's dataset (a gate's, or one started by hand or by the command) reached the
    gate's threshold as it is now. Passed when the agent has no active gate."""
    gate = active_gate(agent)
    if gate is None:
        return GateVerdict(True, "The agent has no deploy gate.", None)
    experiments = Experiment.objects.filter(
        agent_version=version, dataset_version__dataset_id=gate.dataset_id
    ).order_by("-created_at")
    done = experiments.filter(status=ExperimentStatus.COMPLETED).first()
    if done is None:
        running = experiments.filter(status=ExperimentStatus.RUNNING).exists()
        wait = " (its gate experiment is still running)" if running else ""
        return GateVerdict(
            False, f"Version {version.number} has no passing gate experiment yet{wait}.", None
        )
    if _passes(done, gate.min_pass_rate):
        return GateVerdict(True, f"Version {version.number} passed the deploy gate.", done)
    names = ", ".join(repr(name) for name in failed_cases(done))
    return GateVerdict(
        False,
        f"Version {version.number} failed the deploy gate ({gate.dataset.name}): "
        f"{done.passed_count} of {done.case_count} cases passed, "
        f"{gate.min_pass_rate:.0%} needed. Failed: {names}.",
        done,
    )


def gate_version_activate(
    *, agent: Agent, version: AgentVersion, user_id: int | None = None
) -> Agent:
    """Make ``version`` current if it passed the agent's gate (or the agent has none); a 409
    saying why not otherwise, naming the failed cases."""
    verdict = gate_verdict(agent=agent, version=version)
    if not verdict.passed:
        raise ApplicationError(
            "gate_not_passed",
            verdict.message,
            status=409,
            experiment=str(verdict.experiment.pk) if verdict.experiment else None,
            failed_cases=failed_cases(verdict.experiment) if verdict.experiment else [],
        )
    return agent_version_activate(agent=agent, version=version, user_id=user_id)
