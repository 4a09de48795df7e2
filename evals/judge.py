"""The LLM judge of a test case's ``judge_rubric``: once the case's run is scored, a worker asks
the agency's provider (the agent's, with ``AGENTDESK_EVAL_JUDGE_MODEL`` or else the agent's own
model) how well the run met the rubric, as JSON ``{"score": 0..1, "reason": "..."}``, and the
verdict becomes the result's ``judge`` check (evals.services.experiments.experiment_result_judged).

The call is evaluation spend: its highest cost is reserved against the agency's evaluation
budget first (usage/evaluation_budget.py, apart from the runs' budget; no call when it does not
fit: the check fails with "evaluation budget exhausted"), and its tokens and cost go on the day's
usage rows of purpose "evaluation" with the experiment's runs. The reservation is a small
transaction of its own; the model call holds none; the settlement, the usage and the verdict
commit together.
"""

from __future__ import annotations

import json
import logging
import uuid
from decimal import Decimal
from typing import Any

from django.conf import settings

from agents import llm
from agents.llm import LLMError, Message
from agents.runtime.context_window import request_chars
from agents.runtime.providers import provider_config_for
from core import tenancy
from evals.models import ExperimentResult, ResultStatus
from evals.services.experiments import experiment_result_judged
from tools.models import ToolCall
from usage.evaluation_budget import evaluation_budget_reserve, evaluation_budget_settle
from usage.models import UsagePurpose
from usage.pricing import price_for
from usage.services import usage_record_llm_call

logger = logging.getLogger(__name__)

# The demo model (devkit) recognises the judge by this opening: keep them alike.
SYSTEM = (
    "You judge a test case's run of an AI agent against a rubric. Read the case's input, what "
    "the agent did and its final answer, then answer with one JSON object and nothing else: "
    '{"score": <a number from 0 (fails the rubric) to 1 (meets it fully)>, '
    '"reason": "<one or two sentences>"}.'
)
MAX_TOKENS = 300
CALL_TIMEOUT_SECONDS = 60.0
CHARS_PER_TOKEN = 4
CALLS_SHOWN = 20  # the run's first tool calls, briefly: the judge reads the answer first
TEXT_CHARS = 4000
ARGUMENT_CHARS = 200
BUDGET_EXHAUSTED = "evaluation budget exhausted"


def judge_prompt(*, result: ExperimentResult, rubric: str) -> str:
    """What the judge reads: the case's input, the run's status, tool calls and final answer,
    and the rubric. Precondition: in the result's agency context."""
    execution = result.execution
    assert execution is not None  # a result is judged once its run is scored
    calls = ToolCall.objects.filter(execution=execution).order_by("created_at", "id")
    lines = [
        f"- {c.tool_name}({json.dumps(c.input or {}, sort_keys=True)[:ARGUMENT_CHARS]}): {c.status}"
        for c in calls[:CALLS_SHOWN]
    ]
    return "\n\n".join(
        [
            f"Input: {(result.case.input or '(none)')[:TEXT_CHARS]}",
            f"Status: {execution.status}",
            "Tool calls:\n" + ("\n".join(lines) or "(none)"),
            f"Final answer: {(execution.output or '(none)')[:TEXT_CHARS]}",
            f"Rubric: {rubric}",
        ]
    )


def parse_verdict(text: str) -> tuple[float | None, str]:
    """The judge's ``(score, reason)``; ``(None, "judge failed: ...")`` for any other reply."""
    body = text.strip().removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        verdict: Any = json.loads(body)
    except ValueError:
        return None, f"judge failed: the reply is not JSON: {text.strip()[:200]!r}"
    if not isinstance(verdict, dict):
        return None, "judge failed: the reply is not a JSON object"
    score, reason = verdict.get("score"), verdict.get("reason")
    if isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1:
        return None, f"judge failed: no score from 0 to 1 in the reply ({score!r})"
    if not isinstance(reason, str) or not reason.strip():
        return None, "judge failed: no reason in the reply"
    return float(score), reason.strip()[:1000]


def judge_result(*, result_id: uuid.UUID | str, agency_id: uuid.UUID | str) -> str:
    """Judge the result's run against its case's rubric, if it still waits for it. Precondition:
    outside any transaction (a worker's task)."""
    with tenancy.agency_context(agency_id):
        result = (
            ExperimentResult.objects.select_related("case", "execution", "experiment__agent")
            .filter(pk=result_id, status=ResultStatus.RUNNING, scored_at__isnull=False)
            .first()
        )
        rubric = (result.case.expectations or {}).get("judge_rubric") if result else None
        if result is None or not rubric:
            return "nothing to judge"
        agent = result.experiment.agent
        config = provider_config_for(agent, agency_id=agent.agency_id)
        model = settings.AGENTDESK_EVAL_JUDGE_MODEL or config.model
        messages = [
            Message.system(SYSTEM),
            Message.user(judge_prompt(result=result, rubric=rubric)),
        ]
        price = price_for(agency_id=agent.agency_id, provider=agent.llm_provider, model=model)
        highest = max(
            price.max_cost(
                input_tokens=request_chars(messages) // CHARS_PER_TOKEN,
                max_output_tokens=MAX_TOKENS,
            ),
            Decimal(0),
        )
        budget_id = evaluation_budget_reserve(agency_id=agent.agency_id, amount=highest)
    scored_at = result.scored_at
    if budget_id is None:  # nothing reserved, nothing called
        with tenancy.agency_context(agency_id):
            experiment_result_judged(
                result_id=result.pk, scored_at=scored_at, score=None, reason=BUDGET_EXHAUSTED
            )
        return BUDGET_EXHAUSTED
    try:
        completion = llm.get_provider(config).complete(
            messages,
            model=model or None,
            temperature=0.0,
            max_tokens=MAX_TOKENS,
            timeout=CALL_TIMEOUT_SECONDS,
        )
    except LLMError as exc:
        logger.warning("experiment result %s: the judge's model call failed: %s", result.pk, exc)
        with tenancy.agency_context(agency_id):
            evaluation_budget_settle(budget_id=budget_id, reserved=highest, cost=Decimal(0))
            experiment_result_judged(
                result_id=result.pk,
                scored_at=scored_at,
                score=None,
                reason=f"judge failed: {str(exc)[:300]}",
            )
        return "failed"
    cost = price.cost(completion.usage)
    score, reason = parse_verdict(completion.text)
    with tenancy.agency_context(agency_id):
        evaluation_budget_settle(budget_id=budget_id, reserved=highest, cost=cost)
        usage_record_llm_call(
            agency_id=agent.agency_id,
            site_id=agent.site_id,
            agent_id=agent.pk,
            provider=agent.llm_provider,
            model=model,
            usage=completion.usage,
            cost=cost,
            purpose=UsagePurpose.EVALUATION,
        )
        experiment_result_judged(
            result_id=result.pk, scored_at=scored_at, score=score, reason=reason, cost=cost
        )
    return "judged" if score is not None else "failed"
