"""A run's history as sent to the model, bounded by the agent's ``context_token_budget``
(issue 17; seed 002's thread history window).

The messages of a run are its head (system prompt, the recent conversation it started with, the
instruction) and then its turns: a model reply with the results of its tool calls (and what the
run observed after them). Each turn is one unit: a tool call is never sent without its result,
nor a result without its call. Once head + turns would exceed the budget, the oldest turns are
summarised by the model (:func:`summary_request`; the summary is a ``reflect`` step of the run,
its tokens and cost counted like any model call) and the request carries the summary with the
instruction, then the turns since. The window keeps only sizes and offsets and measures each
message once, when it is new: no query and no walk of the whole history per model call.

Sizes are estimated at four characters a token (as the budget reservation does): the provider's
tokenizer is not at hand before the call. The tool definitions are not counted (they are the
same on every call).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agents.llm import Message

CHARS_PER_TOKEN = 4
# A message's role, ids and framing on the wire, roughly.
MESSAGE_OVERHEAD_CHARS = 16
# After a summary the turns kept verbatim take at most this share of the budget: room to grow
# before the next summary, so that summaries come every few steps, not at every one.
KEEP_SHARE = 0.5
# The summary's own share of the budget (the summary call's max_tokens), and its floor.
SUMMARY_SHARE = 0.125
SUMMARY_MIN_TOKENS = 256
# One message larger than this share of the budget (a huge tool result) is shortened in the
# request, so that even the latest turn alone cannot overflow it. Persisted in full.
MESSAGE_SHARE = 0.25
# What the summariser is shown of one tool call's arguments and of one message.
SUMMARY_INPUT_ARGUMENTS = 500
SUMMARY_INPUT_MESSAGE = 2000

SUMMARY_HEADER = "## Summary of your earlier steps in this run"
SUMMARISER_PROMPT = (
    "You condense the transcript of an AI agent's run so that the agent can go on without it. "
    "Write one summary that merges the summary so far (if any) with the new steps: what the "
    "agent did, which tools it called with which key arguments, the results that matter "
    "(identifiers, names, numbers, errors) and what is still to be done. Keep every identifier "
    "exactly as written. Write in the second person ('You looked up...'), plain text, no "
    "preamble, at most {words} words."
)


def message_chars(message: Message) -> int:
    calls = sum(len(c.name) + len(c.raw_arguments) + len(c.id) for c in message.tool_calls)
    return len(message.content) + calls + MESSAGE_OVERHEAD_CHARS


def request_chars(messages: Sequence[Message]) -> int:
    """A request's estimated size (what the window keeps under its budget)."""
    return sum(message_chars(m) for m in messages)


