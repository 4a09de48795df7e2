"""The demo agency `manage.py up` seeds: what it holds, that a second seed changes nothing and
keeps people's edits, and that every row stays in its own agency."""

from __future__ import annotations

import json
import threading
from io import StringIO
from typing import Any

import pytest
from django_celery_beat.models import PeriodicTask

from agents.models import Agent, AgentType, LLMProvider, ProviderName
from agents.schedules import periodic_task_name
from approvals.models import RiskRule
from core import tenancy
from core.models import Agency, Membership, Role, Site, User
from crm.models import Contact, Note, Task
from datasets.models import Dataset
from devkit.demo import DEMO_AGENCY_SLUG, demo_data_seed, demo_model_port, demo_seed
from devkit.demo.data import AGENTS, CONTACTS, GUARDIAN_SCHEDULE, RENEWAL_MANAGER
from devkit.fake_server.demo import DEMO_MODEL
from devkit.management.commands.up import Command as UpCommand
from tests.factories import AgencyFactory, SiteFactory

pytestmark = pytest.mark.django_db
URL = "http://127.0.0.1:41001/v1"


def _snapshot(agency: Agency) -> dict[str, Any]:
    """Every demo row of ``agency`` with its last change, and the logins' password hashes."""
    with tenancy.agency_context(agency.id):
        rows: dict[str, Any] = {
            model.__name__: sorted(
                (str(pk), str(updated))
                for pk, updated in model.objects.filter(agency=agency).values_list(
                    "pk", "updated_at"
                )
            )
            for model in (Agent, Contact, Note, Task, LLMProvider, RiskRule, Site, Membership)
        }
    rows["users"] = sorted(User.objects.values_list("username", "password"))
    rows["schedules"] = sorted(PeriodicTask.objects.values_list("name", "date_changed"))
    return rows


def _agents(agency: Agency) -> dict[str, Agent]:
    with tenancy.agency_context(agency.id):
        return {agent.slug: agent for agent in Agent.objects.filter(agency=agency)}


def test_the_demo_agency_has_agents_of_every_type_on_the_demo_model() -> None:
    seed = demo_seed(model_url=URL)

    agency = seed.agency
    assert agency.slug == DEMO_AGENCY_SLUG
    agents = _agents(agency)
    assert {a.agent_type for a in agents.values()} == set(AgentType.values)
    for agent in agents.values():
        assert agent.is_active
        assert (agent.llm_provider, agent.llm_model) == (ProviderName.OPENAI_COMPATIBLE, DEMO_MODEL)
        assert DEMO_MODEL in agent.description
    # Exactly one on a cron schedule, with its beat entry.
    scheduled = [a for a in agents.values() if a.trigger_schedule]
    assert [(a.slug, a.trigger_schedule) for a in scheduled] == [
        ("security-guardian", GUARDIAN_SCHEDULE)
    ]
    entry = PeriodicTask.objects.get(name=periodic_task_name(scheduled[0]))
    assert json.loads(entry.kwargs) == {"agency_id": str(agency.id)}
    # The SDR may send e-mail (a dangerous tool, so every send waits for an approval).
    assert "email_send" in agents["sdr-agent"].allowed_tools
    # The orchestrator may delegate to the renewal manager, and to no other agent.
    orchestrator = agents["cs-orchestrator"]
    assert "delegate_to_agent" in orchestrator.allowed_tools
    assert orchestrator.delegate_agents == [RENEWAL_MANAGER]
    assert len(agents) == len(AGENTS) == 7
    # The data analyst understands a request before acting, over the demo dataset.
    analyst = agents["data-analyst"]
    assert analyst.understanding_enabled
    assert "execute_sql" in analyst.allowed_tools
    with tenancy.agency_context(agency.id):
        provider = LLMProvider.objects.get(agency=agency)
        contacts = Contact.objects.filter(agency=agency)
        rule = RiskRule.objects.get(agency=agency)
        dataset = Dataset.objects.get(agency=agency)
        assert contacts.count() == len(CONTACTS) >= 12
        assert set(contacts.values_list("status", flat=True)) >= {"lead", "customer", "active"}
        assert Note.objects.filter(agency=agency).exists()
        assert Task.objects.filter(agency=agency, contact__isnull=False).exists()
        memberships = dict(
            Membership.objects.filter(agency=agency).values_list("user__username", "role")
        )
    assert (provider.provider_name, provider.api_endpoint) == (ProviderName.OPENAI_COMPATIBLE, URL)
    assert provider.default_model == DEMO_MODEL
    assert provider.is_default
    assert not provider.has_api_key
    assert (rule.tool_pattern, rule.risk_level, rule.requires_approval) == (
        "email_send",
        "high",
        True,
    )
    assert (dataset.name, dataset.row_count) == ("customer_sales", 8)
    assert memberships == {"demo": Role.ADMIN, "approver": Role.APPROVER}
    for user in (seed.admin, seed.approver):
        assert user.is_staff
        assert user.check_password("demo-agentdesk")


