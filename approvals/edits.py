"""An approver's edit of a proposed call's arguments, checked against the tool's parameters: the
one check the inbox's "Review changes" step and :func:`approvals.services.approval_decide` both
run, so that an edit the decision would refuse is refused before it is confirmed."""

from __future__ import annotations

from typing import Any

from approvals.models import Approval
from core.exceptions import ApplicationError
from tools.models import ToolCall
from tools.validation import validate_arguments


def approval_check_edit(*, approval: Approval, arguments: dict[str, Any]) -> None:
    """Raise ``invalid_arguments`` (its ``errors``: each with the path and the message) when
    ``arguments`` do not match the parameters of the tool ``approval`` would run. An approval
    with no tool call, or a call of a tool no longer known, has no schema to check against.
    Precondition: in the approval's agency context."""
    if approval.tool_call_id is None:
        return
    tool_call = ToolCall.objects.select_related("tool").get(pk=approval.tool_call_id)
    if tool_call.tool is None:
        return
    errors = validate_arguments(tool_call.tool.parameters_schema, arguments)
    if errors:
        raise ApplicationError(
            "invalid_arguments",
            "The edited arguments do not match the tool's parameters.",
            errors=[e.to_dict() for e in errors],
        )
