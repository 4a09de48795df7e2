"""Webhook factories: a webhook takes its agency from its agent."""

from __future__ import annotations

from typing import Any

import factory

from core import crypto
from tests.agents.factories import AgentFactory
from tests.factories import TenantFactory
from webhooks.models import Webhook, WebhookDelivery, new_secret

# What WebhookFactory rows are signed with (tests that need their own secret use webhook_create).
FACTORY_SECRET = new_secret()


class WebhookFactory(TenantFactory[Webhook]):
    class Meta:
        model = Webhook

    agent = factory.SubFactory(AgentFactory)
    agency = factory.SelfAttribute("agent.agency")
    name = factory.Sequence(lambda n: f"Webhook {n}")

    @classmethod
    def _create(cls, model_class: type[Webhook], *args: Any, **kwargs: Any) -> Webhook:
        kwargs["secret_encrypted"] = crypto.encrypt(FACTORY_SECRET)
        return super()._create(model_class, *args, **kwargs)


class WebhookDeliveryFactory(TenantFactory[WebhookDelivery]):
    class Meta:
        model = WebhookDelivery

    webhook = factory.SubFactory(WebhookFactory)
    agency = factory.SelfAttribute("webhook.agency")
    delivery_id = factory.Sequence(lambda n: f"delivery-{n}")
