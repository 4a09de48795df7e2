"""Writers for agent configuration: create, update, delete, activate, deactivate, duplicate and
create from a template. Each validates its input (400 with field messages, nothing written),
keeps the cron entry in step, records a version when the configuration changed
(agents.services.versions) and emits seed 004's ``ai.agent.*`` event."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, transaction
from django.forms.models import model_to_dict
from django.http import Http404
from django.utils.text import slugify

from agents.inputs import InvalidInputSchema, validate_input_schema
from agents.models import (
    VERSIONED_FIELDS,
    Agent,
    AgentConfig,
    AgentGoal,
    AgentTemplate,
    AgentVersion,
)
from agents.schedules import InvalidCron, agent_schedule_remove, agent_schedule_sync, parse_cron
from agents.services.versions import (
    agent_version_hold,
    agent_version_record,
    changed_fields,
    config_fields,
    config_of,
    plain_line_breaks,
    version_gate,
)
from agents.triggers import InvalidConditions, event_type_error, validate_conditions
from core.events import event_emit
from core.exceptions import ApplicationError
from core.models import ActorType, Site
from tools.patterns import InvalidPattern, validate_patterns

# Fields an agent copies from a template (and a duplicate from its original).
CONFIG_FIELDS = tuple(f.name for f in AgentConfig._meta.get_fields() if f.concrete)
VERSIONED_FIELDS_SET = frozenset(VERSIONED_FIELDS)
EDITABLE_FIELDS = frozenset(
    {*CONFIG_FIELDS, "slug", "site", "is_active", "is_public", "template"}
) - {"id"}


def validate_agent_fields(fields: dict[str, Any]) -> None:
    """Checks a database constraint cannot express well: wildcard patterns, cron syntax, event
    types, the shape of trigger conditions (agents.triggers) and declared inputs
    (agents.inputs)."""
    errors: dict[str, list[str]] = {}
    for name in ("allowed_tools", "denied_tools"):
        try:
            validate_patterns(fields.get(name) or [])
        except InvalidPattern as exc:
            errors[name] = list(exc.messages)
    schedule = fields.get("trigger_schedule")
    if schedule:
        try:
            parse_cron(schedule)
        except InvalidCron as exc:
            errors.setdefault("trigger_schedule", []).append(str(exc))
    for event_type in fields.get("trigger_events") or []:
        if message := event_type_error(event_type):
            errors.setdefault("trigger_events", []).append(message)
    if "trigger_conditions" in fields:
        try:
            validate_conditions(fields["trigger_conditions"])
        except InvalidConditions as exc:
            errors["trigger_conditions"] = exc.messages
    if "input_schema" in fields:
        try:
            validate_input_schema(fields["input_schema"])
        except InvalidInputSchema as exc:
            errors["input_schema"] = exc.messages
    if errors:
        raise ApplicationError("invalid", "The agent configuration is invalid.", fields=errors)


def _emit(agent: Agent, event_type: str, payload: dict[str, Any], user_id: int | None) -> None:
    event_emit(
        agency_id=agent.agency_id,
        site_id=agent.site_id,
        event_type=event_type,
        payload={"id": str(agent.id), **payload},
        source_module="agents",
        source_entity_type="agent",
        source_entity_id=str(agent.id),
        actor_type=ActorType.USER if user_id else ActorType.SYSTEM,
        actor_user_id=user_id,
    )


def _save(agent: Agent) -> None:
    """Full validation then save; a duplicate slug per site is a 400, not a 500."""
    try:
        with transaction.atomic():
            agent.save()
    except IntegrityError as exc:
        if "slug" in str(exc):
            raise ApplicationError(
                "invalid",
                "The agent configuration is invalid.",
                fields={
                    "slug": [f"An agent with slug {agent.slug!r} already exists on this site."]
                },
                status=409,
            ) from exc
        raise


def _check_known(fields: dict[str, Any]) -> dict[str, Any]:
    """``fields``, all of them an agent's, with text's line breaks as versions keep them."""
    unknown = set(fields) - EDITABLE_FIELDS
    if unknown:
        raise ApplicationError("invalid", f"Unknown agent fields: {sorted(unknown)}.")
    return {
        name: plain_line_breaks(value) if isinstance(value, str) else value
        for name, value in fields.items()
    }


@transaction.atomic
def agent_create(
    *, agency_id: uuid.UUID, site: Site, user_id: int | None = None, **fields: Any
) -> Agent:
    """Precondition: in the agency's context; ``site`` belongs to it."""
    fields = _check_known(fields)
    validate_agent_fields(fields)
    return _create(agency_id=agency_id, site=site, user_id=user_id, fields=fields)


