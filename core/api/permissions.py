"""Role permissions: viewers read; staff (and admins) write; approvers (and admins) decide
approvals and answer questions; admins manage members, invitations, LLM providers, model prices,
budgets and API keys. A view narrows them with ``read_roles`` / ``write_roles`` /
``action_roles``. The admin follows the same table (README "Members and roles"), and
tests/members/test_role_matrix.py checks both against it, operation by operation."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from core.api.principal import SUPERUSER_AGENCY_PARAM, Principal
from core.exceptions import ApplicationError
from core.models import Role

ALL_ROLES: frozenset[str] = frozenset(Role.values)
WRITE_ROLES: frozenset[str] = frozenset({Role.ADMIN, Role.STAFF})
APPROVE_ROLES: frozenset[str] = frozenset({Role.ADMIN, Role.APPROVER})
ADMIN_ROLES: frozenset[str] = frozenset({Role.ADMIN})


def required_roles(request: Request, view: Any) -> frozenset[str]:
    action_roles: dict[str, frozenset[str]] = getattr(view, "action_roles", {})
    action = getattr(view, "action", None)
    if action in action_roles:
        return action_roles[action]
    if request.method in SAFE_METHODS:
        return getattr(view, "read_roles", ALL_ROLES)
    return getattr(view, "write_roles", WRITE_ROLES)


class RolePermission(BasePermission):
    message = "Your role does not allow this."

    def has_permission(self, request: Request, view: Any) -> bool:
        principal: Principal | None = getattr(view, "principal", None)
        if principal is None or not principal.authenticated:
            return False  # DRF answers 401 when no credential authenticated
        if principal.is_superuser:
            if request.method not in SAFE_METHODS and principal.agency_id is None:
                raise ApplicationError(
                    "agency_required",
                    f"Superusers act for one agency when writing: add ?{SUPERUSER_AGENCY_PARAM}"
                    "=<agency id> to the URL.",
                )
            return True
        if principal.agency_id is None:
            self.message = "You are not a member of an active agency."
            return False
        return principal.has_role(required_roles(request, view))
