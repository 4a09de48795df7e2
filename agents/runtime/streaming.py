"""A model call's text, streamed to the execution's watchers while the call runs.

A run registers its execution's group with the process's listener watch while it runs
(``core.realtime.listening.listeners``: one background thread asks Redis, for all the process's
runs in one ``PUBSUB NUMSUB``, every ``AGENTDESK_TOKEN_WATCH_SECONDS``), so knowing before a model
call whether anyone watches costs a dictionary lookup; only a run's first call may wait for one
Redis round trip. Watched, the call is streamed (``Provider.complete(on_text=...)``) and its text
goes to the group as ``execution.token`` messages (agents/lifecycle/protocol.py ``TokenEvent``),
at once, batched by the publisher; the reply is persisted exactly as an unstreamed one when the
call ends, and its step event follows the tokens. Not watched, the call is the unstreamed call it
always was. Nothing of a stream is persisted: a call that fails or is retried leaves the text it
streamed without a step.
"""

from __future__ import annotations

import uuid
from types import TracebackType

from django.conf import settings

from agents.lifecycle import protocol
from core import realtime
from core.realtime import listening


class Watchers:
    """Whether anyone watches one execution, while a run of it is registered (``with``)."""

    def __init__(self, execution_id: uuid.UUID) -> None:
        self.execution_id = execution_id
        self.group = realtime.execution_group(execution_id)
        self._registered: listening.Listeners | None = None

    def __enter__(self) -> Watchers:
        if settings.AGENTDESK_TOKEN_STREAMING:
            self._registered = listening.listeners
            self._registered.register(self.group)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._registered is not None:
            self._registered.unregister(self.group)
            self._registered = None

    def watched(self) -> bool:
        """As of at most ``AGENTDESK_TOKEN_WATCH_SECONDS`` ago: a watcher who arrives meanwhile
        gets the calls that start after the next look (and every step, which is broadcast
        whatever this says); one who left gets a few messages nobody reads."""
        return settings.AGENTDESK_TOKEN_STREAMING and listening.has_listeners(self.group)

    def stream(self, *, step_number: int) -> realtime.TextStream | None:
        """Where the text of the call that will be step ``step_number`` goes, if watched."""
        if not self.watched():
            return None
        message = protocol.token_event(execution_id=str(self.execution_id), step_number=step_number)
        return realtime.TextStream([self.group], message)
