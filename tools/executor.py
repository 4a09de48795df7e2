"""Runs one tool call of an execution: policy, argument validation, rate limit, the gates
(tools/gates.py: approvals' holds a call for a person), the handler, and the ToolCall record —
all inside the caller's transaction, so the handler's writes and the recorded result commit
together (a tool is applied at most once).

Every refusal or failure becomes a structured error for the model; the run goes on.

The policy step is DESIGN.md's act step "policy (allowed/denied wildcards, active, agency
modules)". The run's snapshot holds the tools it was offered (agents.runtime.setup decided their
names, required permissions and required modules with tools.access). A call of any other tool is
refused with the reason as the configuration stands now (``missing_permission``,
``module_disabled``, else ``tool_not_allowed``). A call of an offered tool is refused with
``module_disabled`` when the agency has turned one of its modules off since the run started:
modules are the agency's switch, not part of the agent configuration a snapshot freezes.
"""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

from django.utils import timezone

from core import fastdb
from core.storable import storable_json
from ops import metrics
from tools import checks, handler_call, registry
from tools.calls import CallRequest, Held, ToolOutcome, tool_error
from tools.gates import Answer, Decision, Gates, Park, Proceed, Refuse, gates
from tools.handlers import ToolError, ToolResult
from tools.models import ToolCall, ToolCallStatus, idempotency_key_for
from tools.policy import ToolPolicy

# The statuses of a call left waiting for a person (a gate's: tools/gates.py).
_HELD = frozenset({ToolCallStatus.WAITING_APPROVAL, ToolCallStatus.WAITING_INPUT})


def execute_tool_call(request: CallRequest, *, step_id: uuid.UUID | None = None) -> ToolOutcome:
    """Decide and run one call. Precondition: inside the execution's agency transaction."""
    call = request.call
    key = idempotency_key_for(request.execution_id, call.id)
    existing = (
        ToolCall.objects.filter(idempotency_key=key).first() if request.may_have_run else None
    )
    gated = gates()
    decision: Decision | None = None
    if existing is not None:
        found = _seen_before(request, existing, step_id, gated)
        if isinstance(found, ToolOutcome):
            return found
        decision = found

    policy = request.tools.get(call.name)
    arguments = call.arguments
    seconds = 0.0  # the handler's own run time; refusals run nothing
    outcome = checks.refusal(request, policy, decided=decision is not None)
    if outcome is None:
        assert policy is not None  # (refused when not offered)
        notes: list[object] = []
        if decision is None:
            verdict = _before_handler(gated, request, policy, notes)
            if isinstance(verdict, Park):
                # No step yet: the act step is written when the call finally runs or is refused.
                return _hold(request, policy, key, verdict, existing=existing, notes=notes)
            said: Refuse | Answer | None = verdict
        else:
            said = decision.refusal or _after_decision(gated, request, decision)
        if isinstance(said, Answer):  # a gate's answer (a recorded reply): the handler not run
            outcome = ToolOutcome(said.output, said.status, notes=tuple(notes))
        elif said is not None:
            outcome = ToolOutcome(tool_error(said.code, said.message), said.status)
        else:
            if decision is not None and decision.arguments is not None:
                arguments = decision.arguments  # the approver's edit wins
            started = time.perf_counter()
            outcome = handler_call.run_handler(request, key, arguments)
            seconds = time.perf_counter() - started
            outcome.notes = tuple(notes)
            waiting = _waiting(gated, request, policy, key, outcome, existing=existing)
            if waiting is not None:
                return waiting
    _record(
        request,
        policy=policy,
        key=key,
        arguments=arguments,
        outcome=outcome,
        seconds=seconds,
        step_id=step_id,
        existing=existing,
    )
    return outcome


def _seen_before(
    request: CallRequest, existing: ToolCall, step_id: uuid.UUID | None, gated: Gates
) -> ToolOutcome | Decision | None:
    """A call recorded by an earlier delivery of the run: its outcome when it is settled (it ran,
    or a person answered it), else the decision it waited for (to run it now, once), or None
    when no gate claims it (it is decided as a new call)."""
    if existing.status not in _HELD:
        # Ran already (a resumed run): never run it twice, give the model the same result.
        return ToolOutcome(output=existing.output or {}, status=existing.status, replayed=True)
    waited_for_run = registry.get_resumer(existing.tool_name) is not None
    if existing.status == ToolCallStatus.WAITING_INPUT and waited_for_run:
        return _resumed(request, existing, step_id)
    for resumed in gated.resumed:
        found = resumed(request, existing)
        if found is None:
            continue
        if isinstance(found, Decision):
            return found
        asked = existing.status == ToolCallStatus.WAITING_INPUT
        if isinstance(found, Held):  # still waiting (a delivery that came early)
            return ToolOutcome(found.output, existing.status, held=found, asked_before=asked)
        # The person's answer is its result.
        outcome = ToolOutcome(found.output, found.status, asked_before=asked)
        _record(
            request,
            policy=request.tools.get(request.call.name),
            key=existing.idempotency_key,
            arguments=existing.input or {},
            outcome=outcome,
            seconds=0.0,
            step_id=step_id,
            existing=existing,
        )
        return outcome
    return None


def _before_handler(
    gated: Gates, request: CallRequest, policy: ToolPolicy, notes: list[object]
) -> Park | Refuse | Answer | None:
    """The first gate's park, refusal or answer; a proceed's note is added to ``notes``."""
    for before in gated.before_handler:
        verdict = before(request, policy)
        if isinstance(verdict, Proceed):
            notes.append(verdict.note)
        elif verdict is not None:
            return verdict
    return None


def _after_decision(gated: Gates, request: CallRequest, decision: Decision) -> Refuse | None:
    for after in gated.after_decision:
        if (refused := after(request, decision)) is not None:
            return refused
    return None


