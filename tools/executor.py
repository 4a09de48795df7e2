"""Runs one tool call of an execution: policy, argument validation, rate limit, approval gate,
the handler, and the ToolCall record — all inside the caller's transaction, so the handler's
writes and the recorded result commit together (a tool is applied at most once).

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
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from redis.exceptions import RedisError

from agents.llm import ToolCall as LLMToolCall
from agents.models import Agent
from approvals import questions
from approvals.describe import describe_action
from approvals.models import Approval, ApprovalStatus, Question, QuestionKind, QuestionStatus
from approvals.risk import RiskDecision, assess_risk
from approvals.services import approval_requested, expiry_for
from core import fastdb
from core.storable import storable_json
from ops import metrics
from tools import access, ratelimit, registry, selectors
from tools.handlers import AwaitRun, HumanQuestion, ToolContext, ToolError, ToolResult
from tools.models import ToolCall, ToolCallStatus, idempotency_key_for
from tools.policy import ToolPolicy
from tools.validation import describe_argument_errors, validate_arguments
from usage import services as usage_services

logger = logging.getLogger(__name__)


@dataclass
class ToolOutcome:
    output: dict[str, Any]
    status: str
    park_until: datetime.datetime | None = None
    approval: Approval | None = None  # set when the call now waits for a human's decision
    question: Question | None = None  # set when the call now waits for a human's answer
    after_commit: list[Callable[[], None]] = field(default_factory=list)
    replayed: bool = False  # the call had already run: its recorded result was returned
    ask: HumanQuestion | None = None  # the handler asks a person (ask_user)
    awaiting: AwaitRun | None = None  # the call now waits for another run (delegate_to_agent)
    # A risk rule matched the call and let it run without a person (flow's decision point).
    risk_passed: RiskDecision | None = None

    @property
    def is_error(self) -> bool:
        return "error" in self.output


def _error(code: str, message: str, **details: Any) -> dict[str, Any]:
    return ToolError(code, message, **details).as_output()


@dataclass(frozen=True)
class CallRequest:
    agency_id: uuid.UUID
    site_id: uuid.UUID
    agent_id: uuid.UUID
    execution_id: uuid.UUID
    call: LLMToolCall
    tools: dict[str, ToolPolicy]  # the tools this run may use, by name
    constraints: list[Any]  # the agent's constraints (some require approval)
    triggered_by_user_id: int | None = None
    # A call of a reply persisted before this delivery (a resumed run) may have run already;
    # a call of a reply this delivery just received cannot have, so it skips the lookup.
    may_have_run: bool = True
    # Where the ToolCall row goes: inserted now, or handed to the caller to write together with
    # its own rows (the runtime's one-statement step commit).
    insert: Callable[[fastdb.Parts], None] | None = None
    # A savepoint the caller created just before (in its transaction's first round trip): a
    # failing handler's writes roll back to it. Without one, the handler gets its own.
    savepoint: str | None = None


def execute_tool_call(request: CallRequest, *, step_id: uuid.UUID | None = None) -> ToolOutcome:
    """Decide and run one call. Precondition: inside the execution's agency transaction."""
    call = request.call
    key = idempotency_key_for(request.execution_id, call.id)
    existing = (
        ToolCall.objects.filter(idempotency_key=key).first() if request.may_have_run else None
    )
    approval: Approval | None = None
    if existing is not None:
        found = _seen_before(request, existing, step_id)
        if isinstance(found, ToolOutcome):
            return found
        approval = found

    policy = request.tools.get(call.name)
    arguments = call.arguments
    seconds = 0.0  # the handler's own run time; refusals run nothing
    outcome: ToolOutcome
    if policy is None:
        outcome = _not_offered(request)
    elif (disabled := _module_disabled(request, policy)) is not None:
        # Before the approval branch too: an approved call of a module turned off meanwhile
        # does not run.
        outcome = disabled
    elif call.arguments_error:
        outcome = ToolOutcome(
            _error("invalid_arguments", f"{call.arguments_error}."),
            ToolCallStatus.FAILED,
        )
    elif errors := validate_arguments(policy["parameters"], arguments):
        outcome = ToolOutcome(
            _error(
                "invalid_arguments",
                describe_argument_errors(call.name, errors),
                errors=[e.to_dict() for e in errors],
            ),
            ToolCallStatus.FAILED,
        )
    elif approval is None and (limited := _rate_limited(request, policy)) is not None:
        outcome = limited
    else:
        decision = assess_risk(
            agency_id=request.agency_id,
            tool_name=call.name,
            arguments=arguments,
            dangerous=bool(policy.get("dangerous")),
            constraints=request.constraints,
        )
        if decision.needs_approval and approval is None:
            # No step yet: the act step is written when the call finally runs or is refused.
            return _park_for_approval(request, policy, decision, key)
        refused = None if approval is None else _refused_after_decision(request, approval)
        if refused is not None:
            outcome = refused
        else:
            edited = approval.edited_arguments if approval is not None else None
            arguments = arguments if edited is None else edited  # the approver's edit wins
            started = time.perf_counter()
            outcome = _run_handler(request, key, arguments)
            seconds = time.perf_counter() - started
            # A rule that matched and let it run (an approved call's decision is the person's).
            passed = decision.rule_id is not None and approval is None
            outcome.risk_passed = decision if passed else None
            if outcome.ask is not None or outcome.awaiting is not None:  # the run now waits
                return _park_waiting(request, policy, key, outcome, existing=existing)
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
    request: CallRequest, existing: ToolCall, step_id: uuid.UUID | None
) -> ToolOutcome | Approval | None:
    """A call recorded by an earlier delivery of the run: its outcome when it is settled (it ran,
    or its question was answered), else the approval it waited for (to run it now, once)."""
    if existing.status == ToolCallStatus.WAITING_INPUT:
        if registry.get_resumer(existing.tool_name) is not None:  # it waited for another run
            return _resumed(request, existing, step_id)
        return _answered(request, existing, step_id)
    if existing.status != ToolCallStatus.WAITING_APPROVAL:
        # Ran already (a resumed run): never run it twice, give the model the same result.
        return ToolOutcome(output=existing.output or {}, status=existing.status, replayed=True)
    return Approval.objects.filter(tool_call=existing).order_by("-created_at").first()


