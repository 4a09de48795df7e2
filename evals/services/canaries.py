"""Canary versions (issue 28; README "Canary versions"): a candidate version of an agent takes a
share of its new runs, chosen by a stable hash (evals/canary_rule.py), the rest staying on the
stable version, until staff promote it, a rule promotes it, or it is rolled back by itself.

The run plugin (evals/canary_plugin.py) reads which agents have a running canary through
:func:`canary_routing`: one cache read per run, no query (the cache is rewritten from the
database when a canary starts or ends, once that commits). A run's end sends
:data:`EVALUATE_TASK`, which applies the rule under the canary's row lock, so two runs ending at
once evaluate one after the other and the second finds the canary ended."""

from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.models import Agent, AgentVersion
from agents.services import agent_version_restore
from core import tenancy
from core.events import event_emit
from core.exceptions import ApplicationError
from core.models import ActorType
from core.sending import send_task_on_commit
from evals.canary_figures import canary_figures
from evals.canary_rule import Arm, promotable, rollback_verdict
from evals.models import Canary, CanaryMetric, CanaryStatus

EVALUATE_TASK = "evals.canary_evaluate"
ROLLED_BACK_EVENT = "ai.version.rolled_back"
CACHE_SECONDS = 3600
_NONE = "-"  # cached: the agent has no running canary

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Routing:
    canary_id: uuid.UUID
    stable_id: uuid.UUID
    candidate_id: uuid.UUID
    share: int


def _key(agent_id: uuid.UUID | str) -> str:
    return f"evals:canary:{agent_id}"


def _read(agent_id: uuid.UUID | str) -> str:
    running = (
        Canary.objects.filter(agent_id=agent_id, status=CanaryStatus.RUNNING)
        .values_list("id", "stable_id", "candidate_id", "share")
        .first()
    )
    return ",".join(str(part) for part in running) if running else _NONE


def canary_routing(agent_id: uuid.UUID | str) -> Routing | None:
    """The agent's running canary as the runs need it (one cache read; the database on a miss,
    or when the cache cannot be reached). Precondition: the agent's agency context."""
    try:
        value = cache.get(_key(agent_id))
    except Exception:  # an outage of the cache stops no run: the database answers
        logger.warning("canary routing: cache unreachable, read from the database")
        return _parse(_read(agent_id))
    if value is None:
        value = _read(agent_id)
        with contextlib.suppress(Exception):
            cache.add(_key(agent_id), value, CACHE_SECONDS)  # never over a newer write
    return _parse(value)


def _parse(value: str) -> Routing | None:
    if value == _NONE:
        return None
    canary_id, stable_id, candidate_id, share = value.split(",")
    return Routing(uuid.UUID(canary_id), uuid.UUID(stable_id), uuid.UUID(candidate_id), int(share))


def _refresh_on_commit(agency_id: uuid.UUID, agent_id: uuid.UUID) -> None:
    """Rewrite the agent's cached routing once the change commits. Read in the agency's own
    context: the commit may come after the caller's tenant block has ended."""

    def refresh() -> None:
        with tenancy.agency_context(agency_id):
            value = _read(agent_id)
        try:
            cache.set(_key(agent_id), value, CACHE_SECONDS)
        except Exception:  # the cache comes back empty or stale: delete when it can
            logger.exception("canary %s: routing cache not rewritten", agent_id)

    transaction.on_commit(refresh)


# --- starting and ending -----------------------------------------------------------------------