def _waiting(
    gated: Gates,
    request: CallRequest,
    policy: ToolPolicy,
    key: str,
    outcome: ToolOutcome,
    *,
    existing: ToolCall | None,
) -> ToolOutcome | None:
    """The call, its handler run, now waits: for a person (a gate holds it: ask_user) or for
    another run (delegate_to_agent); None when it is settled."""
    for after in gated.after_handler:
        if (park := after(request, policy, outcome)) is not None:
            return _hold(request, policy, key, park, existing=existing, notes=list(outcome.notes))
    if outcome.awaiting is not None:
        return _park_for_run(request, policy, key, outcome, existing=existing)
    if outcome.ask is not None:  # no gate asks the person: not recorded, the runtime stops
        return outcome
    return None


def _hold(
    request: CallRequest,
    policy: ToolPolicy,
    key: str,
    park: Park,
    *,
    existing: ToolCall | None,
    notes: list[object],
) -> ToolOutcome:
    """A gate holds the call for a person: its row waits with the park's status (no step yet),
    and the gate writes what the person acts on. ``existing``: the call's row, when it was held
    before (an approved ask_user call now asks)."""
    if existing is not None:
        existing.status = park.status
        existing.save(update_fields=["status", "updated_at"])
        row = existing
    else:
        row = ToolCall.objects.create(
            agency_id=request.agency_id,
            agent_id=request.agent_id,
            tool_id=policy.get("tool_id"),
            tool_name=request.call.name,
            execution_id=request.execution_id,
            tool_call_id=request.call.id,
            idempotency_key=key,
            input=request.call.arguments,
            status=park.status,
            started_at=timezone.now(),
        )
    held = park.write(row)
    return ToolOutcome(held.output, park.status, held=held, notes=tuple(notes))


def _park_for_run(
    request: CallRequest,
    policy: ToolPolicy,
    key: str,
    outcome: ToolOutcome,
    *,
    existing: ToolCall | None,
) -> ToolOutcome:
    """The call waits for another run (no step yet: it is written with that run's result, given
    by the tool's resumer when the run resumes). Its output says which run it waits for."""
    outcome.status = ToolCallStatus.WAITING_INPUT
    if existing is not None:  # it waited for an approval first
        existing.status, existing.output = ToolCallStatus.WAITING_INPUT, outcome.output
        existing.save(update_fields=["status", "output", "updated_at"])
        return outcome
    ToolCall.objects.create(
        agency_id=request.agency_id,
        agent_id=request.agent_id,
        tool_id=policy.get("tool_id"),
        tool_name=request.call.name,
        execution_id=request.execution_id,
        tool_call_id=request.call.id,
        idempotency_key=key,
        input=request.call.arguments,
        output=outcome.output,
        status=ToolCallStatus.WAITING_INPUT,
        started_at=timezone.now(),
    )
    return outcome


def _resumed(request: CallRequest, existing: ToolCall, step_id: uuid.UUID | None) -> ToolOutcome:
    """A call that waited for another run, in the resumed run: the tool's resumer gives its
    result (or says it still waits: a delivery that came early parks the run again)."""
    resume = registry.get_resumer(existing.tool_name)
    assert resume is not None
    context = handler_call.tool_context(
        request, tool_call_id=existing.tool_call_id, key=existing.idempotency_key
    )
    try:
        result = resume(context, existing.input or {}, existing.output or {})
    except ToolError as exc:
        outcome = ToolOutcome(exc.as_output(), ToolCallStatus.FAILED)
    else:
        if isinstance(result, ToolResult) and result.await_run is not None:
            return ToolOutcome(
                result.output, ToolCallStatus.WAITING_INPUT, awaiting=result.await_run
            )
        output = result.output if isinstance(result, ToolResult) else result
        outcome = ToolOutcome(storable_json(output), ToolCallStatus.COMPLETED)
    _record(
        request,
        policy=request.tools.get(request.call.name),
        key=existing.idempotency_key,
        arguments=existing.input or {},
        outcome=outcome,
        seconds=0.0,
        step_id=step_id,
        existing=existing,
    )
    return outcome


def _record(
    request: CallRequest,
    *,
    policy: ToolPolicy | None,
    key: str,
    arguments: dict[str, Any],
    outcome: ToolOutcome,
    seconds: float,
    step_id: uuid.UUID | None,
    existing: ToolCall | None,
) -> None:
    now = timezone.now()
    error = outcome.output.get("error") if outcome.is_error else None
    fields: dict[str, Any] = {
        "input": arguments,
        "output": outcome.output,
        "status": outcome.status,
        "error": (error or {}).get("message", "") if error else "",
        "error_code": (error or {}).get("code", "") if error else "",
        "completed_at": now,
        "duration_ms": round(seconds * 1000),
        "step_id": step_id,
    }
    offered = request.call.name if policy is not None else None  # else the model's own name
    metrics.tool_call_settled(tool=offered, outcome=outcome.status, error=error)
    if existing is not None:
        for name, value in fields.items():
            setattr(existing, name, value)
        existing.save(update_fields=[*fields, "updated_at"])
        return
    # The unique idempotency key makes a concurrent second run of the same call fail here,
    # rolling back its handler's writes with it.
    (request.insert or fastdb.execute)(
        fastdb.row(
            ToolCall,
            {
                "agency_id": request.agency_id,
                "agent_id": request.agent_id,
                "tool_id": policy.get("tool_id") if policy else None,
                "tool_name": request.call.name,
                "execution_id": request.execution_id,
                "tool_call_id": request.call.id,
                "idempotency_key": key,
                # Exact to the microsecond (duration_ms is whole milliseconds).
                "started_at": now - datetime.timedelta(seconds=seconds),
                **fields,
            },
        )
    )
