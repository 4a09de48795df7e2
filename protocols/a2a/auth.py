"""Who an A2A request acts as: the API key in its ``Authorization: Bearer`` header, checked as the
REST API checks it (protocols.keys), and the agent of its path, which the
key's role must be allowed to run (protocols.runs.exposed_agents). Another agency's agent, an
agent the role may not run, an inactive one and a made-up id are the same 404."""

from __future__ import annotations

import uuid

from asgiref.sync import sync_to_async
from django.db import connections

from core.models.api_keys import ApiKey
from protocols.keys import Refusal, key_for
from protocols.runs import ExposedAgent, exposed_agents, in_agency


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
