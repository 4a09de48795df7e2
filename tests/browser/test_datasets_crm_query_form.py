"""Registering a CRM query as a dataset in the admin, in Chromium at 1440 and 390 px: the
changelist's "Register a CRM query" button, a refused query's error on its field, then the saved
dataset with its inferred schema (screenshots r1-crm-query-*)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from core.models import Role
from crm.models import ContactStatus
from tests.browser.conftest import agency_member, logged_in, look_at_both_widths
from tests.crm.factories import ContactFactory
from tests.processes import AsgiServer

pytestmark = pytest.mark.slow


def test_staff_register_a_crm_query_as_a_dataset(
    browser: Browser, asgi_server: AsgiServer, live_db: Any
) -> None:
    agency, user = agency_member(Role.STAFF)
    ContactFactory.create(agency=agency, status=ContactStatus.CUSTOMER, company="Acme")
    page = logged_in(browser, asgi_server, user).new_page()

    page.goto(f"{asgi_server.url}/admin/datasets/dataset/")
    page.get_by_role("link", name="Register a CRM query").click()
    page.fill("#id_name", "customers")
    page.fill("#id_title", "Customers")
    page.select_option("#id_entity_type", "contacts")
    page.fill("#id_filters", "status eq customer\ncreated_at wobbles 2030-01-01")
    page.fill("#id_crm_fields", "first_name, company, created_at")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("body")).to_contain_text("Line 2: op:")
    look_at_both_widths(page, "r1-crm-query-form")

    page.fill("#id_filters", "status eq customer")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("body")).to_contain_text("was added successfully")
    page.get_by_role("link", name="customers").first.click()
    expect(page.locator("table.dataset-schema")).to_contain_text("company")
    look_at_both_widths(page, "r1-crm-query-saved", phone_fits=False)