def test_up_reports_what_the_seed_made_in_words_and_plurals_right() -> None:
    seed = demo_seed(model_url=URL)
    up = UpCommand(stdout=StringIO())
    up._output_lock = threading.Lock()  # as handle() sets it

    up._report_seed(seed)

    line = up.stdout._out.getvalue()  # type: ignore[attr-defined]  # OutputWrapper's stream
    assert "1 agency, 2 logins, 1 LLM provider, " in line, line
    assert "1 risk rule, 1 model price" in line, line  # it said "1 prices"
    assert "_" not in line.split("seeded: ")[1], line  # no internal kind ("risk_rules")


def test_seeding_twice_changes_nothing() -> None:
    first = demo_seed(model_url=URL)
    before = _snapshot(first.agency)

    second = demo_seed(model_url=URL)

    assert not second.changed, second.created
    assert second.agency == first.agency
    assert _snapshot(first.agency) == before


def test_seeding_again_keeps_what_people_edited_and_deleted() -> None:
    agency = demo_seed(model_url=URL).agency
    agents = _agents(agency)
    with tenancy.agency_context(agency.id):
        alex = agents["alex"]
        alex.system_prompt, alex.is_active = "Only answer in haiku.", False
        alex.save()
        agents["bi-agent"].delete()
        Contact.objects.filter(agency=agency, email__startswith="priya").update(status="customer")
        RiskRule.objects.filter(agency=agency).update(risk_level="medium")
        Membership.objects.filter(user__username="demo").update(role=Role.STAFF)

    demo_seed(model_url="http://127.0.0.1:41002/v1")

    agents = _agents(agency)
    with tenancy.agency_context(agency.id):
        assert (agents["alex"].system_prompt, agents["alex"].is_active) == (
            "Only answer in haiku.",
            False,
        )
        priya = Contact.objects.get(agency=agency, email__startswith="priya")
        assert priya.status == "customer"
        assert RiskRule.objects.get(agency=agency).risk_level == "medium"
        assert Membership.objects.get(user__username="demo").role == Role.STAFF
    # A deleted agent comes back (seeding creates what is missing); the rest is as left.
    assert "bi-agent" in agents


def test_the_demo_provider_follows_the_demo_model_only_while_it_is_the_demos_own() -> None:
    agency = demo_seed(model_url=URL).agency
    assert demo_model_port() == 41001

    demo_seed(model_url="http://127.0.0.1:41002/v1")  # the old port was taken: a new one
    with tenancy.agency_context(agency.id):
        provider = LLMProvider.objects.get(agency=agency)
    assert provider.api_endpoint == "http://127.0.0.1:41002/v1"

    # Someone points it at their own server: seeding no longer touches it.
    with tenancy.agency_context(agency.id):
        provider.api_endpoint = "http://10.0.0.5:11434/v1"
        provider.default_model = "llama3.2"
        provider.save()
    demo_seed(model_url="http://127.0.0.1:41003/v1")
    with tenancy.agency_context(agency.id):
        provider.refresh_from_db()
    assert (provider.api_endpoint, provider.default_model) == (
        "http://10.0.0.5:11434/v1",
        "llama3.2",
    )
    assert demo_model_port() is None


def test_demo_data_lands_in_its_own_agency_only() -> None:
    other = AgencyFactory.create()
    SiteFactory.create(agency=other)
    demo = demo_seed(model_url=URL).agency
    created = demo_data_seed(agency=other, model_url=URL)

    assert created["agents"] == len(AGENTS)
    assert created["contacts"] == len(CONTACTS)
    for agency in (demo, other):
        with tenancy.agency_context(agency.id):
            # Row-level security shows one agency; every row seen is that agency's own.
            for model in (Agent, Contact, Note, Task, LLMProvider, Site):
                agencies = set(model.objects.values_list("agency_id", flat=True))
                assert agencies == {agency.id}, model
            assert set(RiskRule.objects.values_list("agency_id", flat=True)) == {agency.id, None}
            sites = set(Site.objects.values_list("id", flat=True))
            assert set(Agent.objects.values_list("site_id", flat=True)) <= sites
            assert set(Contact.objects.values_list("site_id", flat=True)) <= sites
    with tenancy.platform_context():
        assert Contact.objects.filter(email=CONTACTS[0]["email"]).count() == 2
    for agency in (demo, other):
        guardian = _agents(agency)["security-guardian"]
        entry = PeriodicTask.objects.get(name=periodic_task_name(guardian))
        assert json.loads(entry.kwargs) == {"agency_id": str(agency.id)}