class ContextWindow:
    """The window of one run (kept by its ``_Run``; rebuilt on resume from the persisted steps).

    ``budget_tokens`` 0: no limit, every request is the whole history. ``head``: how many of the
    run's first messages are its head (system prompt ... instruction, the last of them).
    """

    def __init__(self, budget_tokens: int, *, head: int) -> None:
        self.budget = budget_tokens * CHARS_PER_TOKEN  # in characters
        self.head = head
        self.cap = int(self.budget * MESSAGE_SHARE)  # a longer message is shortened (0: none)
        self.seen = 0  # messages measured so far
        self.head_chars = 0
        self.starts: list[int] = []  # where each turn starts in the message list
        self.sizes: list[int] = []  # each turn's size (a shortened message at its cap)
        self.tail_chars = 0  # the sizes of the turns not summarised
        self.oversized: set[int] = set()  # indices of messages the request shortens
        self.summary = ""
        self.summarised = 0  # turns the summary covers
        self.summaries = 0  # summary calls of this run (model calls that are not steps)

    @property
    def limited(self) -> bool:
        return self.budget > 0

    @property
    def tokens(self) -> int:
        """The estimated size of the next request, as measured by the last :meth:`due`."""
        return (self.head_chars + self._summary_chars() + self.tail_chars) // CHARS_PER_TOKEN

    @property
    def summary_tokens(self) -> int:
        return max(SUMMARY_MIN_TOKENS, int(self.budget / CHARS_PER_TOKEN * SUMMARY_SHARE))

    def restore(self, *, summary: str, turns: int, summaries: int) -> None:
        """The state a resumed run had (its latest summary and the turns it covers), before
        any message is measured."""
        assert self.seen == 0, "restore before measuring"
        self.summary = summary or f"({turns} earlier steps are not shown.)"
        self.summarised = turns
        self.summaries = summaries

    def _measure(self, messages: Sequence[Message]) -> None:
        """Measure the messages added since the last call (the list only grows)."""
        for index in range(self.seen, len(messages)):
            message = messages[index]
            size = message_chars(message)
            if self.cap and len(message.content) > self.cap:
                self.oversized.add(index)
                size -= len(message.content) - self.cap
            if index < self.head:
                self.head_chars += size
                continue
            if message.role == "assistant" or not self.starts:
                self.starts.append(index)
                self.sizes.append(0)
            self.sizes[-1] += size
            if len(self.sizes) > self.summarised:
                self.tail_chars += size
        self.seen = len(messages)

    def _summary_chars(self) -> int:
        return len(self.summary) + len(SUMMARY_HEADER) + 2 if self.summary else 0

    def due(self, messages: Sequence[Message]) -> tuple[list[Message], int] | None:
        """The turns to summarise before the next request (oldest first, as messages) and how
        many turns the new summary will cover; None when the request fits as it is."""
        self._measure(messages)
        if not self.limited:
            return None
        if self.head_chars + self._summary_chars() + self.tail_chars <= self.budget:
            return None
        room = self.budget - self.head_chars - self.summary_tokens * CHARS_PER_TOKEN
        target = max(0, min(int(self.budget * KEEP_SHARE), room))
        covered, tail = self.summarised, self.tail_chars
        last = len(self.starts) - 1  # the latest turn is always sent as it is
        while covered < last and tail > target:
            tail -= self.sizes[covered]
            covered += 1
        if covered <= self.summarised:
            return None  # nothing older than the latest turn left to fold in
        return list(messages[self.starts[self.summarised] : self.starts[covered]]), covered

    def summarised_into(self, summary: str, turns: int) -> None:
        self.tail_chars -= sum(self.sizes[self.summarised : turns])
        self.summary = summary or f"({turns} earlier steps are not shown.)"
        self.summarised = turns
        self.summaries += 1
        if self.oversized and turns < len(self.starts):
            self.oversized = {i for i in self.oversized if i < self.head or i >= self.starts[turns]}

    def _tail_start(self, messages: Sequence[Message]) -> int:
        return self.starts[self.summarised] if self.summarised < len(self.starts) else len(messages)

    def request(self, messages: list[Message]) -> list[Message]:
        """What the next model call sends: the whole history while it fits (the list itself, no
        copy), else the head with the summary in the instruction, then the turns since; a
        message too long for the budget shortened."""
        if not self.summarised and not self.oversized:
            return messages
        if not self.summarised:
            sent = list(messages)
            for index in self.oversized:
                sent[index] = _shortened(sent[index], self.cap)
            return sent
        last_of_head = self.head - 1
        tail_start = self._tail_start(messages)
        instruction = messages[last_of_head]
        if last_of_head in self.oversized:
            instruction = _shortened(instruction, self.cap)
        head = list(messages[:last_of_head])
        head.append(Message.user(f"{instruction.content}\n\n{SUMMARY_HEADER}\n{self.summary}"))
        sent = head + messages[tail_start:]
        for index in self.oversized:
            if index < last_of_head:
                sent[index] = _shortened(sent[index], self.cap)
            elif index >= tail_start:
                position = index - tail_start + len(head)
                sent[position] = _shortened(sent[position], self.cap)
        return sent


def _shortened(message: Message, cap: int) -> Message:
    if len(message.content) <= cap:
        return message
    kept = max(0, cap - 200)
    left = len(message.content) - kept
    content = (
        f"{message.content[:kept]}\n[... {left} more characters not shown: too long for the "
        "agent's context budget]"
    )
    return Message(
        role=message.role,
        content=content,
        tool_calls=message.tool_calls,
        tool_call_id=message.tool_call_id,
        is_error=message.is_error,
    )


def summary_request(
    *, instruction: str, previous: str, turns: Sequence[Message], words: int
) -> list[Message]:
    """The summariser's request: the earlier summary and the turns to fold into it."""
    names = {call.id: call.name for m in turns for call in m.tool_calls}
    lines: list[str] = []
    for message in turns:
        if message.role == "assistant":
            if message.content:
                lines.append(f"You: {_clip(message.content, SUMMARY_INPUT_MESSAGE)}")
            for call in message.tool_calls:
                arguments = _clip(call.raw_arguments, SUMMARY_INPUT_ARGUMENTS)
                lines.append(f"You called {call.name}({arguments})")
        elif message.role == "tool":
            name = names.get(message.tool_call_id or "", "a tool")
            outcome = "failed" if message.is_error else "returned"
            lines.append(f"{name} {outcome}: {_clip(message.content, SUMMARY_INPUT_MESSAGE)}")
        else:
            lines.append(f"{message.role}: {_clip(message.content, SUMMARY_INPUT_MESSAGE)}")
    parts = [f"## The run's instruction\n{_clip(instruction, SUMMARY_INPUT_MESSAGE)}"]
    if previous:
        parts.append(f"## Summary so far\n{previous}")
    parts.append("## New steps\n" + "\n".join(lines))
    return [
        Message.system(SUMMARISER_PROMPT.format(words=words)),
        Message.user("\n\n".join(parts)),
    ]


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit} more]"


def summary_record(*, turns: int, through_step: int) -> dict[str, Any]:
    """``llm_response`` of a summary step: the turns, from the run's first, it covers."""
    return {"context_summary": {"turns": turns, "through_step": through_step}}


def summary_turns(llm_response: object) -> int | None:
    """The turns a persisted summary step covers (None: not a summary step)."""
    if not isinstance(llm_response, dict):
        return None
    record = llm_response.get("context_summary")
    if not isinstance(record, dict):
        return None
    turns = record.get("turns")
    return turns if isinstance(turns, int) and turns >= 0 else None
