"""The experiments' tool gate (tools/gates.py; first in ``AGENTDESK_TOOL_GATES``): in a run of
an experiment, every call that passed the executor's checks (offered, arguments valid, within
its rate limits) is answered from the case's recording when it matches one (evals/matching.py),
and refused as ``unrecorded`` otherwise: its handler never runs, so an experiment writes nothing
to the CRM and sends no e-mail, and no approval is asked (the recording answers). Any other run
is not here (evals/recordings.py): the gate says nothing, at no query."""

from __future__ import annotations

from evals import recordings
from evals.matching import canonical
from tools.calls import CallRequest
from tools.gates import Answer, Park, Proceed, Refuse, ToolGate
from tools.models import ToolCallStatus
from tools.policy import ToolPolicy

UNRECORDED = "unrecorded"


class RecordedReplies(ToolGate):
    def before_handler(
        self, request: CallRequest, policy: ToolPolicy
    ) -> Park | Refuse | Answer | Proceed | None:
        recording = recordings.get(request.execution_id)
        if recording is None:
            return None
        call = request.call
        recorded = recording.get((call.name, canonical(call.arguments)))
        if recorded is None:
            return Refuse(
                UNRECORDED,
                f"Not run: this is an evaluation run, and its test case has no recorded reply "
                f"for {call.name} with these arguments (a call is answered when a recorded call "
                f"has the same tool and the same arguments).",
                status=ToolCallStatus.DENIED,
            )
        return Answer(dict(recorded.get("output") or {}), recorded.get("status") or "completed")
