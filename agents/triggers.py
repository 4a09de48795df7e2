"""Event triggers: the event types an agent may subscribe to, and its ``trigger_conditions``
(what they may look like, whether an event meets them).

A subscription is an event type as the event log accepts it (``core.models.EVENT_TYPE_REGEX``)
or a wildcard over its leading names, ``auth.login.*`` (seed 004's guardian subscribes so): it
takes every type that starts with ``auth.login.`` (``core.events.subscriptions_for``). Anything
else would be accepted and never fire.

Seed 004 only says "JSONB, conditions to evaluate", so the format is the simplest that covers
"start on web leads only" without becoming a language:

- a JSON object; ``{}`` starts the agent on every event it subscribes to;
- each key names a value of the event's payload, dots for nested objects
  (``"contact.country"`` is ``payload["contact"]["country"]``);
- each value is what the payload's value must equal (a string, number, true/false or null), or a
  list of such values meaning "one of them";
- every key must hold (AND). A payload without the key does not meet it.

Checked for event triggers and webhook deliveries (against the delivery's JSON body,
``webhooks/receive.py``): a manual run was asked for, a scheduled run has no payload.
"""

from __future__ import annotations

import re
from typing import Any

from core.models import EVENT_TYPE_REGEX

MAX_CONDITIONS = 50
MAX_CHOICES = 100
_MISSING = object()
_SCALARS = (str, int, float, bool, type(None))
_EVENT_TYPE = re.compile(EVENT_TYPE_REGEX)
# "auth.*", "auth.login.*": leading names of an event type, then ".*".
_WILDCARD = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*\.\*$")
# What event_type_error accepts (an event type or a trailing wildcard), for the API schema.
SUBSCRIPTION_REGEX = r"^[a-z][a-z0-9_]*(?:(?:\.[a-z0-9_]+)+|(?:\.[a-z0-9_]+)*\.\*)$"


def event_type_error(value: Any) -> str | None:
    """Why ``value`` can never start an agent, or ``None`` for an event type or a wildcard."""
    if isinstance(value, str) and (_EVENT_TYPE.match(value) or _WILDCARD.match(value)):
        return None
    if isinstance(value, str) and "*" in value:
        return (
            f"{value!r}: a wildcard may only end a subscription, after at least one name "
            "(e.g. 'auth.login.*' for every 'auth.login.' event)."
        )
    return (
        f"{value!r} is not an event type: lower-case names joined by dots, e.g. "
        "'crm.contact.created' (letters, digits and underscores)."
    )


class InvalidConditions(ValueError):
    """The conditions' shape is wrong; ``messages`` says what, one message per problem."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages))
        self.messages = messages


def validate_conditions(conditions: Any) -> None:
    """Raise :class:`InvalidConditions` unless ``conditions`` has the documented shape."""
    if not isinstance(conditions, dict):
        raise InvalidConditions(
            ['Must be a JSON object of payload keys and values, e.g. {"source": "web"}.']
        )
    if len(conditions) > MAX_CONDITIONS:
        raise InvalidConditions([f"At most {MAX_CONDITIONS} conditions."])
    errors = []
    for key, expected in conditions.items():
        if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
            errors.append(
                f"{key!r} is not a payload key: use a name, or dotted names for a nested value "
                "(e.g. 'contact.country')."
            )
        elif isinstance(expected, list):
            if not expected:
                errors.append(f"{key!r}: an empty list of choices never matches.")
            elif len(expected) > MAX_CHOICES:
                errors.append(f"{key!r}: at most {MAX_CHOICES} choices.")
            elif not all(isinstance(choice, _SCALARS) for choice in expected):
                errors.append(
                    f"{key!r}: a list of choices holds strings, numbers, true/false or null."
                )
        elif not isinstance(expected, _SCALARS):
            errors.append(
                f"{key!r}: the value must be a string, number, true/false, null or a list of "
                "them; for a nested value use a dotted key (e.g. 'contact.country')."
            )
    if errors:
        raise InvalidConditions(errors)


def unmet_condition(conditions: dict[str, Any], payload: Any) -> str | None:
    """``None`` when ``payload`` meets every condition, else why not (for the trigger log).
    Precondition: ``conditions`` passed :func:`validate_conditions`."""
    for key, expected in conditions.items():
        actual = _lookup(payload, key)
        choices = expected if isinstance(expected, list) else [expected]
        if actual is _MISSING:
            return f"the payload has no {key!r} (the condition wants {_show(expected)})"
        if not any(_equal(actual, choice) for choice in choices):
            return f"{key!r} is {_show(actual)}, the condition wants {_show(expected)}"
    return None


def _lookup(payload: Any, key: str) -> Any:
    value = payload
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _equal(actual: Any, expected: Any) -> bool:
    # JSON's true is not 1: Python's True == 1 must not make {"vip": 1} match {"vip": true}.
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    return bool(actual == expected)


def _show(value: Any) -> str:
    if isinstance(value, list):
        return "one of " + ", ".join(_show(v) for v in value)
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."
