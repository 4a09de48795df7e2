"""The A2A methods on AgentDesk's runs: the A2A SDK's JSON-RPC dispatcher parses and answers
(``SendMessage``, ``GetTask``, ``CancelTask``, ``SendStreamingMessage``, ``SubscribeToTask``; and
0.3's ``message/send``, ``tasks/get``, ``tasks/cancel``, ``message/stream``); this handler maps
them onto executions of the endpoint's agent, in the API key's agency.

A message starts a manual run (protocols.runs.run_start) and, unless the caller asked to return
immediately, waits up to ``AGENTDESK_A2A_WAIT_SECONDS`` for the task to settle (completed,
failed, cancelled, or waiting for a person). A cancel goes through the product's cancel service
and waits as long for the run to stop. Every read and write is one short transaction in a worker
thread (protocols.runs.in_agency); nothing is held while waiting.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.request_handlers.request_handler import RequestHandler, validate_request_params
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from django.conf import settings
from google.protobuf.json_format import MessageToDict

from agents.models import Agent, Execution
from agents.services import execution_cancel
from protocols.a2a.tasks import (
    CONTEXT_KEY,
    FINAL_STATES,
    TaskRow,
    output_artifact,
    task_of,
    task_row,
    task_status,
)
from protocols.runs import RunNotStarted, in_agency, run_start

_POLL_FIRST_S = 0.05  # the first look after a start or a cancel; each next 1.5 times later...
_POLL_MAX_S = 0.5  # ...up to this
CALLER_STATE = "agentdesk_caller"
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Caller:
    """Who calls which agent: set by the endpoint after the key and the agent were checked."""

    agency_id: uuid.UUID
    agent_id: uuid.UUID
    key_prefix: str


def _caller(context: ServerCallContext) -> Caller:
    caller = context.state.get(CALLER_STATE)
    assert isinstance(caller, Caller), "the endpoint authenticates before it dispatches"
    return caller


def _history_length(params: SendMessageRequest | GetTaskRequest) -> int | None:
    holder = params.configuration if isinstance(params, SendMessageRequest) else params
    return holder.history_length if holder.HasField("history_length") else None


def _input_of(message: Message) -> tuple[str, dict[str, Any]]:
    """The run's instruction (the message's text parts) and trigger data (its data parts, which
    must be objects: the agent's declared inputs, when it has some); a file part is refused, as
    is a message with neither text nor data."""
    texts: list[str] = []
    data: dict[str, Any] = {}
    for part in message.parts:
        kind = part.WhichOneof("content")
        if kind == "text":
            texts.append(part.text)
        elif kind == "data":
            value = MessageToDict(part.data)
            if not isinstance(value, dict):
                raise InvalidParamsError(message="A data part must be a JSON object.")
            data.update(value)
        else:
            raise ContentTypeNotSupportedError(
                message="Only text and data parts are accepted (no files)."
            )
    text = "\n\n".join(t for t in texts if t.strip())
    if not text and not data:
        raise InvalidParamsError(message="The message has no text or data part: say what to do.")
    return text, data


def _start(*, agent_id: uuid.UUID, text: str, data: dict[str, Any], context_id: str) -> TaskRow:
    agent = Agent.objects.get(pk=agent_id)
    context = {CONTEXT_KEY: context_id} if context_id else None
    outcome = run_start(agent=agent, input=text, data=data, via="a2a", platform_data=context)
    row = task_row(agent_id=agent_id, task_id=str(outcome.execution_id))
    assert row is not None  # just created, in this transaction
    return row


def _cancel(*, agent_id: uuid.UUID, task_id: str) -> TaskRow | None:
    row = task_row(agent_id=agent_id, task_id=task_id)
    if row is None:
        return None
    if row.state in FINAL_STATES - {TaskState.TASK_STATE_INPUT_REQUIRED}:
        raise TaskNotCancelableError(message=f"The task has already ended ({row.status}).")
    execution_cancel(
        execution=Execution.objects.get(pk=row.id), reason="Cancelled by the A2A client."
    )
    return task_row(agent_id=agent_id, task_id=task_id)


def _not_started(error: RunNotStarted) -> NoReturn:
    if error.code == "invalid_input":
        raise InvalidParamsError(message=error.message) from error
    raise InvalidRequestError(message=error.message, data={"reason": error.code}) from error


class AgentDeskRequestHandler(RequestHandler):
    """A2A requests on the caller's agent and its executions (see the module's docstring)."""

    async def _in_agency[T](self, caller: Caller, fn: Callable[..., T], **kwargs: Any) -> T:
        try:
            return await in_agency(caller.agency_id, fn, **kwargs)
        except (A2AError, RunNotStarted):
            raise
        except Exception as exc:
            # Logged here with its cause; the client is told no more (the SDK would send it
            # the exception's text: a database error names tables and values).
            logger.exception("A2A: %s failed for agent %s", fn.__name__, caller.agent_id)
            raise InternalError(message="Internal error; it was logged.") from exc

    async def _row(self, caller: Caller, task_id: str) -> TaskRow | None:
        return await self._in_agency(caller, task_row, agent_id=caller.agent_id, task_id=task_id)

    async def _wait(
        self,
        caller: Caller,
        row: TaskRow,
        *,
        seconds: float,
        done: Callable[[TaskRow], bool] = lambda row: row.settled,
        changed: Callable[[TaskRow], Awaitable[None]] | None = None,
    ) -> TaskRow:
        """Look at the task until ``done`` or ``seconds`` passed (``changed`` is told each new
        status); its last row."""
        deadline = time.monotonic() + seconds
        pause = _POLL_FIRST_S
        while not done(row):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 1.5, _POLL_MAX_S)
            latest = await self._row(caller, str(row.id))
            if latest is None:  # deleted meanwhile (the agent, the agency)
                raise TaskNotFoundError
            if changed is not None and (latest.status, latest.state) != (row.status, row.state):
                await changed(latest)
            row = latest
        return row

    async def _send(self, params: SendMessageRequest, context: ServerCallContext) -> TaskRow:
        caller = _caller(context)
        message = params.message
        if message.task_id:
            raise UnsupportedOperationError(
                message=(
                    "A task is not continued over A2A: an approval or a question is answered in "
                    "AgentDesk (the approvals inbox or the API). Send a message without taskId "
                    "to start a new task."
                )
            )
        text, data = _input_of(message)
        try:
            return await self._in_agency(
                caller,
                _start,
                agent_id=caller.agent_id,
                text=text,
                data=data,
                context_id=message.context_id,
            )
        except RunNotStarted as error:
            _not_started(error)

    @validate_request_params
    async def on_message_send(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> Task | Message:
        row = await self._send(params, context)
        if not params.configuration.return_immediately:
            row = await self._wait(
                _caller(context), row, seconds=settings.AGENTDESK_A2A_WAIT_SECONDS
            )
        return task_of(row, history_length=_history_length(params))

    async def _follow(
        self, caller: Caller, row: TaskRow, *, history_length: int | None = None
    ) -> AsyncGenerator[Event, None]:
        """The task, then each change of its status, its artefact when it completes; to the
        first settled state or ``AGENTDESK_A2A_STREAM_SECONDS``."""
        yield task_of(row, history_length=history_length)
        updates: asyncio.Queue[Event] = asyncio.Queue()

        async def changed(latest: TaskRow) -> None:
            artifact = output_artifact(latest)
            if artifact is not None:
                await updates.put(
                    TaskArtifactUpdateEvent(
                        task_id=str(latest.id),
                        context_id=latest.context_id,
                        artifact=artifact,
                        last_chunk=True,
                    )
                )
            await updates.put(
                TaskStatusUpdateEvent(
                    task_id=str(latest.id),
                    context_id=latest.context_id,
                    status=task_status(latest),
                )
            )

        waiting = asyncio.ensure_future(
            self._wait(caller, row, seconds=settings.AGENTDESK_A2A_STREAM_SECONDS, changed=changed)
        )
        try:
            while not (waiting.done() and updates.empty()):
                getter = asyncio.ensure_future(updates.get())
                await asyncio.wait({getter, waiting}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                else:
                    getter.cancel()
            waiting.result()  # its error, if any (the task gone)
        finally:
            waiting.cancel()

    @validate_request_params
    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        row = await self._send(params, context)
        async for event in self._follow(
            _caller(context), row, history_length=_history_length(params)
        ):
            yield event

    @validate_request_params
    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event, None]:
        caller = _caller(context)
        row = await self._row(caller, params.id)
        if row is None:
            raise TaskNotFoundError
        if row.settled:
            raise UnsupportedOperationError(
                message=f"The task is {row.status}: there is nothing to follow."
            )
        async for event in self._follow(caller, row):
            yield event

    @validate_request_params
    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        row = await self._row(_caller(context), params.id)
        return None if row is None else task_of(row, history_length=_history_length(params))

    @validate_request_params
    async def on_cancel_task(
        self, params: CancelTaskRequest, context: ServerCallContext
    ) -> Task | None:
        caller = _caller(context)
        row = await self._in_agency(caller, _cancel, agent_id=caller.agent_id, task_id=params.id)
        if row is None:
            return None
        # A run no worker holds ends at once; a running one at its worker's next check.
        row = await self._wait(
            caller,
            row,
            seconds=settings.AGENTDESK_A2A_WAIT_SECONDS,
            done=lambda row: row.state in FINAL_STATES - {TaskState.TASK_STATE_INPUT_REQUIRED},
        )
        return task_of(row)

    async def on_list_tasks(
        self, params: ListTasksRequest, context: ServerCallContext
    ) -> ListTasksResponse:
        raise UnsupportedOperationError(
            message="Tasks are listed in AgentDesk's API: GET /api/v1/agents/{id}/executions/."
        )

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        raise PushNotificationNotSupportedError

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        raise PushNotificationNotSupportedError

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        raise PushNotificationNotSupportedError

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        raise ExtendedAgentCardNotConfiguredError
