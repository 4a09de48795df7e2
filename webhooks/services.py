"""Writers for webhooks: create (the secret returned once), rotate with a grace period, enable or
disable, rename, delete. Receiving a delivery: :mod:`webhooks.receive`.

Every writer's precondition: in the webhook's (or agent's) agency context.
"""

from __future__ import annotations

import uuid

from agents.models import Agent
from core.exceptions import ApplicationError
from webhooks.models import Webhook, new_secret
from webhooks.rotation import rotate_secret

DEFAULT_GRACE_SECONDS = 24 * 3600
MAX_GRACE_SECONDS = 7 * 24 * 3600
MAX_NAME = 200


def _clean_name(*, agent: Agent, name: str, exclude_id: uuid.UUID | None = None) -> str:
    name = name.strip()
    if not name:
        raise ApplicationError(
            "invalid", "The webhook needs a name.", fields={"name": ["This field is required."]}
        )
    if len(name) > MAX_NAME:
        message = f"At most {MAX_NAME} characters."
        raise ApplicationError("invalid", message, fields={"name": [message]})
    same_name = Webhook.objects.filter(agent=agent, name=name)
    if exclude_id is not None:
        same_name = same_name.exclude(pk=exclude_id)
    if same_name.exists():
        message = "The agent already has a webhook of this name."
        raise ApplicationError("invalid", message, fields={"name": [message]})
    return name


def webhook_create(
    *, agent: Agent, name: str, is_enabled: bool = True, created_by_id: int | None = None
) -> tuple[Webhook, str]:
    """A new webhook of ``agent``; returns it and its secret, which exists in plaintext only in
    this return value (it is stored encrypted)."""
    webhook = Webhook(
        agency_id=agent.agency_id,
        agent=agent,
        name=_clean_name(agent=agent, name=name),
        is_enabled=is_enabled,
        created_by_id=created_by_id,
    )
    secret = new_secret()
    webhook.set_secret(secret)
    webhook.save()
    return webhook, secret


def webhook_rotate(
    *, webhook: Webhook, grace_seconds: int = DEFAULT_GRACE_SECONDS
) -> tuple[Webhook, str]:
    """A new secret for ``webhook``; returns it (shown once). The current secret stays valid for
    ``grace_seconds`` more (0: refused at once); a secret still in an earlier rotation's grace
    period is dropped. Locks the webhook row: two rotations at once do not lose a secret."""
    if not 0 <= grace_seconds <= MAX_GRACE_SECONDS:
        message = f"Between 0 and {MAX_GRACE_SECONDS} seconds (7 days)."
        raise ApplicationError("invalid", message, fields={"grace_seconds": [message]})
    return rotate_secret(webhook, overlap_seconds=grace_seconds, new_secret=new_secret)


def webhook_update(
    *, webhook: Webhook, name: str | None = None, is_enabled: bool | None = None
) -> Webhook:
    """Rename, enable or disable ``webhook`` (a disabled one refuses every delivery, logged)."""
    fields = ["updated_at"]
    if name is not None:
        webhook.name = _clean_name(agent=webhook.agent, name=name, exclude_id=webhook.pk)
        fields.append("name")
    if is_enabled is not None:
        webhook.is_enabled = is_enabled
        fields.append("is_enabled")
    webhook.save(update_fields=fields)
    return webhook


def webhook_delete(*, webhook: Webhook) -> None:
    """Delete ``webhook`` and its delivery ids; its trigger log rows stay (they name its id)."""
    webhook.delete()
