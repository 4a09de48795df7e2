"""A form sent without a valid CSRF token (a login page left open too long, a session that
changed, another site's form) answers a 403 in the admin's look that says what to do, not
Django's page that explains CSRF to a developer; Django's page with DEBUG only."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

pytestmark = pytest.mark.django_db


def _post_login(client: Client) -> tuple[int, str]:
    response = client.post("/admin/login/", {"username": "someone", "password": "secret"})
    return response.status_code, response.content.decode()


def test_a_form_without_its_token_gets_the_styled_page_that_says_what_to_do() -> None:
    client = Client(enforce_csrf_checks=True)
    client.get("/admin/login/")  # the cookie, as a browser has it; the form's token is not sent
    status, body = _post_login(client)
    assert status == 403
    assert 'id="error-page" data-status="403"' in body
    assert "reload the page and send it again" in body
    assert "CSRF verification failed" not in body  # Django's developer page
    assert "CSRF_COOKIE" not in body


def test_without_the_cookie_it_says_to_allow_cookies() -> None:
    status, body = _post_login(Client(enforce_csrf_checks=True))
    assert status == 403
    assert "allow cookies for this site" in body


@override_settings(DEBUG=True)
def test_with_debug_it_is_djangos_page() -> None:
    status, body = _post_login(Client(enforce_csrf_checks=True))
    assert status == 403
    assert "CSRF verification failed" in body
