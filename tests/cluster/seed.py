"""An agency of a test cluster, made on one of its nodes: an agent whose provider is the fake
model server on the node's loopback (each node runs one at the same port), a contact for its
notes, and an admin API key. Prints them as JSON.

    python -m tests.cluster.seed MODEL PROVIDER_URL   (DATABASE_URL etc. of the cluster set)
"""

from __future__ import annotations

import json
import os
import sys


def main(model: str, provider_url: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    import django

    django.setup()
    from agents.models import LLMProvider
    from core import tenancy
    from core.api_keys.services import api_key_create
    from core.models import Role
    from crm.models import Contact
    from tests.agents.factories import AgentFactory
    from tests.factories import AgencyFactory, SiteFactory

    agency = AgencyFactory.create()
    site = SiteFactory.create(agency=agency)
    with tenancy.agency_context(agency.id):
        provider = LLMProvider(agency=agency, provider_name="openai", api_endpoint=provider_url)
        provider.set_api_key("test-key-not-real")
        provider.save()
        agent = AgentFactory.create(
            agency=agency, site=site, llm_provider="openai", llm_model=model,
            allowed_tools=["crm_*"], timeout_seconds=600,
        )  # fmt: skip
        contact = Contact.objects.create(agency_id=agency.id, first_name="Ola")
        _key, secret = api_key_create(agency_id=agency.id, name="cluster test", role=Role.ADMIN)
    seeded = {"agent": str(agent.id), "contact": str(contact.id), "key": secret}
    sys.stdout.write(json.dumps(seeded) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
