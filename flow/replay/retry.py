"""Retry from here: a new run of the same agent, with the same inputs, whose history is the
original's up to and including one step; a worker then runs it on from there like any run
resumed from its persisted steps (agents.runtime.context.rebuild_messages): the tool calls of
a model reply that the copy ends on run live, and the model is asked again after them.

The new run is manual, its parent is the original, and it keeps the original's configuration
snapshot (system prompt, tools, limits) and agent version: the earlier history was produced
under them. Copied steps carry no tokens or cost (this run did not spend them). A delegated
run's retry is not delegated again: the original's ``delegation`` context is left out, so the
retry answers no parent."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from agents.models import Execution, ExecutionStep, TriggerType
from agents.services import execution_create
from core.exceptions import ApplicationError

COPIED_FIELDS = (
    "step_type", "input_text", "reasoning", "output_text", "model", "llm_response",
    "tool_name", "tool_call_id", "tool_input", "tool_output", "started_at", "completed_at",
    "duration_ms",
)  # fmt: skip


def execution_retry_from(
    *, execution: Execution, step_number: int, triggered_by_id: int | None
) -> Execution:
    """Start the retry of ``execution`` from its step ``step_number``; the worker gets it when
    the caller's transaction commits. Refused (400, nothing written) for a run still going, a
    step it does not have, or an agent that may not start a run now.
    Precondition: in the execution's agency context."""
    if not execution.is_terminal:
        raise ApplicationError(
            "not_ended",
            f"Run {execution.pk} is {execution.status}: retry from a step once it has ended.",
        )
    with transaction.atomic():
        steps = list(execution.steps.filter(step_number__lte=step_number).order_by("step_number"))
        if not steps or steps[-1].step_number != step_number:
            raise ApplicationError("no_such_step", f"Run {execution.pk} has no step {step_number}.")
        initial = {k: v for k, v in (execution.initial_context or {}).items() if k != "delegation"}
        initial["retry_of"] = {"execution_id": str(execution.pk), "step": step_number}
        retry = execution_create(
            agent=execution.agent,
            trigger_type=TriggerType.MANUAL,
            input=execution.input,
            trigger_data=execution.trigger_data,
            parent_id=execution.pk,
            triggered_by_id=triggered_by_id,
            depth=execution.depth,
            initial_context=initial,
        )
        if retry is None:
            raise ApplicationError(
                "not_started",
                "The agent may not start a run now (inactive, or over its run limits): "
                "see its trigger log.",
            )
        # Started already (so the worker resumes it from its steps, not from the start), on
        # the original's configuration.
        retry.started_at = timezone.now()
        retry.config_snapshot = execution.config_snapshot
        retry.agent_version_id = execution.agent_version_id
        retry.current_step = step_number
        retry.save(
            update_fields=[
                "started_at", "config_snapshot", "agent_version", "current_step", "updated_at",
            ]
        )  # fmt: skip
        ExecutionStep.objects.bulk_create(
            [
                ExecutionStep(
                    agency_id=execution.agency_id,
                    execution=retry,
                    step_number=step.step_number,
                    **{name: getattr(step, name) for name in COPIED_FIELDS},
                )
                for step in steps
            ]
        )
    return retry
