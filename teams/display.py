"""A run's agent-to-agent messages as a small table on its admin page, each with a link to the
run at the other end."""

from __future__ import annotations

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from agents.admin.common import EMPTY, run_link
from agents.models import AgentMessage, Execution
from teams.selectors import messages_of

SUMMARY_CHARS = 160
CELL = "text-align: left; vertical-align: top; padding: 2px 12px 2px 0; overflow-wrap: anywhere"


def _summary(message: AgentMessage) -> str:
    content = message.content if isinstance(message.content, dict) else {}
    text = content.get("instruction") or content.get("output") or content.get("error") or ""
    text = " ".join(str(text).split())
    return text if len(text) <= SUMMARY_CHARS else f"{text[: SUMMARY_CHARS - 1]}…"


def messages_table(execution: Execution) -> SafeString | str:
    rows = []
    for message in messages_of(execution.id):
        sent = message.from_execution_id == execution.id
        other_run = message.to_execution if sent else message.from_execution
        other_agent = message.to_agent if sent else message.from_agent
        rows.append(
            (
                "to" if sent else "from",
                other_agent.slug if other_agent is not None else EMPTY,
                run_link(other_run),
                message.get_message_type_display(),
                _summary(message),
                timezone.localtime(message.sent_at).strftime("%Y-%m-%d %H:%M:%S"),
            )
        )
    if not rows:
        return EMPTY
    body = format_html_join(
        "",
        f'<tr><td style="{CELL}">{{}} {{}}<br>{{}}</td><td style="{CELL}">{{}}</td>'
        f'<td style="{CELL}; overflow-wrap: anywhere">{{}}</td>'
        f'<td style="{CELL}">{{}}</td></tr>',
        rows,
    )
    head = "".join(
        f'<th style="{CELL}">{name}</th>' for name in ("Run", "Message", "Content", "Sent")
    )
    return format_html(
        '<table class="agent-messages" style="width: 100%">'
        "<thead><tr>{}</tr></thead><tbody>{}</tbody></table>",
        SafeString(head),
        body,
    )
