"""Who is acting, for the audit log: a context variable set per request by
:class:`AuditContextMiddleware` (and by :func:`actor_context` elsewhere).

The request is kept, not an actor read from it at the start: DRF authenticates API keys and user
tokens inside the view, after every middleware has run, and sets ``request.user`` then. The actor
is read from the request when an entry is written. With no request (Celery tasks, beat, commands)
the actor is the system.
"""

from __future__ import annotations

import contextvars
import ipaddress
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse

from audit.models import ActorType
from core.client import client_address

USER_AGENT_MAX = 512


@dataclass(frozen=True)
class Actor:
    type: str = ActorType.SYSTEM
    user_id: int | None = None
    api_key: str = ""  # the key's prefix
    display: str = ""
    ip: str = ""
    user_agent: str = ""


SYSTEM = Actor()

_request: contextvars.ContextVar[HttpRequest | None] = contextvars.ContextVar(
    "agentdesk_audit_request", default=None
)
_actor: contextvars.ContextVar[Actor | None] = contextvars.ContextVar(
    "agentdesk_audit_actor", default=None
)
# Agencies being deleted (audit.receivers): their rows' deletions are not recorded.
deleting: contextvars.ContextVar[frozenset[Any]] = contextvars.ContextVar(
    "agentdesk_audit_deleting_agencies", default=frozenset()
)


def normalized_ip(raw: str | None) -> str:
    if not raw:
        return ""
    try:
        return str(ipaddress.ip_address(raw))
    except ValueError:
        return ""


def actor_for_request(request: HttpRequest, *, user: Any = None) -> Actor:
    """The actor of ``request``: its API key, else its logged-in user, else no one (an anonymous
    request: a failed login, an invitation accepted). ``user``: who is acting when the request
    does not say yet (a login, before ``request.user`` is set)."""
    ip = normalized_ip(client_address(request))
    agent = request.META.get("HTTP_USER_AGENT", "")[:USER_AGENT_MAX]
    user = user if user is not None else getattr(request, "user", None)
    key = getattr(user, "api_key", None)
    if key is not None:
        return Actor(
            ActorType.API_KEY,
            api_key=key.prefix,
            display=f"{key.name} ({key.prefix})"[:255],
            ip=ip,
            user_agent=agent,
        )
    if user is not None and getattr(user, "is_authenticated", False):
        return Actor(
            ActorType.USER,
            user_id=user.pk,
            display=user.get_username()[:255],
            ip=ip,
            user_agent=agent,
        )
    return Actor(ActorType.USER, ip=ip, user_agent=agent)


def current_actor() -> Actor:
    """The actor of the innermost :func:`actor_context`, else of the current request, else the
    system."""
    actor = _actor.get()
    if actor is not None:
        return actor
    request = _request.get()
    return SYSTEM if request is None else actor_for_request(request)


@contextmanager
def actor_context(actor: Actor) -> Iterator[None]:
    """Entries written in the block name ``actor``."""
    token = _actor.set(actor)
    try:
        yield
    finally:
        _actor.reset(token)


@contextmanager
def request_context(request: HttpRequest) -> Iterator[None]:
    # Each request starts with no agency being deleted: one whose deletion failed half-way (no
    # post_delete) is not left marked in this thread's context for later requests.
    token, marks = _request.set(request), deleting.set(frozenset())
    try:
        yield
    finally:
        deleting.reset(marks)
        _request.reset(token)


class AuditContextMiddleware:
    """Makes the request the audit log's source of the actor, IP and user agent (after
    authentication in MIDDLEWARE; API keys are read when DRF has authenticated them)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        with request_context(request):
            return self.get_response(request)
