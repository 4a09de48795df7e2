"""``/approvals/``: the approvers' inbox. Every view is behind the admin's login (staff only,
never cached), as the admin's own pages are."""

from django.contrib import admin
from django.urls import path

from approvals.inbox import views

app_name = "approvals_inbox"

guard = admin.site.admin_view

urlpatterns = [
    path("", guard(views.inbox), name="list"),
    path("partials/list/", guard(views.list_partial), name="list-partial"),
    path("approve-selected/", guard(views.approval_bulk), name="approve-selected"),
    path("<uuid:approval_id>/", guard(views.approval_detail), name="approval"),
    path("<uuid:approval_id>/approve/", guard(views.approval_approve), name="approval-approve"),
    path("<uuid:approval_id>/deny/", guard(views.approval_deny), name="approval-deny"),
    path("<uuid:approval_id>/edit/", guard(views.approval_edit), name="approval-edit"),
    path("questions/<uuid:question_id>/", guard(views.question_detail), name="question"),
    path(
        "questions/<uuid:question_id>/answer/",
        guard(views.question_respond),
        name="question-answer",
    ),
]
