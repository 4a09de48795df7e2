"""Webhook factories: a webhook takes its agency from its agent."""

from __future__ import annotations

import uuid
from typing import Any

import factory

from core import crypto
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory, TenantFactory
from webhooks.models import Delivery, Subscription, Webhook, WebhookDelivery, new_secret
from webhooks.outbound import signing as outbound_signing

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


class SubscriptionFactory(TenantFactory[Subscription]):
    class Meta:
        model = Subscription

    agency = factory.SubFactory(AgencyFactory)
    name = factory.Sequence(lambda n: f"Outbound {n}")
    url = "https://hooks.example.com/agentdesk"
    event_types = factory.LazyFunction(lambda: ["ai.execution.failed"])

    @classmethod
    def _create(cls, model_class: type[Subscription], *args: Any, **kwargs: Any) -> Subscription:
        kwargs["secret_encrypted"] = crypto.encrypt(outbound_signing.new_secret())
        return super()._create(model_class, *args, **kwargs)


class OutboundDeliveryFactory(TenantFactory[Delivery]):
    class Meta:
        model = Delivery

    subscription = factory.SubFactory(SubscriptionFactory)
    agency = factory.SelfAttribute("subscription.agency")
    event_id = factory.LazyFunction(uuid.uuid4)
    event_type = "ai.execution.failed"
    payload = factory.LazyFunction(lambda: {"type": "ai.execution.failed", "data": {}})
