"""Episodes and conversations (memory/episodes.py, memory/conversations.py): each finished run
leaves an episode (trigger, situation, actions, outcome), completed after the run (embedded,
lessons) and found again as a similar past situation; conversations keep a window per session,
contact or user, and expired ones are not continued and are deleted on beat."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable

import pytest
from django.utils import timezone

from agents.models import Agent, ExecutionStatus, TriggerType
from core import tenancy
from crm.models import Contact
from devkit.fake_server import FakeProviderServer
from devkit.fake_server.script import by_turn, text_reply, tool_call_reply
from memory import conversations
from memory.conversations import ConversationKey, conversation_append, conversation_key
from memory.episodes import episode_complete
from memory.models import ContextType, Conversation, Episode, EpisodeOutcome
from memory.search import search_episodes
from tests.agents.factories import AgentFactory, ExecutionFactory
from tests.factories import UserFactory
from tests.memory.factories import ConversationFactory
from tests.memory.runs import complete_episode, run_to_end


def test_a_finished_run_leaves_an_episode_found_later_as_a_similar_situation(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    agent = make_agent(allowed_tools=["crm_get_contact"])
    with tenancy.agency_context(agent.agency_id):
        Contact.objects.create(agency_id=agent.agency_id, first_name="Ada", email="ada@x.io")
    fake_llm_server.set_responder(
        by_turn(
            tool_call_reply("crm_get_contact", {"email": "ada@x.io"}),
            text_reply("Ada's phone number is on file."),
        ),
        key=agent.llm_model,
    )

    execution = run_to_end(agent, "Find Ada Lovelace's phone number in the CRM.")
    with tenancy.agency_context(agent.agency_id):
        written = Episode.objects.get(execution_id=execution.id)
    assert written.trigger_event == TriggerType.MANUAL
    assert written.context_summary == "Find Ada Lovelace's phone number in the CRM."
    assert written.actions_taken == [{"tool": "crm_get_contact", "status": "completed"}]
    assert written.outcome == EpisodeOutcome.SUCCESS
    assert written.outcome_details == "Ada's phone number is on file."
    assert written.embedding_model == ""  # completed after the run, off its path

    episode = complete_episode(execution)

    assert episode.embedding_model
    with tenancy.agency_context(agent.agency_id):
        (hit,) = search_episodes(agent=agent, query="look up a contact's telephone", k=1)
    assert hit.episode.id == episode.id
    assert hit.similarity > 0.3


def test_a_failed_run_leaves_a_failure(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    agent = make_agent(max_steps_per_run=1)
    fake_llm_server.set_responder(
        lambda request: tool_call_reply("crm_search_contacts", {"query": "ada"}),
        key=agent.llm_model,
    )

    execution = run_to_end(agent, "Look for Ada.")

    assert execution.status == ExecutionStatus.FAILED
    with tenancy.agency_context(agent.agency_id):
        episode = Episode.objects.get(execution_id=execution.id)
    assert episode.outcome == EpisodeOutcome.FAILURE
    assert "max_steps_per_run" in episode.outcome_details


def test_an_episode_is_completed_once(
    make_agent: Callable[..., Agent], fake_llm_server: FakeProviderServer
) -> None:
    agent = make_agent()
    fake_llm_server.set_responder(lambda request: text_reply("Hi."), key=agent.llm_model)
    execution = run_to_end(agent, "Say hi.")
    complete_episode(execution)

    again = episode_complete(execution.id, agency_id=agent.agency_id)

    assert again in {"in progress", "done already"}


# --- conversations -------------------------------------------------------------------------------

SESSION = "5d0b0c8e-8c1e-4c56-9a3f-0d7a2b4c1e11"


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("trigger_data", "user", "expected"),
    [
        ({"session_id": SESSION, "contact_id": str(uuid.UUID(int=7))}, True, ("session", SESSION)),
        ({"event_type": "crm.contact.created", "payload": {"contact_id": str(uuid.UUID(int=7))}},
         False, ("entity", str(uuid.UUID(int=7)))),
        ({"session_id": "not a uuid"}, False, None),
        ({}, True, ("user", "user")),
        ({}, False, None),
    ],
)  # fmt: skip
def test_a_run_continues_the_conversation_its_trigger_names(
    trigger_data: dict[str, object], user: bool, expected: tuple[str, str] | None
) -> None:
    agent = AgentFactory.create()
    person = UserFactory.create() if user else None
    with tenancy.agency_context(agent.agency_id):
        execution = ExecutionFactory.create(
            agent=agent, trigger_data=trigger_data, triggered_by=person
        )

    key = conversation_key(execution)

    if expected is None:
        assert key is None
        return
    assert key is not None
    assert key.context_type == expected[0]
    if expected[1] == "user":
        assert person is not None
        assert key.context_id == uuid.UUID(int=person.pk)
    else:
        assert str(key.context_id) == expected[1]


@pytest.mark.django_db
def test_a_conversation_keeps_its_window_and_its_expiry_moves_on() -> None:
    agent = AgentFactory.create(conversation_window=4, conversation_ttl_hours=2)
    key = ConversationKey(ContextType.SESSION, uuid.uuid4(), "session")
    with tenancy.agency_context(agent.agency_id):
        for n in range(3):
            conversation = conversation_append(
                agent=agent,
                key=key,
                messages=[
                    {"role": "user", "content": f"question {n}"},
                    {"role": "assistant", "content": f"answer {n}"},
                ],
                tokens=10,
            )
        window = conversations.conversation_window(agent=agent, key=key)

    assert [m["content"] for m in conversation.messages] == [
        "question 1", "answer 1", "question 2", "answer 2",
    ]  # fmt: skip
    assert conversation.message_count == 6
    assert conversation.tokens_used == 30
    assert conversation.expires_at is not None
    assert conversation.expires_at > timezone.now() + datetime.timedelta(minutes=119)
    assert window == conversation.messages


@pytest.mark.django_db
def test_an_expired_conversation_is_not_continued_and_is_deleted_on_beat() -> None:
    agent = AgentFactory.create()
    key = ConversationKey(ContextType.ENTITY, uuid.uuid4(), "contact")
    past = timezone.now() - datetime.timedelta(minutes=1)
    with tenancy.agency_context(agent.agency_id):
        expired = ConversationFactory.create(
            agent=agent,
            context_type=key.context_type,
            context_id=key.context_id,
            messages=[{"role": "user", "content": "old"}],
            expires_at=past,
        )
        live = ConversationFactory.create(
            agent=agent, expires_at=timezone.now() + datetime.timedelta(hours=1)
        )
        assert conversations.conversation_window(agent=agent, key=key) == []
        fresh = conversation_append(
            agent=agent, key=key, messages=[{"role": "user", "content": "new"}]
        )
    assert fresh.pk != expired.pk

    deleted = conversations.conversations_purge_expired()

    assert deleted >= 1
    with tenancy.agency_context(agent.agency_id):
        left = set(Conversation.objects.filter(agent=agent).values_list("pk", flat=True))
    assert left == {live.pk, fresh.pk}
