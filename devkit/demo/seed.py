"""Writers of the demo agency that ``manage.py up`` seeds (unless ``--no-demo``).

Idempotent and hands-off: each row is created only when missing (agents by slug on the agency's
first site, contacts by e-mail, the risk rule by name, logins by user name), so running ``up``
again changes nothing and never overwrites what someone edited. The one exception is the demo
provider's endpoint, which follows the demo model's port while the row still is the demo's own
(loopback, no API key, the demo model as its default model): see :func:`demo_provider_sync`.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents.models import Agent, AgentTemplate, LLMProvider, ProviderName
from agents.services import agent_create_from_template
from approvals.models import RiskRule
from core import tenancy
from core.models import Agency, Membership, Role, Site, User
from core.services import agency_create
from crm.models import Contact, ContactSource, Note, Task
from datasets.models import Dataset
from datasets.services import dataset_upload
from devkit.demo.data import (
    AGENTS,
    CONTACTS,
    DATASETS,
    DEMO_AGENCY_NAME,
    DEMO_AGENCY_SLUG,
    MEMORIES,
    RISK_RULE,
    ContactSpec,
)
from devkit.fake_server.demo import DEMO_MODEL
from memory.models import Memory
from memory.services import memory_store
from usage.models import ModelPrice

LOOPBACK = "127.0.0.1"


@dataclass
class DemoSeed:
    agency: Agency
    admin: User
    approver: User
    created: dict[str, int] = field(default_factory=dict)  # what this call created, by kind

    @property
    def changed(self) -> bool:
        return any(self.created.values())


def _login(*, username: str, agency: Agency, role: str, created: dict[str, int]) -> User:
    """A staff login of ``agency`` with the demo password; an existing user keeps its membership
    and is saved only if something differs (the password printed by ``up`` must work)."""
    user = User.objects.filter(username=username).first()
    if user is None:
        user = User(username=username, email=f"{username}@example.com")
        created["logins"] = created.get("logins", 0) + 1
    password = settings.DEMO_ADMIN_PASSWORD
    if user.pk is None or not (user.is_staff and user.is_active and user.check_password(password)):
        user.is_staff = user.is_active = True
        user.set_password(password)
        user.save()
    if not Membership.objects.filter(user=user).exists():
        with tenancy.agency_context(agency.id):
            Membership.objects.create(agency=agency, user=user, role=role)
    return user


@transaction.atomic
def demo_seed(*, model_url: str | None) -> DemoSeed:
    """The demo agency, its admin and approver logins and, with ``model_url`` (the demo model's
    OpenAI-compatible base URL), its provider, agents, contacts and risk rule. Platform-wide:
    runs outside any one tenant."""
    created: dict[str, int] = {}
    with tenancy.platform_context():
        agency = Agency.objects.filter(slug=DEMO_AGENCY_SLUG).first()
        if agency is None:
            agency = agency_create(name=DEMO_AGENCY_NAME, slug=DEMO_AGENCY_SLUG)
            created["agencies"] = 1
        admin = _login(
            username=settings.DEMO_ADMIN_USERNAME, agency=agency, role=Role.ADMIN, created=created
        )
        approver = _login(
            username=settings.DEMO_APPROVER_USERNAME,
            agency=agency,
            role=Role.APPROVER,
            created=created,
        )
    seed = DemoSeed(agency=agency, admin=admin, approver=approver, created=created)
    if model_url is not None:
        for kind, count in demo_data_seed(agency=agency, model_url=model_url, user=admin).items():
            created[kind] = created.get(kind, 0) + count
    return seed


@transaction.atomic
def demo_data_seed(*, agency: Agency, model_url: str, user: User | None = None) -> dict[str, int]:
    """The demo provider, agents, contacts, memories and risk rule in ``agency`` (its first
    site), each only if missing. Returns how many of each were created (or, for the provider,
    updated)."""
    created: dict[str, int] = {}
    with tenancy.agency_context(agency.id):
        site = Site.objects.filter(agency=agency).order_by("created_at").first()
        if site is None:
            site = Site.objects.create(agency=agency, name=f"{agency.name} main site")
        if demo_provider_sync(agency=agency, model_url=model_url):
            created["providers"] = 1
        created["agents"] = _agents(agency=agency, site=site, user=user)
        created["contacts"] = _contacts(agency=agency, site=site)
        created["memories"] = _memories(agency=agency, site=site)
        created["risk_rules"] = _risk_rule(agency=agency)
        created["prices"] = _price(agency=agency)
        created["datasets"] = _datasets(agency=agency)
    return created


def _is_demo_endpoint(url: str) -> bool:
    parts = urlsplit(url)
    return parts.scheme == "http" and parts.hostname == LOOPBACK and parts.path == "/v1"


def demo_model_port() -> int | None:
    """The port the demo agency's provider points at, if it is on loopback: ``up`` starts the
    demo model there again when it is free, so the row need not change."""
    with tenancy.platform_context():
        agency = Agency.objects.filter(slug=DEMO_AGENCY_SLUG).first()
    if agency is None:
        return None
    with tenancy.agency_context(agency.id):
        endpoint = (
            LLMProvider.objects.filter(
                agency=agency, site__isnull=True, provider_name=ProviderName.OPENAI_COMPATIBLE
            )
            .values_list("api_endpoint", flat=True)
            .first()
        )
    return urlsplit(endpoint).port if endpoint and _is_demo_endpoint(endpoint) else None


def demo_provider_sync(*, agency: Agency, model_url: str) -> bool:
    """The agency-wide OpenAI-compatible provider pointed at the demo model: created when
    missing, its endpoint moved to ``model_url`` while it is still the demo's own (loopback
    endpoint, no API key, the demo model as default model). A row someone pointed elsewhere,
    gave a key or another default model is left alone. True if it was written. Precondition:
    in the agency's context."""
    row = LLMProvider.objects.filter(
        agency=agency, site__isnull=True, provider_name=ProviderName.OPENAI_COMPATIBLE
    ).first()
    if row is None:
        has_default = LLMProvider.objects.filter(
            agency=agency, site__isnull=True, is_default=True
        ).exists()
        LLMProvider.objects.create(
            agency=agency,
            provider_name=ProviderName.OPENAI_COMPATIBLE,
            api_endpoint=model_url,
            available_models=[DEMO_MODEL],
            default_model=DEMO_MODEL,
            is_default=not has_default,
        )
        return True
    demo_owned = (
        not row.has_api_key
        and row.default_model == DEMO_MODEL
        and _is_demo_endpoint(row.api_endpoint)
    )
    if not demo_owned or row.api_endpoint == model_url:
        return False
    row.api_endpoint = model_url
    row.save(update_fields=["api_endpoint", "updated_at"])
    return True


