"""The websocket protocol (docs/live-protocol.md): what a watcher of an execution or of an
agency's dashboard receives. The sequenced events and streamed text are built below the runtime
(:mod:`agents.lifecycle.protocol`, which the runtime publishes with); here is what only the
sockets add: the close codes and the execution's snapshot, sent first on every connection.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

# Close codes (4000-4999 are the application's; see docs/live-protocol.md).
CLOSE_UNAUTHENTICATED = 4401  # no valid session or API key (or it ended while open)
CLOSE_NOT_FOUND = 4404  # another agency's, deleted or made-up execution / dashboard: all alike
CLOSE_BAD_REQUEST = 4400  # a malformed ``after`` or first message
CLOSE_THROTTLED = 4429  # the client's address has had too many failed API keys for now
# While open (the credential's change committed, or found by the periodic check):
CLOSE_FORBIDDEN = 4403  # the login is no longer a member of the agency it watched
CLOSE_RECONNECT = 4409  # the login's role changed: a new socket acts with the new rights


class Totals(TypedDict):
    tokens_total: int
    cost_usd: str
    llm_call_count: int
    tool_call_count: int
    failed_tool_calls: int  # act steps whose tool reported an error
    current_step: int


class Waiting(TypedDict):
    """What a parked run waits for: an approval to decide, a question to answer, a timer."""

    approval_id: str | None
    question_id: str | None  # a question (ask_user, or help after failures) waiting
    tool_name: str  # the approval's tool, or the asking call's
    # The call a person is asked to answer (ask_user): counted in the totals already, its
    # answer's step adds none.
    tool_call_id: str
    input_request: dict[str, Any]
    wait_until: str | None


class Snapshot(TypedDict):
    """The execution's header as of event ``seq``: sent first on every connection, and again
    when the run parks or ends. A client applies only events with a greater ``seq`` to it."""

    type: Literal["snapshot"]
    seq: int
    execution_id: str
    agent_id: str
    agent_name: str
    status: str
    stop_reason: str
    error: str
    output: str
    totals: Totals
    waiting: Waiting | None
    # The run's calls that asked a person (ask_user) by id: the seq of the park each caused.
    asked: dict[str, int]
    started_at: str | None
    completed_at: str | None
