"""Signal receivers: the audited models' saves and deletions (audit.registry), and logins.

A save is compared with the row as it was (read in ``pre_save``, in the same transaction) and
recorded only when a recorded field changed. A save whose ``update_fields`` are all unrecorded
reads nothing. While an agency is being deleted its rows' deletions are not recorded (its
entries go with it); the deletion itself goes to the platform chain.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db import models
from django.db.models.signals import post_delete, post_save, pre_delete, pre_save
from django.http import HttpRequest

from audit.chain import REDACTED, jsonable
from audit.context import Actor, actor_context, actor_for_request, current_actor
from audit.context import deleting as _deleting
from audit.models import ActorType
from audit.registry import AUDITED, Audited, Changes
from audit.services import audit_record
from core import tenancy
from core.models import Agency
from core.selectors import membership_for_user

_BEFORE = "_audit_before"
_specs: dict[type[models.Model], Audited] = {}


def _fields(model: type[models.Model], spec: Audited) -> list[models.Field[Any, Any]]:
    return [f for f in model._meta.concrete_fields if spec.recorded(f)]


def _value(model_field: models.Field[Any, Any], instance: models.Model) -> Any:
    return jsonable(model_field.value_from_object(instance))


def _changes(spec: Audited, instance: models.Model, before: dict[str, Any] | None) -> Changes:
    changes: Changes = {}
    for model_field in _fields(type(instance), spec):
        after = _value(model_field, instance)
        old = None if before is None else before.get(model_field.attname)
        if before is None and after in (None, "", [], {}):
            continue  # a new row: only what it was given
        if before is not None and old == after:
            continue
        if spec.secret(model_field):
            changes[model_field.name] = [REDACTED if old else None, REDACTED if after else None]
        else:
            changes[model_field.name] = [old, after]
    return changes


def _before_save(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
    spec = _specs[sender]
    if instance._state.adding or instance.pk is None:
        return
    fields = _fields(sender, spec)
    update_fields = kwargs.get("update_fields")
    if update_fields is not None:
        fields = [f for f in fields if f.name in update_fields or f.attname in update_fields]
    if not fields:
        return
    row = sender._base_manager.filter(pk=instance.pk).values(*(f.attname for f in fields)).first()
    if row is not None:
        by_field = {f.attname: f for f in fields}
        before = {name: jsonable(by_field[name].to_python(value)) for name, value in row.items()}
        setattr(instance, _BEFORE, before)


def _after_save(
    sender: type[models.Model], instance: models.Model, created: bool, **kwargs: Any
) -> None:
    spec = _specs[sender]
    before = instance.__dict__.pop(_BEFORE, None)
    if created:
        if not spec.system_creates and current_actor().type == ActorType.SYSTEM:
            return
        verb, changes = "created", _changes(spec, instance, None)
    elif before is None:
        return  # nothing recorded was saved
    else:
        verb, changes = "updated", _changes(spec, instance, before)
        if not changes:
            return
    action = spec.action_for(verb, changes)
    if action is not None:
        _record(spec, instance, action, changes)


def _before_delete(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
    if sender is Agency:
        _deleting.set(_deleting.get() | {instance.pk})


def _after_delete(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
    spec = _specs[sender]
    if sender is Agency:
        _deleting.set(_deleting.get() - {instance.pk})
        audit_record(
            action="agency.deleted",
            agency_id=None,  # its own chain went with it
            object_type=instance._meta.label_lower,
            object_id=instance.pk,
            object_repr=instance,
        )
        return
    if spec.agency_of(instance) in _deleting.get():
        return
    # None: the model records only some actions (an approval its decision), not its deletion
    # (with its run, e.g. past the execution retention).
    if (action := spec.action_for("deleted", {})) is not None:
        _record(spec, instance, action, {})


def _record(spec: Audited, instance: models.Model, action: str, changes: Changes) -> None:
    audit_record(
        action=action,
        agency_id=spec.agency_of(instance),
        object_type=instance._meta.label_lower,
        object_id=instance.pk,
        object_repr=instance,
        changes=changes,
    )


def connect() -> None:
    for spec in AUDITED:
        try:
            model = apps.get_model(spec.label)
        except LookupError:
            continue  # an app of this installation that is not there
        _specs[model] = spec
        uid = f"audit.{spec.label}"
        pre_save.connect(_before_save, sender=model, dispatch_uid=f"{uid}.pre_save")
        post_save.connect(_after_save, sender=model, dispatch_uid=f"{uid}.post_save")
        pre_delete.connect(_before_delete, sender=model, dispatch_uid=f"{uid}.pre_delete")
        post_delete.connect(_after_delete, sender=model, dispatch_uid=f"{uid}.post_delete")


def _agency_of_user(user: Any) -> uuid.UUID | None:
    if user is None or user.is_superuser:
        return None
    with tenancy.tenant_context(user_id=user.pk):
        membership = membership_for_user(user=user)
    return membership.agency_id if membership is not None else None


def _logged_in(sender: Any, request: HttpRequest | None, user: Any, **kwargs: Any) -> None:
    actor = actor_for_request(request, user=user) if request is not None else current_actor()
    with actor_context(actor):
        audit_record(
            action="auth.login",
            agency_id=_agency_of_user(user),
            object_type="core.user",
            object_id=user.pk,
            object_repr=user.get_username(),
        )


def _login_failed(
    sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None, **kwargs: Any
) -> None:
    user_model = get_user_model()
    name = str(credentials.get(user_model.USERNAME_FIELD) or credentials.get("username") or "")
    user = user_model._default_manager.filter(**{user_model.USERNAME_FIELD: name}).first()
    base = actor_for_request(request) if request is not None else current_actor()
    actor = Actor(
        ActorType.USER,
        user_id=user.pk if user is not None else None,
        display=name[:255],
        ip=base.ip,
        user_agent=base.user_agent,
    )
    with actor_context(actor):
        audit_record(
            action="auth.login_failed",
            agency_id=_agency_of_user(user),
            object_type="core.user",
            object_id=user.pk if user is not None else "",
            object_repr=name,
            changes={"username": [None, name]},  # the password is never in credentials
        )


user_logged_in.connect(_logged_in, dispatch_uid="audit.login")
user_login_failed.connect(_login_failed, dispatch_uid="audit.login_failed")