def _agents(*, agency: Agency, site: Site, user: User | None) -> int:
    existing = set(Agent.objects.filter(site=site).values_list("slug", flat=True))
    count = 0
    for spec in AGENTS:
        if spec["slug"] in existing:
            continue
        template = AgentTemplate.objects.get(slug=spec["template"], agency__isnull=True)
        agent_create_from_template(
            template=template,
            agency_id=agency.id,
            site=site,
            user_id=user.pk if user else None,
            **spec["overrides"],
        )
        count += 1
    return count


def _datasets(*, agency: Agency) -> int:
    existing = set(Dataset.objects.filter(agency=agency).values_list("name", flat=True))
    count = 0
    for spec in DATASETS:
        if spec["name"] in existing:
            continue
        dataset_upload(
            agency=agency,
            name=spec["name"],
            file_name=f"{spec['name']}.csv",
            content=spec["csv"].encode(),
            title=spec["title"],
            description=spec["description"],
        )
        count += 1
    return count


def _contacts(*, agency: Agency, site: Site) -> int:
    existing = {
        email.lower()
        for email in Contact.objects.filter(agency=agency).values_list("email", flat=True)
    }
    now = timezone.now()
    count = 0
    for spec in CONTACTS:
        if spec["email"].lower() in existing:
            continue
        _contact(agency_id=agency.id, site=site, spec=spec, now=now)
        count += 1
    return count


def _contact(
    *, agency_id: uuid.UUID, site: Site, spec: ContactSpec, now: datetime.datetime
) -> Contact:
    fields = {k: v for k, v in spec.items() if k not in ("notes", "tasks")}
    contact = Contact.objects.create(
        agency_id=agency_id, site=site, source=ContactSource.IMPORT, **fields
    )
    for kind, content in spec.get("notes", []):
        Note.objects.create(agency_id=agency_id, contact=contact, kind=kind, content=content)
    for title, priority, days in spec.get("tasks", []):
        Task.objects.create(
            agency_id=agency_id,
            site=site,
            contact=contact,
            title=title,
            priority=priority,
            due_at=(now + datetime.timedelta(days=days)).replace(
                hour=9, minute=0, second=0, microsecond=0
            ),
        )
    return contact


def _memories(*, agency: Agency, site: Site) -> int:
    """The demo agents' first memories, each once per agent (by its text): stored without an
    embedding, which a worker adds (memory.embed_pending) once one runs."""
    count = 0
    for spec in MEMORIES:
        agent = Agent.objects.filter(site=site, slug=spec["agent"]).first()
        contact = Contact.objects.filter(agency=agency, email__iexact=spec["contact"]).first()
        if agent is None or contact is None:
            continue
        if Memory.objects.filter(agent=agent, content=spec["content"]).exists():
            continue
        memory_store(
            agent=agent,
            content=spec["content"],
            memory_type=spec["memory_type"],
            subject_type="contact",
            subject_id=contact.id,
            importance=spec["importance"],
            tags=["demo"],
            source="demo seed",
            embed_now=False,
        )
        count += 1
    return count


def _risk_rule(*, agency: Agency) -> int:
    if RiskRule.objects.filter(agency=agency, name=RISK_RULE["name"]).exists():
        return 0
    RiskRule.objects.create(agency=agency, **RISK_RULE)
    return 1


# USD per million input and output tokens: what a small hosted model costs (illustrative).
DEMO_PRICE_PER_MTOK = (Decimal("0.15"), Decimal("0.60"))


def _price(*, agency: Agency) -> int:
    """An illustrative price for the demo model (a small hosted model's), so that the demo's
    runs cost something and the home's and usage pages' cost charts show them."""
    prices = ModelPrice.objects.filter(
        agency=agency, provider=ProviderName.OPENAI_COMPATIBLE, model=DEMO_MODEL
    )
    if prices.exists():
        return 0
    ModelPrice.objects.create(
        agency=agency,
        provider=ProviderName.OPENAI_COMPATIBLE,
        model=DEMO_MODEL,
        input_per_mtok=DEMO_PRICE_PER_MTOK[0],
        output_per_mtok=DEMO_PRICE_PER_MTOK[1],
    )
    return 1
