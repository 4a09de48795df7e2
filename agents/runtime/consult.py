"""The plugins' own model calls before a step's (``before_step``, agents/runtime/plugins.py): an
understanding of the request before the agent acts. Each is made as the history's summary is
(think.py's aside call: the provider's limits, the plugins' ``before_model_call``, the budget),
recorded as a ``reflect`` step with the plugin's record, and its verdict applied in the same
transaction, so that a question asked is never without the step that asked it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from agents.llm import Message, Provider
from agents.runtime import provider_limits, store
from agents.runtime.plugins import Consult, Park, apply_in_step
from agents.runtime.think import Thinking
from usage.pricing import Price


class Consulting(Thinking):
    """The run's consults: model calls, not steps (``max_steps_per_run`` leaves them out, as
    it does the history's summaries)."""

    consults = 0  # made in the run so far (a resumed run counts its reflect steps: loop.py)

    def _consult(
        self,
        provider: Provider,
        limits: provider_limits.ProviderLimits | None,
        price: Price,
        messages: Sequence[Message],
    ) -> str | None:
        """Each plugin's ``before_step``, in order, and the call it asks for; returns the run's
        status when one ended or parked it."""
        for before in self.hooks.before_step:
            consult = before(messages)
            if consult is None:
                continue
            ended = self._consulted(provider, limits, price, consult)
            if ended is not None:
                return ended
        return None

    def _consulted(
        self,
        provider: Provider,
        limits: provider_limits.ProviderLimits | None,
        price: Price,
        consult: Consult,
    ) -> str | None:
        aside = self._aside_call(
            provider,
            limits,
            price,
            list(consult.messages),
            max_tokens=min(consult.max_tokens, self.snapshot["max_tokens"]),
            summary=False,
            when=f"while {consult.purpose}",
            failure=f"The model call for {consult.purpose} failed",
        )
        if isinstance(aside, str):
            return aside
        with store.step_transaction(self.execution, self.worker) as tx:
            step_id = uuid.uuid4()
            decided = consult.decide(tx, aside.completion, step_id)
            self._record_aside(
                tx, aside, output_text=decided.output_text, record=decided.record, step_id=step_id
            )
            self.consults += 1
            verdict = decided.verdict
            status = apply_in_step(tx, verdict) if verdict is not None else None
        self._aside_settled(limits, aside)
        if verdict is None or status is None:
            return None
        return self._parked(status) if isinstance(verdict, Park) else status
