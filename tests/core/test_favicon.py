"""The icon browsers ask for on every page: admin pages link it, ``/favicon.ico`` leads to it."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db
ICON = "/static/core/favicon.svg"


def test_favicon_ico_leads_to_the_icon_which_is_served(client: Client) -> None:
    response = client.get("/favicon.ico")

    assert (response.status_code, response["Location"]) == (301, ICON)
    icon = client.get(ICON)
    assert icon.status_code == 200
    assert icon["Content-Type"].startswith("image/svg+xml")
    assert b"<svg" in b"".join(icon.streaming_content)  # type: ignore[attr-defined]


def test_admin_pages_link_the_icon(client: Client) -> None:
    page = client.get("/admin/login/")

    assert page.status_code == 200
    assert f'rel="icon" href="{ICON}" type="image/svg+xml"' in page.content.decode()
