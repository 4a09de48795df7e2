"""The demo model of ``manage.py up``: a scripted provider, shown as "demo model (scripted, no AI)".

Not a language model. Each request is answered from what it carries (the tools offered, the
instruction, the results of the calls made so far), so a run behaves like an agent's whatever
it is asked, and a resumed run (after an approval, a crash) gets the reply it is at:

- with ``email_send`` offered (the SDR): find the lead, open the record, note a lead score, then
  propose an outreach e-mail, which waits for an approval; sum up once it ran;
- with ``data_aggregate`` (an analyst): pipeline and workload figures, the latest notes, a
  notification with the report;
- with ``trigger_workflow`` (an orchestrator): customers and open tasks, then a customer no
  task covers handed to another agent (``delegate_to_agent``, the one its description lists for
  renewals; waiting for its answer) or, with no agent to hand it to, a task; a notification;
- with CRM tools (an assistant): find the contact, open the record, add a note, create a
  follow-up task;
- with ``data_query`` alone (a guardian): failed e-mails and new contacts; an alert only when
  something looks wrong;
- with no tools: a plain answer;
- asked, before an agent acts, how it understands the request (understanding/): low
  confidence and a question with options for "our best customers" or "recent deals", high
  confidence for a clear request or once a person answered;
- asked, after a run, what it should remember or how well the run went (memory.after_run):
  the contacts it worked on, their lead scores, e-mails sent and requests, as memories; the
  next run about a contact recalls them, and its replies say so (``learning``).

Each reply says what it is about to do before doing it (streamed when the request asks for a
stream). Pure standard library, like the rest of the fake server.
"""

from __future__ import annotations

import json

from devkit.fake_server.demo.learning import review
from devkit.fake_server.demo.plays import choose_play, next_action
from devkit.fake_server.demo.understanding import understand
from devkit.fake_server.script import RecordedRequest, Reply, Responder, ScriptedToolCall, Step
from devkit.fake_server.server import FakeProviderServer

__all__ = ["DEMO_MODEL", "DemoModelServer", "choose_play", "demo_responder", "next_action"]

DEMO_MODEL = "demo model (scripted, no AI)"
THINK_SECONDS = 0.8  # before each reply, so that a newcomer sees the steps come one by one
STREAM_INTERVAL = 0.03  # between streamed events (about 30 words a second)


def _estimated_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def demo_responder(
    *, think_seconds: float = THINK_SECONDS, stream_interval: float = STREAM_INTERVAL
) -> Responder:
    """The responder of the demo model; ``think_seconds`` before each reply, ``stream_interval``
    between the events of a streamed one."""

    def respond(request: RecordedRequest) -> Step:
        # Before acting, its understanding (understanding/); after a run, what to remember
        # and how well it went.
        reviewed = understand(request) or review(request)
        decision = next_action(request) if reviewed is None else reviewed
        input_tokens = _estimated_tokens(json.dumps(request.body.get("messages") or []))
        calls: tuple[ScriptedToolCall, ...] = ()
        if isinstance(decision, str):
            text = spoken = decision
        else:
            text = decision.thought
            calls = (ScriptedToolCall(name=decision.tool, arguments=decision.arguments),)
            spoken = decision.thought + json.dumps(decision.arguments)
        return Reply(
            text=text,
            tool_calls=calls,
            input_tokens=input_tokens,
            output_tokens=_estimated_tokens(spoken),
            latency=think_seconds,
            stream_interval=stream_interval or None,
        )

    return respond


class DemoModelServer(FakeProviderServer):
    """The fake provider server answering every request with :func:`demo_responder`, on
    loopback. Nothing is recorded: it runs as long as ``manage.py up`` does."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        think_seconds: float = THINK_SECONDS,
        stream_interval: float = STREAM_INTERVAL,
        record: bool = False,
    ) -> None:
        super().__init__(host=host, port=port, record=record)
        self.set_responder(
            demo_responder(think_seconds=think_seconds, stream_interval=stream_interval)
        )

    def __enter__(self) -> DemoModelServer:
        self.start()
        return self
