"""Which play an agent gets, and its next step for a request."""

from __future__ import annotations

import datetime

from devkit.fake_server.demo.conversation import instruction, past_calls, team
from devkit.fake_server.demo.crm_plays import ASSISTANT, SDR
from devkit.fake_server.demo.data_plays import ANALYST, GUARDIAN, ORCHESTRATOR
from devkit.fake_server.demo.dataset_plays import DATASET_ANALYST
from devkit.fake_server.demo.situation import Action, Play, Situation, request_in_words
from devkit.fake_server.script import RecordedRequest

MAX_TOOL_CALLS = 8  # then it sums up whatever happened: a demo run never loops


def _plain_summary(s: Situation) -> str:
    return (
        f"(demo model: scripted, no AI) I have no tools to act with, so here is what I was asked: "
        f"{request_in_words(s.text)}. Give me tools (Tools and policies: allowed tools), or "
        "switch me to a real model (Model: LLM provider and model)."
    )


PLAIN = Play("plain", (), _plain_summary)


# The script of an agent: the first of these whose tool it was given (else a plain answer).
_PLAYS = (
    ("email_send", SDR),
    ("data_aggregate", ANALYST),
    ("trigger_workflow", ORCHESTRATOR),
    ("crm_search_contacts", ASSISTANT),
    ("crm_get_contact", ASSISTANT),
    ("data_query", GUARDIAN),
    ("execute_sql", DATASET_ANALYST),
)


def choose_play(tools: frozenset[str]) -> Play:
    """The script for an agent, by the tools it was given."""
    return next((play for tool, play in _PLAYS if tool in tools), PLAIN)


def next_action(request: RecordedRequest, *, now: datetime.datetime | None = None) -> Action | str:
    """The next tool call, or the final answer's text."""
    tools = frozenset(request.tool_names)
    situation = Situation(
        text=instruction(request),
        tools=tools,
        now=now or datetime.datetime.now(datetime.UTC),
        team=team(request),
        system=request.system or "",
        said=request.last_user_text,
    )
    play = choose_play(tools)
    done = past_calls(request)
    replay = list(done)
    for step in play.steps:
        action = step(situation)
        if action is None or action.tool not in tools:
            continue
        if replay:  # this step's call was made already: take its result and go on
            situation.calls.append(replay.pop(0))
            continue
        if len(done) >= MAX_TOOL_CALLS:
            break
        return action
    situation.calls.extend(replay)
    return play.summary(situation)
