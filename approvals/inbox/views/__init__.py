"""The approvers' inbox (``/approvals/``): what waits for a person in the member's agency, one
approval or question with what led to it, and the decisions, inside the admin's frame.

Every view is behind ``admin.site.admin_view`` (approvals/inbox/urls.py): the admin's login,
staff only, never cached. The agency is the member's own (core.middleware); a superuser picks
one for the list as on the staff home (``?agency=<id>``), and may open any agency's item. Every
role may look; only admins and approvers decide (a POST by anyone else is a 403). Another
agency's item is a 404. Decisions go through the services (``approval_decide``,
``question_answer``), which lock the rows and refuse a second decision: a decision taken
elsewhere meanwhile shows as such on the item's page, never as an error page.

Deny, edit-and-approve and stopping a run each take a second step (a confirmation page with the
values carried over), which works without JavaScript and on any phone.

One module per page family: ``lists`` (the list, its live fragment, where an approver lands),
``approval_pages``, ``bulk`` (approve selected low-risk items), ``question_pages``; ``common``
holds who may decide and how a page renders.
"""

from approvals.inbox.views.approval_pages import (
    approval_approve,
    approval_deny,
    approval_detail,
    approval_edit,
)
from approvals.inbox.views.bulk import approval_bulk
from approvals.inbox.views.lists import admin_index, inbox, list_partial
from approvals.inbox.views.question_pages import question_detail, question_respond

__all__ = [
    "admin_index",
    "approval_approve",
    "approval_bulk",
    "approval_deny",
    "approval_detail",
    "approval_edit",
    "inbox",
    "list_partial",
    "question_detail",
    "question_respond",
]
