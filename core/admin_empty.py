"""What an admin list says while it has no rows: what will appear there and how to start, as the
inbox's own empty state does, instead of the theme's "This page yielded into no results".

A ModelAdmin sets ``empty_state = EmptyState(...)``; one template reads it for every list
(templates/unfold/helpers/empty_results.html, over django-unfold's). A list emptied by its
filters or search says so instead, with the way to reset them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EmptyState:
    title: str  # "No webhook yet"
    text: str  # what will be listed here, and how a person starts
    link_label: str = ""  # another page where one starts (beside the list's own Add button)
    link_url_name: str = ""  # its URL name, e.g. "admin:flow_expectedworkflow_changelist"