def _not_offered(request: CallRequest) -> ToolOutcome:
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
            _error(decision.code, decision.message, **decision.details()), ToolCallStatus.DENIED
        )
    return ToolOutcome(
        _error(
            access.TOOL_NOT_ALLOWED,
            f"Tool {name!r} is not available to this agent.",
            available=sorted(request.tools),
        ),
        ToolCallStatus.DENIED,
    )


def _module_disabled(request: CallRequest, policy: ToolPolicy) -> ToolOutcome | None:
    required = policy.get("requires_modules")
    if not required:
        return None  # most tools need no module: no lookup at all
    # A per-process cache (tools.selectors): no round trip on the hot path.
    disabled = access.missing_modules(required, selectors.agency_enabled_modules(request.agency_id))
    if not disabled:
        return None
    return ToolOutcome(
        _error(
            access.MODULE_DISABLED,
            access.module_disabled_message(request.call.name, disabled),
            disabled_modules=disabled,
        ),
        ToolCallStatus.DENIED,
    )


def _rate_limited(request: CallRequest, policy: ToolPolicy) -> ToolOutcome | None:
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
            _error(
                "rate_limit_unavailable",
                f"Tool {request.call.name!r} was not run: its rate limit could not be checked "
                "right now. Try again later, or continue without it.",
            ),
            ToolCallStatus.FAILED,
        )
    if result.allowed:
        return None
    return ToolOutcome(
        _error(
            "rate_limited", result.message(request.call.name), retry_after_s=result.retry_after_s
        ),
        ToolCallStatus.FAILED,
    )


