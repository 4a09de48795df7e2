"""A tool's access requirements (``Tool.requires_permissions`` / ``requires_modules``) against an
agent's tool patterns and its agency's enabled modules. Pure functions; the reads are in
:mod:`tools.selectors`.

**Required permissions** follow seed 004's ``PermissionChecker.checkAgentPermissions`` (section
"Security & Governance"): a permission is checked against the agent's *tool* patterns, one by one,
and every one must pass::

    for (const permission of requiredPermissions) {
      // Check if explicitly denied
      if (agent.denied_tools.includes(permission)) {
        denied.push(permission);
        continue;
      }
      // Check if allowed (with wildcard support)
      const isAllowed = agent.allowed_tools.some((allowed: string) => {
        if (allowed.endsWith('*')) {
          return permission.startsWith(allowed.slice(0, -1));
        }
        return allowed === permission;
      });
      if (!isAllowed) {
        denied.push(permission);
      }
    }
    return { allowed: denied.length === 0, denied };

Each permission is therefore decided exactly like a tool name, with :func:`tools.patterns.decide`
(the seed's trailing ``*`` generalised to any ``*``, denied patterns taking wildcards too, denied
wins, an empty allowed list allows nothing). A tool that requires no permission needs none; seed
004's executor only checks ``if (tool.requiresPermissions?.length)``.

**Required modules**: seed 004 declares ``requires_modules TEXT[]`` and ``requiresModules:
['crm']`` on its CRM tools but never checks them; DESIGN.md's act step does ("policy
(allowed/denied wildcards, active, agency modules)"). A tool is usable when every module it
requires is among the agency's ``Agency.enabled_modules``. Module names are compared lower-cased
and stripped, as :mod:`tools.patterns` treats pattern text, so a hand-written ``"CRM"`` on a tool
still means the CRM.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from tools.patterns import decide

__all__ = [
    "MISSING_PERMISSION",
    "MODULE_DISABLED",
    "TOOL_NOT_ALLOWED",
    "AccessDecision",
    "decide_tool",
    "missing_modules",
    "missing_permissions",
    "module_disabled_message",
]

# Error codes of the structured tool error a refused call returns (tools.executor).
TOOL_NOT_ALLOWED = "tool_not_allowed"
MISSING_PERMISSION = "missing_permission"
MODULE_DISABLED = "module_disabled"


def missing_permissions(
    required: Sequence[str], allowed: Sequence[str], denied: Sequence[str]
) -> list[str]:
    """The required permissions the agent's patterns do not grant (the seed's ``denied`` list)."""
    return [p for p in required if not decide(p, allowed, denied).allowed]


def missing_modules(required: Sequence[str], enabled: Collection[str]) -> list[str]:
    """The required modules the agency has not enabled."""
    have = {m.strip().lower() for m in enabled}
    return [m for m in required if m.strip().lower() not in have]


@dataclass(frozen=True, slots=True)
class AccessDecision:
    """Whether an agent may use a tool; ``code``/``message`` are the tool error when not."""

    allowed: bool
    code: str = ""
    message: str = ""
    missing: tuple[str, ...] = ()  # the permissions or modules that are missing

    def details(self) -> dict[str, list[str]]:
        """Extra fields of the tool error."""
        if self.code == MISSING_PERMISSION:
            return {"missing_permissions": list(self.missing)}
        if self.code == MODULE_DISABLED:
            return {"disabled_modules": list(self.missing)}
        return {}


ALLOWED = AccessDecision(True)


def decide_tool(
    name: str,
    *,
    requires_permissions: Sequence[str],
    requires_modules: Sequence[str],
    allowed: Sequence[str],
    denied: Sequence[str],
    enabled_modules: Collection[str],
) -> AccessDecision:
    """Decide one tool for one agent: its name against the patterns (denied wins), then its
    required permissions against the same patterns, then its required modules against the
    agency's. The first failing check is the reason given."""
    by_name = decide(name, allowed, denied)
    if not by_name.allowed:
        return AccessDecision(False, TOOL_NOT_ALLOWED, by_name.reason)
    lacking = missing_permissions(requires_permissions, allowed, denied)
    if lacking:
        return AccessDecision(
            False,
            MISSING_PERMISSION,
            f"Tool {name!r} requires the permission(s) {', '.join(lacking)}, which this agent "
            "is not granted (its allowed/denied tool patterns decide permissions too).",
            tuple(lacking),
        )
    disabled = missing_modules(requires_modules, enabled_modules)
    if disabled:
        return AccessDecision(
            False, MODULE_DISABLED, module_disabled_message(name, disabled), tuple(disabled)
        )
    return ALLOWED


def module_disabled_message(name: str, disabled: Sequence[str]) -> str:
    return (
        f"Tool {name!r} requires the module(s) {', '.join(disabled)}, which this agency has not "
        "enabled. Continue without it."
    )
