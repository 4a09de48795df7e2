"""The executor's checks before a call runs (tools/executor.py): the run was offered the tool,
the agency has its modules on, and its rate limits allow one more call. Each returns the
refusal as the call's outcome, or None."""

from __future__ import annotations

import logging

from redis.exceptions import RedisError

from tools import access, ratelimit, selectors
from tools.calls import CallRequest, ToolOutcome, tool_error
from tools.models import ToolCallStatus
from tools.policy import ToolPolicy
from tools.validation import describe_argument_errors, validate_arguments

logger = logging.getLogger(__name__)


def refusal(
    request: CallRequest, policy: ToolPolicy | None, *, decided: bool
) -> ToolOutcome | None:
    """Why the call does not run, or None. ``decided``: a person decided it after it was held
    (it was counted against its rate limits then; the rest is checked again)."""
    call = request.call
    if policy is None:
        return not_offered(request)
    # Before a decided call runs too: an approved call of a module turned off meanwhile does
    # not run.
    if (disabled := module_disabled(request, policy)) is not None:
        return disabled
    if call.arguments_error:
        return ToolOutcome(
            tool_error("invalid_arguments", f"{call.arguments_error}."), ToolCallStatus.FAILED
        )
    if errors := validate_arguments(policy["parameters"], call.arguments):
        return ToolOutcome(
            tool_error(
                "invalid_arguments",
                describe_argument_errors(call.name, errors),
                errors=[e.to_dict() for e in errors],
            ),
            ToolCallStatus.FAILED,
        )
    return None if decided else rate_limited(request, policy)


def not_offered(request: CallRequest) -> ToolOutcome:
    """A call of a tool the run was not offered (the model guessed it, or it was offered in an
    earlier run): refused, with the specific reason when the tool exists for this agency and
    fails a permission or module check now. Off the hot path, so it may read the rows."""
    name = request.call.name
    decision = selectors.tool_access_now(
        agency_id=request.agency_id, agent_id=request.agent_id, tool_name=name
    )
    if decision is not None and decision.code in {
        access.MISSING_PERMISSION,
        access.MODULE_DISABLED,
    }:
        return ToolOutcome(
            tool_error(decision.code, decision.message, **decision.details()), ToolCallStatus.DENIED
        )
    return ToolOutcome(
        tool_error(
            access.TOOL_NOT_ALLOWED,
            f"Tool {name!r} is not available to this agent.",
            available=sorted(request.tools),
        ),
        ToolCallStatus.DENIED,
    )


def module_disabled(request: CallRequest, policy: ToolPolicy) -> ToolOutcome | None:
    required = policy.get("requires_modules")
    if not required:
        return None  # most tools need no module: no lookup at all
    # A per-process cache (tools.selectors): no round trip on the hot path.
    disabled = access.missing_modules(required, selectors.agency_enabled_modules(request.agency_id))
    if not disabled:
        return None
    return ToolOutcome(
        tool_error(
            access.MODULE_DISABLED,
            access.module_disabled_message(request.call.name, disabled),
            disabled_modules=disabled,
        ),
        ToolCallStatus.DENIED,
    )


def rate_limited(request: CallRequest, policy: ToolPolicy) -> ToolOutcome | None:
    per_minute = policy.get("rate_limit_per_minute")
    per_hour = policy.get("rate_limit_per_hour")
    if not per_minute and not per_hour:
        return None  # no Redis round trip for unlimited tools
    try:
        result = ratelimit.check_and_consume(
            ratelimit.get_redis(),
            agent_id=request.agent_id,
            tool_name=request.call.name,
            per_minute=per_minute,
            per_hour=per_hour,
        )
    except RedisError as exc:
        # Fail closed: a limit that cannot be counted is not waived (a runaway agent is what
        # it is there for), but the run goes on — the model may retry or continue without.
        logger.warning(
            "tool %s: rate limiter unavailable (%s: %s); call refused",
            request.call.name,
            type(exc).__name__,
            exc,
        )
        return ToolOutcome(
            tool_error(
                "rate_limit_unavailable",
                f"Tool {request.call.name!r} was not run: its rate limit could not be checked "
                "right now. Try again later, or continue without it.",
            ),
            ToolCallStatus.FAILED,
        )
    if result.allowed:
        return None
    return ToolOutcome(
        tool_error(
            "rate_limited", result.message(request.call.name), retry_after_s=result.retry_after_s
        ),
        ToolCallStatus.FAILED,
    )