def _create(
    *, agency_id: uuid.UUID, site: Site, user_id: int | None, fields: dict[str, Any]
) -> Agent:
    """agent_create after validation. A duplicate or a template's copy validates only what the
    caller changes: the rest was checked when it was stored, or is the platform's own template
    data."""
    if site.agency_id != agency_id:
        raise ApplicationError("invalid", "No such site.", fields={"site": ["No such site."]})
    fields.setdefault(
        "slug", slugify(fields.get("name", ""))[:100] or f"agent-{uuid.uuid4().hex[:6]}"
    )
    agent = Agent(agency_id=agency_id, site=site, created_by_id=user_id, updated_by_id=user_id)
    for name, value in fields.items():
        setattr(agent, name, value)
    _save(agent)
    agent_version_record(agent=agent, user_id=user_id)  # version 1
    agent_schedule_sync(agent)
    _emit(
        agent,
        "ai.agent.created",
        {"name": agent.name, "type": agent.agent_type, "domain": agent.domain},
        user_id,
    )
    if agent.is_active:
        _emit(agent, "ai.agent.activated", {"name": agent.name}, user_id)
    return agent


@transaction.atomic
def agent_update(
    *,
    agent: Agent,
    user_id: int | None = None,
    restored_from: AgentVersion | None = None,
    **fields: Any,
) -> Agent:
    """Change fields; ``ai.agent.updated`` carries what changed (and the version a change of
    the configuration made), activation its own event. ``restored_from``: the version whose
    configuration ``fields`` are (:func:`agent_version_restore`).

    With a deploy gate (AGENTDESK_VERSION_GATES), a changed configuration is
    recorded as a new version that is not current, and the gate is started on it: the agent
    keeps running its current version until the gate makes the new one current
    (:func:`agent_version_activate`); the other fields (switches, slug, site) apply at once."""
    return _update(agent=agent, user_id=user_id, restored_from=restored_from, fields=fields)[0]


def _update(
    *,
    agent: Agent,
    user_id: int | None,
    restored_from: AgentVersion | None,
    fields: dict[str, Any],
) -> tuple[Agent, AgentVersion | None]:
    """agent_update, and the version its change made: current, or held by the gate."""
    fields = _check_known(fields)
    validate_agent_fields(fields)
    before = model_to_dict(agent, fields=list(fields))
    was_active = agent.is_active
    gate = version_gate(agent) if VERSIONED_FIELDS_SET & fields.keys() else None
    running = config_of(agent) if gate is not None else {}
    kept = {name: getattr(agent, name) for name in VERSIONED_FIELDS} if gate is not None else {}
    for name, value in fields.items():
        setattr(agent, name, value)
    proposed = config_of(agent) if gate is not None else {}
    held = gate is not None and bool(changed_fields(running, proposed))
    if held and gate is not None and (refusal := gate.refusal(agent, active=agent.is_active)):
        raise ApplicationError("gate_cannot_run", refusal, status=409)
    if held:  # the row keeps the configuration its runs use; the new one waits as a version
        for name, value in kept.items():
            setattr(agent, name, value)
    agent.updated_by_id = user_id
    _save(agent)
    version = agent_version_record(agent=agent, user_id=user_id, restored_from=restored_from)
    if held:
        assert gate is not None
        version = agent_version_hold(
            agent=agent, config=proposed, base=running, user_id=user_id, restored_from=restored_from
        )
        gate.start(agent=agent, version=version, user_id=user_id)
    agent_schedule_sync(agent)
    changes = {
        name: {"from": _jsonable(before.get(name)), "to": _jsonable(getattr(agent, name))}
        for name in fields
        if before.get(name) != model_to_dict(agent, fields=[name]).get(name)
    }
    if changes:
        payload: dict[str, Any] = {"changes": changes}
        if version is not None and not held:
            payload["version"] = version.number
        _emit(agent, "ai.agent.updated", payload, user_id)
    if agent.is_active != was_active:
        state = "ai.agent.activated" if agent.is_active else "ai.agent.deactivated"
        _emit(agent, state, {"name": agent.name}, user_id)
    return agent, version


def agent_version_restore(
    *, agent: Agent, version: AgentVersion, user_id: int | None = None
) -> AgentVersion:
    """Apply ``version``'s configuration to ``agent`` through :func:`agent_update` (validation,
    ``ai.agent.updated``, the cron entry), which records it as a new version. A version whose
    configuration is the agent's already is a 409 and changes nothing.

    Precondition: in the agent's agency context."""
    if version.agent_id != agent.pk:
        raise Http404("No such version of this agent.")
    if not changed_fields(config_of(agent), version.config):
        raise ApplicationError(
            "no_change",
            f"Version {version.number}'s configuration is the agent's current one already.",
            status=409,
        )
    with transaction.atomic():
        _, new = _update(
            agent=agent,
            user_id=user_id,
            restored_from=version,
            fields=config_fields(version.config),
        )
    assert new is not None  # the configuration changed: recorded (current, or held by a gate)
    return new


