"""What the approvers' inbox reads: the approvals and questions that wait for a person in one
agency, those decided lately, one item with what led to it.

Every list selector takes the agency and filters on it explicitly, so it returns nothing of
another agency even where row-level security lets the request see every agency (a superuser's);
callers also run them inside that agency's tenant context (:func:`inbox_scope`). By-id reads go
through :func:`access_approval` / :func:`access_question`: another agency's item and a missing
one are the same 404.

``lists`` holds the list queries, ``item`` the by-id reads and an item's run context, ``common``
the tenant scope, times in words and the items' URLs.
"""

from approvals.inbox.selectors.common import (
    action_in_words,
    age,
    approval_url,
    expires_in,
    inbox_scope,
    question_url,
)
from approvals.inbox.selectors.item import (
    RunContext,
    StepLine,
    access_approval,
    access_question,
    failed_calls_of_correction,
    run_context,
)
from approvals.inbox.selectors.lists import (
    CHIP_VALUES,
    Chip,
    InboxCounts,
    InboxItem,
    ItemKind,
    chips,
    decided_items,
    in_chip,
    pending_counts,
    pending_items,
)

__all__ = [
    "CHIP_VALUES",
    "Chip",
    "InboxCounts",
    "InboxItem",
    "ItemKind",
    "RunContext",
    "StepLine",
    "access_approval",
    "access_question",
    "action_in_words",
    "age",
    "approval_url",
    "chips",
    "decided_items",
    "expires_in",
    "failed_calls_of_correction",
    "in_chip",
    "inbox_scope",
    "pending_counts",
    "pending_items",
    "question_url",
    "run_context",
]
