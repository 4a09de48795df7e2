"""An exposed agent's A2A agent card: who it is, the one skill it offers (running it), where its
JSON-RPC endpoint is, and how to authenticate there (the product's API key as a bearer token)."""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3, PROTOCOL_VERSION_1_0, TransportProtocol
from google.protobuf.struct_pb2 import Struct

from protocols.runs import ExposedAgent

SECURITY_SCHEME = "agentdeskApiKey"
# The agent's declared inputs (agents/inputs.py), for clients: what a message's data part holds.
INPUTS_EXTENSION = "https://agentdesk.dev/a2a/extensions/declared-inputs/v1"
TEXT = "text/plain"
JSON = "application/json"


def _examples(examples: Any) -> list[str]:
    """The agent's few-shot examples' inputs, where they are plain text."""
    found: list[str] = []
    for example in examples if isinstance(examples, list) else []:
        text = example.get("input") if isinstance(example, dict) else example
        if isinstance(text, str) and text.strip():
            found.append(text.strip()[:500])
    return found[:5]


def _inputs_extension(schema: dict[str, Any]) -> list[AgentExtension]:
    """The declared inputs as an extension of the card: its ``params.schema`` is the JSON Schema
    a message's data part must match; required when some input is."""
    if not schema:
        return []
    params = Struct()
    params.update({"schema": schema})
    return [
        AgentExtension(
            uri=INPUTS_EXTENSION,
            description="The data part of a message (a JSON object) must match params.schema "
            "(JSON Schema 2020-12); a text part, optional then, adds an instruction.",
            required=bool(schema.get("required")),
            params=params,
        )
    ]


def agent_card(*, exposed: ExposedAgent, endpoint_url: str, provider_url: str) -> AgentCard:
    """The card of ``exposed``, served at ``<endpoint_url>.well-known/agent-card.json``."""
    agent = exposed.agent
    tags = [tag for tag in (agent.agent_type, agent.domain, *agent.capabilities) if tag]
    return AgentCard(
        name=agent.name,
        description=exposed.description,
        version=str(agent.current_version.number) if agent.current_version else "1",
        provider=AgentProvider(organization="AgentDesk", url=provider_url),
        supported_interfaces=[
            AgentInterface(
                url=endpoint_url,
                protocol_binding=TransportProtocol.JSONRPC.value,
                protocol_version=version,
            )
            for version in (PROTOCOL_VERSION_1_0, PROTOCOL_VERSION_0_3)
        ],
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=False,
            extensions=_inputs_extension(agent.input_schema),
        ),
        security_schemes={
            SECURITY_SCHEME: SecurityScheme(
                http_auth_security_scheme=HTTPAuthSecurityScheme(
                    scheme="Bearer",
                    bearer_format="AgentDesk API key (adk_...)",
                    description=(
                        "An AgentDesk API key of the agent's agency with the admin or staff "
                        "role: Authorization: Bearer adk_<prefix>_<secret>."
                    ),
                )
            )
        },
        security_requirements=[SecurityRequirement(schemes={SECURITY_SCHEME: StringList()})],
        default_input_modes=[TEXT, JSON],
        default_output_modes=[TEXT, JSON],
        skills=[
            AgentSkill(
                id=exposed.name,
                name=agent.name,
                description=exposed.description,
                tags=tags or ["agent"],
                examples=_examples(agent.examples),
                input_modes=[TEXT, JSON],
                output_modes=[TEXT, JSON],
            )
        ],
    )