def _run_handler(request: CallRequest, key: str, arguments: dict[str, Any]) -> ToolOutcome:
    handler = registry.get_handler(request.call.name)
    if handler is None:
        return ToolOutcome(
            _error("not_implemented", f"Tool {request.call.name!r} has no handler installed."),
            ToolCallStatus.FAILED,
        )
    context = ToolContext(
        agency_id=request.agency_id,
        site_id=request.site_id,
        agent_id=request.agent_id,
        execution_id=request.execution_id,
        tool_call_id=request.call.id,
        idempotency_key=key,
        triggered_by_user_id=request.triggered_by_user_id,
    )
    try:
        # A savepoint: a failing handler's partial writes go, the run's transaction stays.
        if request.savepoint is None:
            with transaction.atomic():
                result = handler(context, arguments)
        else:
            with _rolled_back_on_error(request.savepoint):
                result = handler(context, arguments)
    except ToolError as exc:
        return ToolOutcome(exc.as_output(), ToolCallStatus.FAILED)
    except Exception as exc:
        logger.exception("tool %s failed", request.call.name)
        return ToolOutcome(
            _error("internal_error", f"The tool failed unexpectedly ({type(exc).__name__})."),
            ToolCallStatus.FAILED,
        )
    # What a handler returns is recorded as is (jsonb): a NUL or NaN it passed on from a web
    # page or a provider must not fail the write of the step, and with it the run.
    if isinstance(result, ToolResult):
        return ToolOutcome(
            storable_json(result.output),
            ToolCallStatus.COMPLETED,
            park_until=result.park_until,
            after_commit=list(result.after_commit),
            ask=result.ask,
            awaiting=result.await_run,
        )
    return ToolOutcome(storable_json(result), ToolCallStatus.COMPLETED)


@contextmanager
def _rolled_back_on_error(savepoint: str) -> Iterator[None]:
    """The caller's savepoint instead of a new one (two round trips fewer per tool call: it was
    created with the transaction's first statement, and is never released — COMMIT keeps
    everything after it too)."""
    try:
        yield
    except BaseException:
        with connection.cursor() as cursor:
            cursor.execute(f"ROLLBACK TO SAVEPOINT {savepoint}")
        # Django marked the transaction broken if the handler's query failed; rolled back to a
        # known-good point, it is not.
        transaction.set_rollback(False)
        raise


def _park_for_approval(
    request: CallRequest,
    policy: ToolPolicy,
    decision: RiskDecision,
    key: str,
) -> ToolOutcome:
    call = request.call
    tool_call = ToolCall.objects.create(
        agency_id=request.agency_id,
        agent_id=request.agent_id,
        tool_id=policy.get("tool_id"),
        tool_name=call.name,
        execution_id=request.execution_id,
        tool_call_id=call.id,
        idempotency_key=key,
        input=call.arguments,
        status=ToolCallStatus.WAITING_APPROVAL,
        started_at=timezone.now(),
    )
    approval = Approval.objects.create(
        agency_id=request.agency_id,
        execution_id=request.execution_id,
        agent_id=request.agent_id,
        site_id=request.site_id,
        tool_call=tool_call,
        risk_rule_id=decision.rule_id,
        action_type=call.name,
        action_description=describe_action(call.name, call.arguments),
        proposed_arguments=call.arguments,
        risk_level=decision.risk_level,
        risk_explanation=decision.reason,
        expires_at=expiry_for(_agent(request)),
    )
    approval_requested(approval)
    return ToolOutcome(
        {"status": "waiting_approval", "approval_id": str(approval.id)},
        ToolCallStatus.WAITING_APPROVAL,
        approval=approval,
    )


def _agent(request: CallRequest) -> Agent:
    return Agent.objects.only("human_timeout_minutes").get(pk=request.agent_id)


def _refused_after_decision(request: CallRequest, approval: Approval) -> ToolOutcome | None:
    """Why a call that waited for a decision does not run now: a person did not approve it
    (denied, and the run goes on), or it may no longer run (:func:`_recheck`)."""
    if approval.status != ApprovalStatus.APPROVED:
        return ToolOutcome(
            _error(
                "approval_denied",
                f"A human {approval.status} this action"
                + (f": {approval.decision_reason}" if approval.decision_reason else "."),
            ),
            ToolCallStatus.DENIED,
        )
    return _recheck(request)


