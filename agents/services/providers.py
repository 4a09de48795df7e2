"""Writers of an agency's LLM provider rows (the API's; the admin saves through its form).

The API key is write-only and leaves here only encrypted (:meth:`LLMProvider.set_api_key`). The
rules are the admin form's (``agents.admin.forms.LLMProviderForm``): a new key and "remove the
key" together are refused, and a row whose endpoint or provider changes must be given its key
again (or lose it) so that a stored key is never sent to a server it was not entered for.

An endpoint that is a literal IP address is checked here against the address policy the HTTP
client enforces on every connection (:mod:`agents.llm.endpoints`): a private address is refused
at once, with the same message the run would fail with. A host name is checked where it is
resolved, at connection time (resolving it here would prove nothing about later answers).
"""

from __future__ import annotations

import uuid
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit

from django.db import IntegrityError, transaction

from agents.llm.endpoints import EndpointRefused, checked_addresses
from agents.models import LLMProvider
from core.exceptions import ApplicationError

PROVIDER_FIELDS = frozenset(
    {
        "site", "provider_name", "is_active", "is_default", "api_endpoint", "organization_id",
        "available_models", "default_model", "requests_per_minute", "tokens_per_minute",
    }
)  # fmt: skip
# Changing one of these with a key stored sends the key elsewhere: the key must be given again.
KEY_BOUND_FIELDS = ("api_endpoint", "provider_name")
DEFAULT_PORTS = {"http": 80, "https": 443}


def _invalid(fields: dict[str, list[str]], *, status: int = 400) -> ApplicationError:
    first = next(iter(fields.values()))[0]
    return ApplicationError("invalid", f"Invalid input. {first}", fields=fields, status=status)


def endpoint_error(url: str) -> str | None:
    """Why the agency's ``api_endpoint`` cannot be used, or None (see the module docstring)."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "Enter a valid URL."
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return "Must be an http:// or https:// URL."
    try:
        ip_address(parts.hostname)
    except ValueError:
        return None  # a name: checked on every connection, against the address it resolves to
    try:
        checked_addresses(parts.hostname, port or DEFAULT_PORTS[parts.scheme])
    except EndpointRefused as exc:
        return str(exc)
    return None


def _check(fields: dict[str, Any]) -> None:
    unknown = set(fields) - PROVIDER_FIELDS
    if unknown:
        raise ApplicationError("invalid", f"Unknown provider fields: {sorted(unknown)}.")
    if "api_endpoint" in fields:
        error = endpoint_error(fields["api_endpoint"])
        if error:
            raise _invalid({"api_endpoint": [error]})


def _save(provider: LLMProvider) -> LLMProvider:
    try:
        with transaction.atomic():
            provider.save()
    except IntegrityError as exc:
        if "agents_llmprovider_one_default" in str(exc):
            raise _invalid(
                {"is_default": ["Another provider is already the default for this site."]},
                status=409,
            ) from exc
        if "agents_llmprovider_unique_per_site" in str(exc):
            raise _invalid(
                {"provider_name": ["This provider is already configured for this site."]},
                status=409,
            ) from exc
        raise
    return provider


@transaction.atomic
def llm_provider_create(*, agency_id: uuid.UUID, api_key: str = "", **fields: Any) -> LLMProvider:
    """Precondition: in the agency's context (``site``, if given, is one of its sites)."""
    provider = LLMProvider(agency_id=agency_id)
    _check(fields)
    for name, value in fields.items():
        setattr(provider, name, value)
    provider.set_api_key(api_key)
    return _save(provider)


@transaction.atomic
def llm_provider_update(
    *,
    provider: LLMProvider,
    api_key: str = "",
    clear_api_key: bool = False,
    **fields: Any,
) -> LLMProvider:
    """Change fields; ``api_key`` (non-blank) replaces the stored key, ``clear_api_key``
    removes it, neither keeps it."""
    if api_key.strip() and clear_api_key:
        raise _invalid(
            {"clear_api_key": ["Either enter a new key or remove the stored one."]},
            status=422,  # each is valid alone: a rule the schema cannot state
        )
    _check(fields)
    moved = any(
        name in fields and fields[name] != getattr(provider, name) for name in KEY_BOUND_FIELDS
    )
    if moved and provider.has_api_key and not api_key.strip() and not clear_api_key:
        raise _invalid(
            {
                "api_key": [
                    "The endpoint or provider changed: enter the API key for it again, or "
                    "remove the stored key (clear_api_key)."
                ]
            }
        )
    for name, value in fields.items():
        setattr(provider, name, value)
    if api_key.strip():
        provider.set_api_key(api_key)
    elif clear_api_key:
        provider.set_api_key("")
    return _save(provider)


@transaction.atomic
def llm_provider_delete(*, provider: LLMProvider) -> None:
    provider.delete()
