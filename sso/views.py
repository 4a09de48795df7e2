"""The sign-in pages: an agency's entry page, the redirect to its provider, and the callback.

mozilla-django-oidc's views with the provider of the sign-in instead of one from settings: the
request view adds state, nonce and the PKCE (S256) challenge and keeps them in the session under
the state; the callback refuses a state it did not issue (and forgets each state once used),
then authenticates through sso.backends.AgencyOIDCBackend and logs in with ``auth.login``
(which sends ``user_logged_in``).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from django.contrib import admin, auth, messages
from django.contrib.auth.signals import user_login_failed
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.generic import View
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from sso import issuer
from sso.models import SsoProvider
from sso.oidc_settings import get_setting
from sso.selectors import enabled_provider


def refused(
    request: HttpRequest, reason: str, *, slug: str | None = None, status: int = 403
) -> HttpResponse:
    """The page of a refused sign-in, saying why; counted as a failed login."""
    user_login_failed.send(
        sender=__name__, credentials={"sso": slug or "", "reason": reason}, request=request
    )
    back = reverse("sso:entry", args=[slug]) if slug else reverse("admin:login")
    context = {"reason": reason, "back": back, "title": "Sign-in refused"}
    return render(request, "sso/refused.html", context, status=status)


def find(request: HttpRequest) -> HttpResponse:
    """The login page's "single sign-on" form: on to the agency's entry page."""
    slug = request.GET.get("agency", "").strip().lower()
    if slug and enabled_provider(slug=slug) is not None:
        return redirect("sso:entry", slug=slug)
    messages.error(request, f"No agency signs in with single sign-on as {slug!r}.")
    return redirect("admin:login")


def entry(request: HttpRequest, slug: str) -> HttpResponse:
    """The admin's login page with the button "Sign in with <provider>"."""
    provider = enabled_provider(slug=slug)
    if provider is None:
        raise Http404("No such single sign-on.")
    return admin.site.login(request, extra_context={"sso_provider": provider})


class SsoLoginView(OIDCAuthenticationRequestView):
    """``/sso/<slug>/login/``: off to the agency's provider (authorization code flow, PKCE)."""

    get_settings = staticmethod(get_setting)

    def __init__(self, **kwargs: Any) -> None:
        View.__init__(self, **kwargs)  # the parent reads one provider from settings

    def get(self, request: HttpRequest, slug: str) -> HttpResponse:
        provider = enabled_provider(slug=slug)
        if provider is None:
            raise Http404("No such single sign-on.")
        try:
            endpoints = issuer.discover(provider.issuer)
        except issuer.IssuerError as exc:
            return refused(request, str(exc), slug=slug, status=502)
        self.OIDC_OP_AUTH_ENDPOINT = endpoints.authorization_endpoint
        self.OIDC_RP_CLIENT_ID = provider.client_id
        response: HttpResponseRedirect = super().get(request)
        state = parse_qs(urlsplit(response.url).query)["state"][0]
        # Which provider this state was issued for: the callback trusts nothing else.
        request.session["oidc_states"][state].update(
            sso_provider=str(provider.pk), sso_slug=provider.slug
        )
        request.session.modified = True
        return response


class SsoCallbackView(OIDCAuthenticationCallbackView):
    """``/sso/callback/``: the provider sends the browser back here with a code and the state."""

    get_settings = staticmethod(get_setting)

    def get(self, request: HttpRequest) -> HttpResponse:
        states = request.session.get("oidc_states")
        state = request.GET.get("state", "")
        if not isinstance(states, dict) or state not in states:
            if request.user.is_authenticated and "code" not in request.GET:
                return redirect("admin:index")
            return refused(
                request,
                "This sign-in was not started in this browser, or was already used (the state "
                "does not match). Start again.",
                status=400,
            )
        issued = states[state]
        slug = issued.get("sso_slug", "")
        provider = enabled_provider(slug=slug)
        if provider is None or str(provider.pk) != issued.get("sso_provider"):
            return refused(request, "This agency's single sign-on is no longer enabled.")
        if request.GET.get("error"):
            del states[state]
            request.session.modified = True
            auth.logout(request)
            error = request.GET.get("error_description") or request.GET["error"]
            return refused(request, f"{provider.display_name} answered: {error[:200]}", slug=slug)
        request.sso_provider = provider  # type: ignore[attr-defined]
        self.provider: SsoProvider = provider
        response: HttpResponse = super().get(request)
        return response

    def login_failure(self) -> HttpResponse:
        reason = getattr(self.request, "sso_refusal", None) or "The sign-in did not complete."
        # Django already sent user_login_failed for a refusal of the backend.
        back = reverse("sso:entry", args=[self.provider.slug])
        context = {"reason": reason, "back": back, "title": "Sign-in refused"}
        return render(self.request, "sso/refused.html", context, status=403)
