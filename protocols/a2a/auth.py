"""Who an A2A request acts as: the API key in its ``Authorization: Bearer`` header, checked as the
REST API checks it (core.api.authentication: revoked, expired, inactive agency; failures counted
against the client's address, 429 once it has none left; the key's burst and sustained rates,
shared with its REST requests, 429 past them), and the agent of its path, which the
key's role must be allowed to run (protocols.runs.exposed_agents). Another agency's agent, an
agent the role may not run, an inactive one and a made-up id are the same 404."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from asgiref.sync import sync_to_async
from django.db import connections
from rest_framework.exceptions import AuthenticationFailed, Throttled

from core.api.authentication import api_key_authenticate
from core.api.throttling import BadCredentialThrottle, BurstRateThrottle, SustainedRateThrottle
from core.models.api_keys import ApiKey
from protocols.runs import ExposedAgent, exposed_agents, in_agency


class Refusal(Exception):
    """An HTTP refusal before any JSON-RPC: ``status``, and the API's error ``code`` and
    ``message``."""

    def __init__(
        self, status: int, code: str, message: str, retry_after: int | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retry_after = retry_after


def key_for(raw: str, address: str | None) -> ApiKey:
    """The usable key ``raw``, its request counted against the key's burst and sustained
    rates (the counters its REST requests count against); else a :class:`Refusal`."""
    throttle = BadCredentialThrottle()
    try:
        throttle.refuse_address_if_exhausted(address)
    except Throttled as throttled:
        raise Refusal(429, "throttled", str(throttled.detail), int(throttle.wait())) from None
    try:
        key = api_key_authenticate(raw)
    except AuthenticationFailed as failed:
        throttle.record_address_failure(address)
        raise Refusal(401, "authentication_failed", str(failed.detail)) from None
    counted = SimpleNamespace(auth=key, user=None)  # what the throttles read of a request
    for limit in (BurstRateThrottle(), SustainedRateThrottle()):
        if not limit.allow_request(counted, None):  # type: ignore[arg-type]
            wait = int(limit.wait())
            message = f"Request was throttled. Expected available in {wait} seconds."
            raise Refusal(429, "throttled", message, wait)
    return key


def _closing(raw: str, address: str | None) -> ApiKey:
    try:
        return key_for(raw, address)
    finally:
        connections.close_all()  # a worker thread's connection goes back to the pool now


async def authenticate(authorization: str | None, address: str | None) -> ApiKey:
    """The key of an ``Authorization: Bearer <key>`` header, or a :class:`Refusal`."""
    scheme, _, raw = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise Refusal(
            401,
            "not_authenticated",
            "Send an AgentDesk API key: Authorization: Bearer adk_<prefix>_<secret>.",
        )
    return await sync_to_async(_closing, thread_sensitive=False)(raw.strip(), address)


def _exposed(*, agent_id: str, role: str) -> ExposedAgent | None:
    try:
        pk = uuid.UUID(agent_id)
    except ValueError:
        return None
    for exposed in exposed_agents(role=role):
        if exposed.agent.pk == pk:
            # Read here, in the agency's transaction: the card names the agent's version.
            exposed.agent.current_version  # noqa: B018
            return exposed
    return None


async def exposed_agent(key: ApiKey, agent_id: str) -> ExposedAgent:
    """The agent ``agent_id`` as ``key`` may run it, or a 404 :class:`Refusal`."""
    exposed = await in_agency(key.agency_id, _exposed, agent_id=agent_id, role=key.role)
    if exposed is None:
        raise Refusal(404, "not_found", "No such agent.")
    return exposed
