"""Fault injection for the durability tests: SIGKILL this worker at a named point of the loop.

Off unless ``AGENTDESK_CRASH_AT`` names a point; the end-to-end tests start a worker with it
set, kill it there, and check that another delivery finishes the run with no model call
repeated after its reply was persisted and no tool applied twice. Points:

* ``model_replied``      — the model answered; nothing of the reply is persisted yet
* ``think_uncommitted``  — the reply's step is written but not committed
* ``think_committed``    — the reply is committed; its tool calls have not run
* ``tool_uncommitted``   — a tool ran (its writes are in the open transaction), not committed
* ``tool_commit_sent``   — the reply's last tool result and its COMMIT are sent, not confirmed;
  the next model request is not sent yet
* ``tool_committed``     — a tool's result is committed; the next tool or model call has not
  started
"""

from __future__ import annotations

import os
import signal

from django.conf import settings

POINTS = frozenset(
    {
        "model_replied",
        "think_uncommitted",
        "think_committed",
        "tool_uncommitted",
        "tool_commit_sent",
        "tool_committed",
    }
)


def crash_point(name: str) -> None:
    if name == settings.AGENTDESK_CRASH_AT:
        os.kill(os.getpid(), signal.SIGKILL)
