"""Property-based fuzzing of the whole API from its OpenAPI schema (schemathesis).

Every operation is called with generated requests (valid and invalid), twice: authenticated with
an admin API key of agency A, which has one of every kind of object, and with an admin key of
agency B. No response may be a 5xx, and every response must match what the schema documents.
Generated ids are often swapped for ids of A's real rows — for A, so that the fuzzing reaches
the services and not only the 404 path; for B, to try to reach A's rows — and no response to B
may contain any of A's ids (no cross-tenant read). No response to either contains A's LLM
provider key. Bounded: a fixed number of examples per operation, deterministic, so the run is
repeatable and short.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from agents.models import ExecutionStatus
from agents.services import agent_update
from core import tenancy
from core.api_keys.services import api_key_create
from core.models import Role
from tests.agents.factories import (
    AgentFactory,
    ExecutionFactory,
    ExecutionStepFactory,
    LLMProviderFactory,
)
from tests.api.conftest import EXPECTED_OPERATIONS, make_tenant
from tests.approvals.factories import ApprovalFactory, RiskRuleFactory
from tests.core.factories import EventFactory
from tests.memory.factories import MemoryFactory
from tests.tools.factories import ToolFactory
from tests.usage.factories import (
    BudgetFactory,
    ModelPriceFactory,
    UsageDailyFactory,
    UsagePeriodFactory,
)

# A longer, random (not derandomized) hunt:
#     AGENTDESK_FUZZ_EXAMPLES=500 pytest tests/api/test_fuzz.py
HUNT_EXAMPLES = int(os.environ.get("AGENTDESK_FUZZ_EXAMPLES", "0"))
MAX_EXAMPLES = HUNT_EXAMPLES or 30
# As agency B, most answers are 404s for A's ids: fewer examples find what there is to find.
OTHER_AGENCY_EXAMPLES = HUNT_EXAMPLES or 15
# Agency A's LLM provider key: in no response, to anyone.
PROVIDER_KEY = "sk-fuzz-provider-key-0123456789"


@dataclass
class World:
    key: str  # agency A's admin key
    other_key: str  # agency B's admin key
    ids: dict[str, list[str]] = field(default_factory=dict)  # A's rows, by resource path

    def a_ids(self) -> set[str]:
        return {value for values in self.ids.values() for value in values}


@pytest.fixture
def world(db: None) -> World:
    tenant = make_tenant()
    agents = [
        AgentFactory.create(
            agency=tenant.agency, site=tenant.site, trigger_events=["crm.contact.created"]
        )
        for _ in range(2)
    ]
    with tenancy.agency_context(tenant.agency.id):
        for agent in agents:  # versions 1 and 2 (factories write rows without versions)
            agent_update(agent=agent, system_prompt="Fuzzed.")
            agent_update(agent=agent, max_steps_per_run=5)
    executions = [ExecutionFactory.create(agent=agent) for agent in agents]
    ExecutionStepFactory.create(execution=executions[0], step_number=1)
    approvals = [
        ApprovalFactory.create(
            tool_call__execution__agent=agent,
            tool_call__execution__status=ExecutionStatus.WAITING_APPROVAL,
        )
        for agent in agents
    ]
    memories = [MemoryFactory.create(agent=agent) for agent in agents]
    for agent in agents:
        UsageDailyFactory.create(agent=agent)
    events = [EventFactory.create(agency=tenant.agency)]
    tools = [ToolFactory.create(agency=tenant.agency)]
    providers = [
        LLMProviderFactory.create(agency=tenant.agency, api_key=PROVIDER_KEY),
        LLMProviderFactory.create(agency=tenant.agency, site=tenant.site, provider_name="google"),
    ]
    prices = [ModelPriceFactory.create(agency=tenant.agency)]
    rules = [RiskRuleFactory.create(agency=tenant.agency)]
    budgets = [BudgetFactory.create(agency=tenant.agency)]
    periods = [UsagePeriodFactory.create(agency=tenant.agency)]
    with tenancy.agency_context(tenant.agency.id):
        key, full_key = api_key_create(agency_id=tenant.agency.id, name="fuzz", role=Role.ADMIN)
        # Another key to revoke: revoking the fuzzing key itself would end the run early.
        spare, _ = api_key_create(agency_id=tenant.agency.id, name="spare")
    other = make_tenant()
    with tenancy.agency_context(other.agency.id):
        _key, other_key = api_key_create(agency_id=other.agency.id, name="b", role=Role.ADMIN)
    return World(
        key=full_key,
        other_key=other_key,
        ids={
            "agency": [str(tenant.agency.id)],
            "fuzzing-key": [str(key.id)],  # not a path: never swapped in (never revoked)
            "sites": [str(tenant.site.id)],
            "llm-providers": [str(p.id) for p in providers],
            "model-prices": [str(p.id) for p in prices],
            "risk-rules": [str(r.id) for r in rules],
            "budgets": [str(b.id) for b in budgets],
            "usage/periods": [str(p.id) for p in periods],
            "agents": [str(a.id) for a in agents],
            "executions": [str(e.id) for e in executions],
            "approvals": [str(a.id) for a in approvals],
            "events": [str(e.id) for e in events],
            "tools": [str(t.id) for t in tools],
            "memories": [str(m.id) for m in memories],
            "api-keys": [str(spare.id)],
        },
    )


@pytest.fixture
def api_schema(world: World) -> Iterator[Any]:
    """The schema as served at /api/schema/, with the Django app to call in-process."""
    # As Django's test client does: these handlers would close the test's connection (and so
    # its transaction) after every request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield schemathesis.openapi.from_wsgi("/api/schema/?format=json", WSGIHandler())
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


# Path parameters named after a resource other than the path's first segment.
ID_PARAMETERS = {"agent_id": "agents", "memory_id": "memories"}


def _use_known_ids(case: Any, world: World) -> None:
    """Swap a generated (valid) id for one of A's real ones most of the time, chosen from the id
    itself so that a run stays deterministic."""
    # The path up to its first parameter: "agents", "usage/periods".
    resource = case.operation.path.removeprefix("/api/v1/").split("/{")[0]
    for name, value in list((case.path_parameters or {}).items()):
        try:
            number = uuid.UUID(str(value)).int
        except ValueError:
            continue  # a malformed id stays: it must be a 404
        known = world.ids.get(ID_PARAMETERS.get(name, resource), [])
        choice = number % (len(known) + 1)
        if choice < len(known):
            case.path_parameters[name] = known[choice]


# Not schemathesis' pytest plugin (`from_fixture` + `parametrize`): with pytest 9 it fails on a
# pytest internal (`Function._nodeid`). The same strategies and checks, driven by Hypothesis.
@pytest.mark.slow
@pytest.mark.parametrize("as_agency", ["a", "b"])
@pytest.mark.parametrize("operation_id", sorted(EXPECTED_OPERATIONS))
def test_api_fuzz(api_schema: Any, world: World, operation_id: str, as_agency: str) -> None:
    operation = api_schema.find_operation_by_id(operation_id)
    cases = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )
    key = world.key if as_agency == "a" else world.other_key
    a_ids = world.a_ids()

    @settings(
        max_examples=MAX_EXAMPLES if as_agency == "a" else OTHER_AGENCY_EXAMPLES,
        derandomize=not HUNT_EXAMPLES,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases)
    def call(case: Any) -> None:
        _use_known_ids(case, world)
        response = case.call_and_validate(
            headers={"Authorization": f"Bearer {key}"},
            checks=[not_a_server_error, response_schema_conformance],
        )
        body = response.content.decode(errors="replace")
        request = (case.method, case.path, case.path_parameters, case.query)
        assert PROVIDER_KEY not in body, request
        if as_agency == "b":
            leaked = sorted(i for i in a_ids if i in body)
            assert not leaked, (leaked, request, body[:500])

    call()
