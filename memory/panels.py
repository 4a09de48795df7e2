"""The agent page's memory panel (registered by memory/admin.py): how many memories, episodes
and conversations the agent has, with links to each list."""

from __future__ import annotations

from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from agents.admin.common import changelist_url
from agents.models import Agent
from memory.models import Conversation, Episode, Memory


def memory_panel(agent: Agent) -> SafeString:
    """What the agent remembers, with links to each list."""
    now = timezone.now()
    memories = Memory.objects.filter(agent=agent)
    counts = [
        (Memory, "memories", memories.count()),
        (Episode, "episodes", Episode.objects.filter(agent=agent).count()),
        (Conversation, "conversations", Conversation.objects.filter(agent=agent).count()),
    ]
    expired = memories.filter(expires_at__lte=now).count()
    expired_note = f" ({expired} of them expired)" if expired else ""
    items = SafeString(
        "".join(
            format_html(
                '<dt>{}</dt><dd><a href="{}">{}</a></dd>',
                name.capitalize(),
                changelist_url(model, agent__id__exact=agent.pk),
                count,
            )
            for model, name, count in counts
        )
    )
    return format_html(
        '<div class="agent-panel"><dl>{}</dl><p>Each run starts with the agent\'s unexpired '
        "memories most relevant to its instruction or event and its most similar past runs, "
        "within the memory token budget below. A wrong memory can be deleted from the "
        "list{}; episodes and conversations are the history runs leave.</p></div>",
        items,
        expired_note,
    )