def _number(value: Any, name: str, *, low: Decimal, high: Decimal | None = None) -> Decimal:
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        number = Decimal("NaN")
    if not number.is_finite() or number < low or (high is not None and number > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ApplicationError("invalid", f"{name} must be a number {bound}.", field=name)
    return number


@transaction.atomic
def canary_start(
    *,
    agent: Agent,
    candidate: AgentVersion,
    share: Any = 10,
    metric: str = CanaryMetric.FAILURE_RATE,
    threshold: Any = "0.05",
    min_runs: Any = 20,
    promote_after: Any = None,
    user_id: int | None = None,
) -> Canary:
    """Start a canary of ``candidate`` (one of the agent's versions, not its current one) on
    ``share`` % of the agent's new runs. 400 for a value out of range, 409 when the agent has a
    running canary already. Precondition: the agent's agency context."""
    if candidate.agent_id != agent.pk:
        raise ApplicationError("invalid", "The candidate is not a version of this agent.")
    if agent.current_version_id is None or candidate.pk == agent.current_version_id:
        raise ApplicationError(
            "invalid",
            f"Version {candidate.number} is the agent's current version: a canary tries "
            "another version against it.",
            field="candidate",
        )
    if metric not in CanaryMetric.values:
        raise ApplicationError(
            "invalid", f"metric must be one of {', '.join(CanaryMetric.values)}.", field="metric"
        )
    fields = {
        "share": int(_number(share, "share", low=Decimal(1), high=Decimal(99))),
        "threshold": _number(threshold, "threshold", low=Decimal(0), high=Decimal(10)),
        "min_runs": int(_number(min_runs, "min_runs", low=Decimal(5), high=Decimal(100_000))),
    }
    if promote_after not in (None, ""):
        fields["promote_after"] = int(
            _number(promote_after, "promote_after", low=Decimal(1), high=Decimal(1_000_000))
        )
    try:
        with transaction.atomic():
            canary = Canary.objects.create(
                agency_id=agent.agency_id,
                agent=agent,
                candidate=candidate,
                stable_id=agent.current_version_id,
                metric=metric,
                started_by_id=user_id,
                **fields,
            )
    except IntegrityError as exc:
        if "evals_canary_one_running" not in str(exc):
            raise
        raise ApplicationError(
            "conflict",
            "This agent has a running canary already: promote or stop it first.",
            status=409,
        ) from exc
    _refresh_on_commit(agent.agency_id, agent.pk)
    return canary


def _end(canary: Canary, status: str, reason: str, user_id: int | None) -> None:
    canary.figures = canary_figures(canary)
    canary.status = status
    canary.reason = reason
    canary.ended_at = timezone.now()
    canary.ended_by_id = user_id
    canary.save(
        update_fields=[
            "figures", "status", "reason", "ended_at", "ended_by", "promoted_version", "updated_at"
        ]
    )  # fmt: skip
    _refresh_on_commit(canary.agency_id, canary.agent_id)


def _locked(canary: Canary) -> Canary:
    locked = (
        Canary.objects.select_for_update().select_related("agent", "candidate").get(pk=canary.pk)
    )
    if locked.status != CanaryStatus.RUNNING:
        raise ApplicationError(
            "conflict", f"This canary has ended ({locked.get_status_display()}).", status=409
        )
    return locked


@transaction.atomic
def canary_stop(*, canary: Canary, user_id: int | None = None) -> Canary:
    """End the canary by hand; new runs go to the stable version again. 409 if it has ended."""
    canary = _locked(canary)
    _end(canary, CanaryStatus.STOPPED, "Stopped by hand.", user_id)
    return canary


def _promote(canary: Canary, reason: str, user_id: int | None) -> None:
    """Make the candidate current as a restore does (agent_version_restore: a new version with
    its configuration, ``ai.agent.updated``), then end the canary promoted."""
    agent = Agent.objects.select_for_update().get(pk=canary.agent_id)
    try:
        canary.promoted_version = agent_version_restore(
            agent=agent, version=canary.candidate, user_id=user_id
        )
    except ApplicationError as exc:
        if exc.code != "no_change":
            raise
        canary.promoted_version = agent.current_version  # its configuration is current already
    _end(canary, CanaryStatus.PROMOTED, reason, user_id)


@transaction.atomic
def canary_promote(*, canary: Canary, user_id: int | None = None) -> Canary:
    """Promote by hand. 409 if the canary has ended."""
    canary = _locked(canary)
    _promote(canary, "Promoted by hand.", user_id)
    return canary


def _rollback(canary: Canary, reason: str) -> None:
    _end(canary, CanaryStatus.ROLLED_BACK, f"Rolled back by itself: {reason}.", None)
    event_emit(
        agency_id=canary.agency_id,
        site_id=canary.agent.site_id,
        event_type=ROLLED_BACK_EVENT,
        payload={
            "agent_id": str(canary.agent_id),
            "canary_id": str(canary.pk),
            "candidate_version": canary.candidate.number,
            "candidate_version_id": str(canary.candidate_id),
            "stable_version_id": str(canary.stable_id),
            "metric": canary.metric,
            "reason": canary.reason,
            "figures": canary.figures,
        },
        source_module="evals",
        source_entity_type="agent",
        source_entity_id=str(canary.agent_id),
        actor_type=ActorType.SYSTEM,
    )


def verdict_of(canary: Canary, figures: dict[str, dict[str, Any]]) -> Any:
    return rollback_verdict(
        canary.metric,
        Arm.of(figures["stable"]),
        Arm.of(figures["candidate"]),
        threshold=float(canary.threshold),
        min_runs=canary.min_runs,
    )


@transaction.atomic
def canary_evaluate(*, canary_id: uuid.UUID | str) -> str:
    """Apply the rule (evals/canary_rule.py) to a running canary under its row lock: roll it
    back, promote it, or leave it running. Returns its status ("gone": no such canary)."""
    canary = (
        Canary.objects.select_for_update()
        .select_related("agent", "candidate")
        .filter(pk=canary_id)
        .first()
    )
    if canary is None or canary.status != CanaryStatus.RUNNING:
        return canary.status if canary is not None else "gone"
    figures = canary_figures(canary)
    verdict = verdict_of(canary, figures)
    if verdict.worse:
        _rollback(canary, verdict.reason)
    elif promotable(Arm.of(figures["candidate"]), canary.promote_after, verdict):
        _promote(
            canary,
            f"Promoted by rule after {figures['candidate']['ended']} candidate runs "
            f"with no rollback ({verdict.reason}).",
            None,
        )
    return canary.status


def send_evaluate(canary_id: uuid.UUID, *, agency_id: uuid.UUID) -> None:
    send_task_on_commit(
        EVALUATE_TASK,
        canary_id,
        agency_id=agency_id,
        about=f"canary {canary_id}",
        then="it is evaluated again when the next run of either arm ends",
    )
