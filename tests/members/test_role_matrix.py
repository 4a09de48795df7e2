"""The four roles, alike in the admin and over the API, as a matrix.

What each role may do (README "Members and roles"):

- viewer: reads everything of the agency but API keys, invitations and webhooks;
- approver: a viewer who also decides approvals and answers questions;
- staff: a viewer who also configures agents, tools per agent, risk rules, CRM data, runs agents
  (but decides nothing);
- admin: everything staff do, decides, and manages members, invitations, LLM providers, model
  prices, budgets and API keys.

Platform tools are changed by superusers only; run history is read-only for everyone.

The API half walks every operation of the OpenAPI schema and the admin half every agency-owned
model admin, so an endpoint or a page added later is in the matrix without being listed here: it
gets the default rule (everyone reads, staff and admins write) unless the table says otherwise.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib import admin
from django.test import Client
from rest_framework.test import APIClient

from core.admin_scoping import ReadOnlyAdminMixin
from core.models import Agency, AgencyOwnedModel, Role, User
from core.models.api_keys import ApiKey
from members.models import Invitation
from sso.models import SsoIdentity, SsoProvider
from tests.admin.conftest import member
from tests.admin.helpers import add_page, admin_url, change_url
from tests.admin.rows import ROWS
from tests.api.conftest import Tenant, key_client, token_client
from tests.members.helpers import invite

pytestmark = pytest.mark.django_db

ALL: frozenset[str] = frozenset(Role.values)
STAFF_UP: frozenset[str] = frozenset({Role.ADMIN, Role.STAFF})
DECIDERS: frozenset[str] = frozenset({Role.ADMIN, Role.APPROVER})
ADMINS: frozenset[str] = frozenset({Role.ADMIN})
NOBODY: frozenset[str] = frozenset()  # superusers only

# --- the API ----------------------------------------------------------------------------------

API_ADMIN_ONLY = {"api-keys", "invitations", "audit"}  # reads included
# An agent's inbound webhooks and the agency's outbound ones (their URLs, secrets' rotation,
# deliveries): staff and admins, reads included.
STAFF_ONLY = re.compile(r"^/api/v1/(agents/\{[^}]+\}/webhooks|outbound-webhooks)/")
API_ADMIN_WRITES = {"members", "llm-providers", "model-prices", "budgets"}
API_SUPERUSER_WRITES = {"tools"}  # the platform's tool catalogue (not agents/{id}/tools/)
DECISIONS = re.compile(r"/(decide|answer)/$")


def api_roles(path: str, method: str) -> frozenset[str]:
    """Who may call ``method path`` (a schema path: /api/v1/...)."""
    resource = path.removeprefix("/api/v1/").split("/")[0]
    rules: list[tuple[bool, frozenset[str]]] = [
        (bool(DECISIONS.search(path)), DECIDERS),
        (resource in API_ADMIN_ONLY, ADMINS),
        (bool(STAFF_ONLY.search(path)), STAFF_UP),
        (method == "get", ALL),
        (resource in API_ADMIN_WRITES, ADMINS),
        (resource in API_SUPERUSER_WRITES, NOBODY),
    ]
    return next((roles for applies, roles in rules if applies), STAFF_UP)


def _schema() -> dict[str, Any]:
    response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return dict(json.loads(response.content))


def _operations() -> list[tuple[str, str]]:
    """(method, path) of every operation that takes a credential (public ones, such as signed
    webhook deliveries, have no role to check)."""
    found = []
    for path, methods in _schema()["paths"].items():
        for method, operation in methods.items():
            if {} in operation.get("security", [{}]):
                continue
            found.append((method, path))
    return sorted(found)


def _with_required_query() -> set[tuple[str, str]]:
    """(method, path) of the operations with a required query parameter (a comparison's ids)."""
    return {
        (method, path)
        for path, methods in _schema()["paths"].items()
        for method, operation in methods.items()
        if any(p["in"] == "query" and p.get("required") for p in operation.get("parameters", []))
    }


def _call(client: APIClient, method: str, path: str, query: str = "") -> Any:
    url = re.sub(r"\{[^}]+\}", lambda _m: str(uuid.uuid4()), path) + query
    if method in {"post", "put", "patch"}:
        return getattr(client, method)(url, {}, format="json")
    return getattr(client, method)(url)


def test_the_schema_has_the_operations_the_matrix_is_about(db: None) -> None:
    paths = {path for _method, path in _operations()}
    for expected in (
        "/api/v1/members/", "/api/v1/invitations/", "/api/v1/api-keys/", "/api/v1/agents/",
        "/api/v1/approvals/{id}/decide/",
    ):  # fmt: skip
        assert expected in paths


@pytest.mark.parametrize("credential", ["token", "api key"])
@pytest.mark.parametrize("role", Role.values)
def test_every_api_operation_follows_the_role_table(
    tenant_a: Tenant, role: str, credential: str
) -> None:
    client = (
        token_client(tenant_a.users[role])
        if credential == "token"
        else key_client(tenant_a.agency, role)
    )
    wrong = []
    needs_query = _with_required_query()  # asked without it: 400, past the role check
    for method, path in _operations():
        allowed = role in api_roles(path, method)
        response = _call(client, method, path)
        if allowed:
            ok = response.status_code not in (401, 403)
            if method == "get" and "{" not in path and (method, path) not in needs_query:
                ok = response.status_code == 200
        else:
            ok = response.status_code == 403 and response.json()["code"] == "permission_denied"
        if not ok:
            wrong.append((method.upper(), path, response.status_code, allowed))
    assert wrong == [], f"{role} ({credential}): (method, path, status, allowed?) {wrong}"


def test_superusers_may_call_every_operation_for_an_agency(tenant_a: Tenant) -> None:
    client = token_client(User.objects.create_superuser("root-matrix", "r@example.com", "pw"))
    query = f"?agency={tenant_a.agency.pk}"
    refused = [
        (method, path, response.status_code)
        for method, path in _operations()
        if (response := _call(client, method, path, query)).status_code in (401, 403)
    ]
    assert refused == []


# --- the admin --------------------------------------------------------------------------------

VIEW_EXCEPTIONS = {
    "core.ApiKey": ADMINS,
    "members.Invitation": ADMINS,
    "webhooks.Webhook": STAFF_UP,
    "webhooks.Subscription": STAFF_UP,
    "webhooks.Delivery": STAFF_UP,
    "sso.SsoProvider": ADMINS,
    "sso.SsoIdentity": ADMINS,
}
ADMIN_WRITES = {
    "core.Membership", "core.ApiKey", "members.Invitation", "agents.LLMProvider",
    "usage.Budget", "usage.EvaluationBudget", "usage.ModelPrice", "sso.SsoProvider",
}  # fmt: skip
ADMIN_SUPERUSER_WRITES = {"tools.Tool"}
ADD_EXCEPTIONS = {
    "core.Membership": NOBODY,  # agency admins invite (members.Invitation) instead
    "memory.LearnedPattern": NOBODY,  # learned from good runs, never added by hand
    "evals.DatasetVersion": NOBODY,  # made by a change to a case, no add page
    "evals.Experiment": NOBODY,  # started from a dataset's page, no add page
    "sso.SsoIdentity": NOBODY,  # written by a sign-in only
}
CHANGE_EXCEPTIONS = {
    "members.Invitation": NOBODY,  # resent or revoked, never edited
    "sso.SsoIdentity": NOBODY,  # written by a sign-in only
    "evals.Canary": NOBODY,  # promoted or stopped by its page's actions, never edited
}


def admin_rights(model: type[Any]) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """(who views, who adds, who changes) rows of ``model`` in the admin."""
    label = model._meta.label
    view = VIEW_EXCEPTIONS.get(label, ALL)
    if isinstance(admin.site._registry[model], ReadOnlyAdminMixin):
        return view, NOBODY, NOBODY  # run history: written by the runtime only
    if label in ADMIN_WRITES:
        write = ADMINS
    elif label in ADMIN_SUPERUSER_WRITES:
        write = NOBODY
    else:
        write = STAFF_UP
    return view, ADD_EXCEPTIONS.get(label, write), CHANGE_EXCEPTIONS.get(label, write)


def _api_key_row(agency: Agency) -> ApiKey:
    from core import tenancy
    from core.api_keys.services import api_key_create

    with tenancy.agency_context(agency.id):
        key, _secret = api_key_create(agency_id=agency.id, name="matrix")
    return key


def _sso_provider_row(agency: Agency) -> Any:
    from core import tenancy

    with tenancy.agency_context(agency.id):
        return SsoProvider.objects.create(
            agency=agency, slug=f"m-{uuid.uuid4().hex[:8]}", display_name="Matrix SSO",
            issuer="https://login.example.com", client_id="c", allowed_domains=["example.com"],
        )  # fmt: skip


def _sso_identity_row(agency: Agency) -> Any:
    from django.utils import timezone

    from core import tenancy

    provider = _sso_provider_row(agency)
    user = member(agency, Role.VIEWER)
    with tenancy.agency_context(agency.id):
        return SsoIdentity.objects.create(
            agency=agency, provider=provider, subject="s", user=user, last_login_at=timezone.now()
        )


MORE_ROWS: dict[type[Any], Callable[[Agency], Any]] = {
    ApiKey: _api_key_row,
    Invitation: lambda a: invite(a, f"{uuid.uuid4().hex[:8]}@example.com"),
    SsoProvider: _sso_provider_row,
    SsoIdentity: _sso_identity_row,
}
AGENCY_MODELS = sorted(
    (m for m in admin.site._registry if issubclass(m, AgencyOwnedModel)),
    key=lambda m: m._meta.label,
)


def _page(client: Client, url: str) -> tuple[int, str]:
    response = client.get(url)
    return response.status_code, response.content.decode() if response.status_code == 200 else ""


@pytest.mark.parametrize("role", Role.values)
@pytest.mark.parametrize("model", AGENCY_MODELS, ids=lambda m: m._meta.label)
def test_every_admin_page_follows_the_role_table(
    model: type[Any], role: str, agency: Agency, login: Callable[[User], Client]
) -> None:
    make = ROWS.get(model) or MORE_ROWS.get(model)
    assert make is not None, f"no row for {model._meta.label}: add one to tests/admin/rows.py"
    row = make(agency)
    client = login(member(agency, role))
    view, add, change = admin_rights(model)

    status, changelist = _page(client, admin_url(model, "changelist"))
    assert status == (200 if role in view else 403)
    if role in view:
        assert str(row.pk) in changelist
    url, refused = add_page(model)
    if refused == 404:  # no add page at all
        assert not add
    else:
        assert client.get(url).status_code == (200 if role in add else 403)
    status, page = _page(client, change_url(row))
    assert status == (200 if role in view else 403)
    if role in view:
        assert ('name="_save"' in page) == (role in change)
    if role not in change:
        assert client.post(change_url(row), {}).status_code == 403
        deleted = client.post(admin_url(model, "delete", row.pk), {"post": "yes"})
        assert deleted.status_code == 403


def test_the_agency_settings_page_is_changed_by_admins_only(
    agency: Agency, login: Callable[[User], Client]
) -> None:
    for role in Role.values:
        page = login(member(agency, role)).get(admin_url(Agency, "change", agency.pk))
        assert page.status_code == 200
        assert ('name="_save"' in page.content.decode()) == (role == Role.ADMIN), role


def test_only_deciders_decide_in_the_inbox(agency: Agency, login: Callable[[User], Client]) -> None:
    from approvals.models import Approval, ApprovalStatus
    from core import tenancy

    approval = ROWS[Approval](agency)
    for role in (Role.VIEWER, Role.STAFF):
        client = login(member(agency, role))
        assert client.get("/approvals/").status_code == 200  # every member reads the inbox
        url = f"/approvals/{approval.pk}/approve/"
        assert client.post(url, {}).status_code == 403, role
    with tenancy.platform_context():
        assert Approval.objects.get(pk=approval.pk).status == ApprovalStatus.PENDING
    for role in (Role.APPROVER, Role.ADMIN):
        page = login(member(agency, role)).get(f"/approvals/{approval.pk}/")
        assert page.status_code == 200
        assert f"/approvals/{approval.pk}/approve/" in page.content.decode(), role