def _recheck(request: CallRequest) -> ToolOutcome | None:
    """An approved call, about to run: may it still? The agent's tool patterns, the tool and the
    agency's modules as they are now (the approval may have waited hours, and a policy change
    meanwhile wins), and some of today's budget left. A refusal ends the call as not run, with
    the reason, for the model and on the approval's page. (A deactivated agent, site or agency
    ends the run at its claim, before this.)"""
    name = request.call.name
    access_now = selectors.tool_access_now(
        agency_id=request.agency_id, agent_id=request.agent_id, tool_name=name
    )
    if access_now is None or not access_now.allowed:
        why = access_now.message if access_now is not None else f"{name!r} is no longer active."
        return ToolOutcome(
            _error(
                "approval_recheck_failed",
                f"Approved, but not run: the tool is no longer allowed for this agent ({why})",
            ),
            ToolCallStatus.DENIED,
        )
    if usage_services.budget_exhausted(request.agency_id):
        metrics.budget_refused("approved_call")
        return ToolOutcome(
            _error(
                "approval_recheck_failed",
                "Approved, but not run: the agency's daily budget is exhausted.",
            ),
            ToolCallStatus.DENIED,
        )
    return None


def _park_for_answer(
    request: CallRequest,
    policy: ToolPolicy,
    key: str,
    ask: HumanQuestion,
    *,
    existing: ToolCall | None,
) -> ToolOutcome:
    """The ask_user call waits (no step yet: it is written with the answer as its result).
    ``existing``: its row, when the question itself first waited for an approval."""
    call = request.call
    if existing is not None:
        existing.status = ToolCallStatus.WAITING_INPUT
        existing.save(update_fields=["status", "updated_at"])
        tool_call = existing
    else:
        tool_call = ToolCall.objects.create(
            agency_id=request.agency_id,
            agent_id=request.agent_id,
            tool_id=policy.get("tool_id"),
            tool_name=call.name,
            execution_id=request.execution_id,
            tool_call_id=call.id,
            idempotency_key=key,
            input=call.arguments,
            status=ToolCallStatus.WAITING_INPUT,
            started_at=timezone.now(),
        )
    question = questions.question_create(
        execution_id=request.execution_id,
        agency_id=request.agency_id,
        site_id=request.site_id,
        agent_id=request.agent_id,
        kind=QuestionKind.QUESTION,
        question=ask.question,
        options=ask.options,
        allow_other=ask.allow_other,
        question_type=ask.question_type,
        triggered_by=f"{call.name} (the agent asked)",
        tool_call=tool_call,
    )
    return ToolOutcome(
        {"status": "waiting_input", "question_id": str(question.id)},
        ToolCallStatus.WAITING_INPUT,
        question=question,
    )


def _park_waiting(
    request: CallRequest,
    policy: ToolPolicy,
    key: str,
    outcome: ToolOutcome,
    *,
    existing: ToolCall | None,
) -> ToolOutcome:
    """The call waits: for a person's answer (ask_user) or for another run (delegate_to_agent)."""
    if outcome.ask is not None:
        waiting = _park_for_answer(request, policy, key, outcome.ask, existing=existing)
        waiting.risk_passed = outcome.risk_passed
        return waiting
    return _park_for_run(request, policy, key, outcome, existing=existing)


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
    context = ToolContext(
        agency_id=request.agency_id,
        site_id=request.site_id,
        agent_id=request.agent_id,
        execution_id=request.execution_id,
        tool_call_id=existing.tool_call_id,
        idempotency_key=existing.idempotency_key,
        triggered_by_user_id=request.triggered_by_user_id,
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


def _answered(request: CallRequest, existing: ToolCall, step_id: uuid.UUID | None) -> ToolOutcome:
    """A resumed ask_user call: the person's answer is its result (or, still unanswered — a
    delivery that came early — the run waits again)."""
    question = Question.objects.filter(tool_call=existing).order_by("-created_at").first()
    if question is not None and question.status == QuestionStatus.PENDING:
        return ToolOutcome(
            {"status": "waiting_input", "question_id": str(question.id)},
            ToolCallStatus.WAITING_INPUT,
            question=question,
        )
    if question is not None and question.status == QuestionStatus.ANSWERED:
        outcome = ToolOutcome(
            {"answer": question.user_response},
            ToolCallStatus.COMPLETED,
        )
    else:
        outcome = ToolOutcome(
            _error("not_answered", "Nobody answered the question."), ToolCallStatus.FAILED
        )
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
