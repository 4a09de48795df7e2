"""An invitation end to end: an agency admin invites a colleague from the Members page (the e-mail
captured by the locmem backend), the colleague follows the link in Chromium, sets a password, is
logged in and sees only their agency with their role's rights; later they log in with the new
password. Screenshots of the Members page and the accept page at 1440 and 390 px."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.test import Client
from playwright.sync_api import Browser, Page, expect

from core import tenancy
from core.models import Agency, Role, User
from members.models import Invitation
from tests.agents.factories import AgentFactory
from tests.browser.conftest import DESKTOP, PHONE, logged_in, screenshot
from tests.factories import AgencyFactory, MembershipFactory, SiteFactory
from tests.members.helpers import link_in, membership_of
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow
PASSWORD = "harbour-lights-42"


def _agency(name: str) -> Agency:
    agency = AgencyFactory.create(
        name=name, slug=f"{name.lower().replace(' ', '-')}-{uuid.uuid4().hex[:6]}"
    )
    SiteFactory.create(agency=agency, name=f"{name} main site")
    return agency


def _invite(admin_user: User, email: str, role: str, mailoutbox: list[Any]) -> str:
    """The admin's invite form, posted as the admin (in this process: the e-mail lands in this
    process's locmem outbox); returns the link's path."""
    client = Client()
    client.force_login(admin_user)
    response = client.post("/admin/members/invitation/add/", {"email": email, "role": role})
    assert response.status_code == 302, response.content.decode()[:2000]
    message = mailoutbox[-1]
    assert message.to == [email]
    link, _token = link_in(message)
    return "/" + link.split("/", 3)[3]


def _fits(page: Page) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"] + 1  # type: ignore[index]


def test_an_invited_viewer_sets_a_password_and_sees_only_their_agency_read_only(
    browser: Browser, asgi_server: AsgiServer, live_db: Any, mailoutbox: list[Any]
) -> None:
    agency = _agency("Harbor Lights")
    other = _agency("Elsewhere Ltd")
    AgentFactory.create(agency=agency, name="Harbor SDR")
    AgentFactory.create(agency=other, name="Elsewhere Secret Agent")
    admin_user = MembershipFactory.create(
        agency=agency, role=Role.ADMIN, user__username=f"ada-{uuid.uuid4().hex[:6]}",
        user__first_name="Ada", user__last_name="Admin",
    ).user  # fmt: skip
    MembershipFactory.create(agency=agency, role=Role.STAFF, user__first_name="Sol")
    email = f"sam-{uuid.uuid4().hex[:6]}@example.com"
    path = _invite(admin_user, email, Role.VIEWER, mailoutbox)
    _invite(admin_user, f"pat-{uuid.uuid4().hex[:6]}@example.com", Role.APPROVER, mailoutbox)

    # The admin's Members page, with the invitations still pending.
    admin_context = logged_in(browser, asgi_server, admin_user)
    admin_page = admin_context.new_page()
    admin_page.goto(f"{asgi_server.url}/admin/core/membership/")
    expect(admin_page.get_by_role("link", name=re.compile("Invite a member"))).to_have_count(2)
    expect(admin_page.locator("#pending-invitations")).to_contain_text(email)
    screenshot(admin_page, "members")
    admin_page.set_viewport_size(PHONE)
    admin_page.reload()
    expect(admin_page.locator("#pending-invitations")).to_contain_text(email)
    _fits(admin_page)
    screenshot(admin_page, "members-phone")
    admin_page.set_viewport_size(DESKTOP)
    admin_page.goto(f"{asgi_server.url}/admin/members/invitation/add/")
    expect(admin_page.locator("input[name=email]")).to_be_visible()
    screenshot(admin_page, "members-invite-form", full_page=False)
    admin_page.goto(f"{asgi_server.url}/admin/members/invitation/")
    expect(admin_page.get_by_text(email)).to_be_visible()
    screenshot(admin_page, "members-invitations", full_page=False)
    admin_context.close()

    # The invitee, with no login yet, follows the link.
    phone = browser.new_context(viewport=PHONE)
    phone_page = phone.new_page()
    phone_page.goto(asgi_server.url + path)
    expect(phone_page.locator("#invitation-summary")).to_contain_text(email)
    _fits(phone_page)
    screenshot(phone_page, "invitation-accept-phone")
    phone.close()

    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(asgi_server.url + path)
    expect(page.get_by_text("You are invited to join")).to_be_visible()
    expect(page.locator("#invitation-summary")).to_contain_text("Viewer")
    screenshot(page, "invitation-accept")
    username = f"sam-{uuid.uuid4().hex[:6]}"
    page.fill("input[name=username]", username)
    page.fill("input[name=password1]", PASSWORD)
    page.fill("input[name=password2]", "not the same")
    page.get_by_role("button", name=re.compile("Set password and join")).click()
    expect(page.get_by_text("The two passwords differ.")).to_be_visible()
    page.fill("input[name=password1]", PASSWORD)
    page.fill("input[name=password2]", PASSWORD)
    page.get_by_role("button", name=re.compile("Set password and join")).click()

    # Logged in, in the admin of their agency, with the viewer's rights.
    page.wait_for_url(re.compile(r"/admin/$"))
    expect(page.get_by_text("Welcome to Harbor Lights")).to_be_visible()
    expect(page.get_by_text("Harbor Lights · Viewer")).to_be_visible()
    page.goto(f"{asgi_server.url}/admin/agents/agent/")
    expect(page.get_by_role("link", name="Harbor SDR", exact=True)).to_be_visible()
    expect(page.get_by_text("Elsewhere Secret Agent")).to_have_count(0)
    expect(page.locator('a[href="/admin/agents/agent/add/"]')).to_have_count(0)
    page.goto(f"{asgi_server.url}/admin/core/membership/")
    expect(page.get_by_role("link", name=admin_user.username, exact=True)).to_be_visible()
    expect(page.get_by_role("link", name=re.compile("Invite a member"))).to_have_count(0)
    assert page.goto(f"{asgi_server.url}/admin/members/invitation/").status == 403  # type: ignore[union-attr]
    assert page.goto(f"{asgi_server.url}/admin/agents/agent/add/").status == 403  # type: ignore[union-attr]

    user = User.objects.get(username=username)
    membership = membership_of(user)
    assert membership is not None
    assert (membership.agency_id, membership.role) == (agency.id, Role.VIEWER)
    with tenancy.platform_context():
        invitation = Invitation.objects.get(email=email)
    assert invitation.accepted_by_id == user.pk
    assert page.goto(asgi_server.url + path).status == 410  # type: ignore[union-attr]  # once only
    context.close()

    # Later: the login form, with the password they chose.
    later = browser.new_context(viewport=DESKTOP)
    login_page = later.new_page()
    login_page.goto(f"{asgi_server.url}/admin/login/")
    login_page.fill("input[name=username]", username)
    login_page.fill("input[name=password]", PASSWORD)
    login_page.keyboard.press("Enter")
    expect(login_page.get_by_text("Harbor Lights · Viewer")).to_be_visible()
    later.close()


def test_an_invited_approver_lands_on_the_inbox(
    browser: Browser, asgi_server: AsgiServer, live_db: Any, mailoutbox: list[Any]
) -> None:
    agency = _agency("Quayside")
    admin_user = MembershipFactory.create(agency=agency, role=Role.ADMIN).user
    path = _invite(admin_user, f"pat-{uuid.uuid4().hex[:6]}@example.com", Role.APPROVER, mailoutbox)

    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(asgi_server.url + path)
    page.fill("input[name=username]", f"pat-{uuid.uuid4().hex[:6]}")
    page.fill("input[name=password1]", PASSWORD)
    page.fill("input[name=password2]", PASSWORD)
    page.get_by_role("button", name=re.compile("Set password and join")).click()
    page.wait_for_url(re.compile(r"/approvals/$"))
    expect(page.get_by_text("Quayside · Approver")).to_be_visible()
    expect(page.get_by_text("Welcome to Quayside")).to_be_visible()
    context.close()