@transaction.atomic
def agent_version_activate(
    *, agent: Agent, version: AgentVersion, user_id: int | None = None
) -> Agent:
    """Make ``version`` the agent's current version, its configuration put on the agent (no new
    version): what a deploy gate does with a version that passed it. Runs already started keep
    the version they started on. 409 when it is current already.

    Precondition: in the agent's agency context; the caller decided the version may be current
    (the gate's check: evals.services.gate)."""
    if version.agent_id != agent.pk:
        raise Http404("No such version of this agent.")
    locked = Agent.objects.select_for_update().get(pk=agent.pk)
    if locked.current_version_id == version.pk:
        raise ApplicationError(
            "already_current", f"Version {version.number} is current already.", status=409
        )
    before = config_of(locked)
    for name, value in config_fields(version.config).items():
        setattr(locked, name, value)
    locked.updated_by_id = user_id
    _save(locked)
    Agent.objects.filter(pk=locked.pk).update(current_version=version)
    locked.current_version = version
    agent_schedule_sync(locked)
    changed = changed_fields(before, version.config)
    _emit(
        locked,
        "ai.agent.updated",
        {
            "changes": {name: {"to": version.config.get(name)} for name in changed},
            "version": version.number,
            "activated": True,
        },
        user_id,
    )
    return locked


def _jsonable(value: Any) -> Any:
    if isinstance(value, str | int | float | bool | list | dict) or value is None:
        return value
    return str(value)


def agent_activate(*, agent: Agent, user_id: int | None = None) -> Agent:
    return agent if agent.is_active else agent_update(agent=agent, user_id=user_id, is_active=True)


def agent_deactivate(*, agent: Agent, user_id: int | None = None) -> Agent:
    if not agent.is_active:
        return agent
    return agent_update(agent=agent, user_id=user_id, is_active=False)


@transaction.atomic
def agent_delete(*, agent: Agent, user_id: int | None = None) -> None:
    _emit(agent, "ai.agent.deleted", {"name": agent.name}, user_id)
    agent_schedule_remove(agent)
    agent.delete()


def _unique_slug(site: Site, base: str) -> str:
    slug, n = base[:90], 2
    while Agent.objects.filter(site=site, slug=slug).exists():
        slug = f"{base[:90]}-{n}"
        n += 1
    return slug


@transaction.atomic
def agent_duplicate(*, agent: Agent, user_id: int | None = None) -> Agent:
    """A copy (inactive, stats reset) with the original's goals."""
    fields = {name: getattr(agent, name) for name in CONFIG_FIELDS if name != "id"}
    fields["name"] = f"{agent.name} (copy)"
    fields["slug"] = _unique_slug(agent.site, f"{agent.slug}-copy")
    fields["is_active"] = False
    copy = _create(agency_id=agent.agency_id, site=agent.site, user_id=user_id, fields=fields)
    for goal in agent.goals.all():
        goal.pk = None
        goal.id = uuid.uuid4()
        goal.agent = copy
        goal._state.adding = True
        goal.save()
    return copy


@transaction.atomic
def agent_create_from_template(
    *,
    template: AgentTemplate,
    agency_id: uuid.UUID,
    site: Site,
    user_id: int | None = None,
    **overrides: Any,
) -> Agent:
    """An inactive agent configured like ``template`` (its goals become goal rows)."""
    overrides = _check_known(overrides)
    validate_agent_fields(overrides)
    fields = {name: getattr(template, name) for name in CONFIG_FIELDS if name != "id"}
    fields.update(overrides)
    fields.setdefault("slug", _unique_slug(site, slugify(fields["name"]) or template.slug))
    fields.setdefault("is_active", False)
    fields["template"] = template
    agent = _create(agency_id=agency_id, site=site, user_id=user_id, fields=fields)
    goal_fields = {f.name for f in AgentGoal._meta.get_fields() if f.concrete} - {
        "id", "agency", "agent", "created_at", "updated_at",
    }  # fmt: skip
    for goal in template.goals or []:
        if isinstance(goal, dict) and goal.get("name"):
            AgentGoal.objects.create(
                agency_id=agency_id,
                agent=agent,
                **{k: v for k, v in goal.items() if k in goal_fields},
            )
    return agent
