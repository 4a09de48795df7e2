"""The admin sidebar (django-unfold's ``UNFOLD["SIDEBAR"]``): the models grouped by what staff come
for, each shown only to those its admin lets in (the same ``has_module_permission`` /
``has_view_permission`` Django's own app list asks), and the header's agency and role."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.contrib import admin
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse

from core.admin_scoping import is_member, request_membership
from core.models import Role

# (title, Material Symbols icon, model label); the icon font is served by unfold, no CDN.
Item = tuple[str, str, str]
GROUPS: list[tuple[str, list[Item]]] = [
    (
        "Agents & runs",
        [
            ("Agents", "smart_toy", "agents.Agent"),
            ("Executions", "play_circle", "agents.Execution"),
            ("Trigger log", "bolt", "agents.TriggerLog"),
            ("Webhooks", "webhook", "webhooks.Webhook"),
            ("Outbound webhooks", "send", "webhooks.Subscription"),
            ("Outbound deliveries", "outbox", "webhooks.Delivery"),
            ("Events", "podcasts", "core.Event"),
            ("Tools", "build", "tools.Tool"),
            ("MCP servers", "hub", "tools.McpServer"),
            ("Agent templates", "content_copy", "agents.AgentTemplate"),
            ("LLM providers", "dns", "agents.LLMProvider"),
        ],
    ),
    (
        "Run traces",
        [
            ("Execution steps", "format_list_numbered", "agents.ExecutionStep"),
            ("Tool calls", "handyman", "tools.ToolCall"),
            ("State transitions", "swap_horiz", "agents.StateTransition"),
            ("Decision points", "alt_route", "agents.DecisionPoint"),
            ("Agent messages", "forum", "agents.AgentMessage"),
        ],
    ),
    (
        "Flow analysis",
        [
            ("Expected workflows", "account_tree", "flow.ExpectedWorkflow"),
            ("Completeness", "fact_check", "flow.CompletenessAnalysis"),
            ("Loops caught", "repeat", "flow.LoopDetection"),
            ("Stuck runs", "hourglass_bottom", "flow.StuckRun"),
        ],
    ),
    (
        "Evaluations",
        [
            ("Datasets", "dataset", "evals.Dataset"),
            ("Test cases", "checklist", "evals.TestCase"),
            ("Experiments", "science", "evals.Experiment"),
            ("Canaries", "call_split", "evals.Canary"),
        ],
    ),
    (
        "Approvals",
        [
            ("Approvals", "approval", "approvals.Approval"),
            ("Risk rules", "policy", "approvals.RiskRule"),
        ],
    ),
    (
        "Memory",
        [
            ("Memories", "psychology", "memory.Memory"),
            ("Memory changes", "difference", "memory.MemoryChange"),
            ("Episodes", "history_edu", "memory.Episode"),
            ("Conversations", "chat", "memory.Conversation"),
            ("Learned patterns", "school", "memory.LearnedPattern"),
            ("Run qualities", "grade", "memory.RunQuality"),
            ("Investigations", "search_insights", "memory.Investigation"),
        ],
    ),
    (
        "Usage & budgets",
        [
            ("Daily usage", "monitoring", "usage.UsageDaily"),
            ("Usage periods", "date_range", "usage.UsagePeriod"),
            ("Budgets", "savings", "usage.Budget"),
            ("Evaluation budgets", "fact_check", "usage.EvaluationBudget"),
            ("Model prices", "sell", "usage.ModelPrice"),
        ],
    ),
    (
        "CRM data",
        [
            ("Contacts", "contacts", "crm.Contact"),
            ("Notes", "sticky_note_2", "crm.Note"),
            ("Tasks", "task_alt", "crm.Task"),
            ("Calendar events", "event", "crm.CalendarEvent"),
            ("Emails", "mail", "crm.EmailMessage"),
            ("Form submissions", "dynamic_form", "crm.FormSubmission"),
        ],
    ),
    (
        "Analysis data",
        [
            ("Analysis datasets", "table_chart", "datasets.Dataset"),
            ("Table results", "table_view", "datasets.DatasetResult"),
        ],
    ),
    (
        "Agency & access",
        [
            ("Agencies", "apartment", "core.Agency"),
            ("Sites", "language", "core.Site"),
            ("Members", "group", "core.Membership"),
            ("Invitations", "forward_to_inbox", "members.Invitation"),
            ("Single sign-on", "login", "sso.SsoProvider"),
            ("Sign-in identities", "fingerprint", "sso.SsoIdentity"),
            ("API keys", "key", "core.ApiKey"),
            ("Audit log", "history", "audit.AuditEntry"),
            ("Users", "person", "core.User"),
            ("Groups", "groups", "auth.Group"),
            ("User tokens", "token", "authtoken.TokenProxy"),
            ("Login lockouts", "lock_person", "axes.AccessAttempt"),
            ("MCP private addresses", "lan", "tools.McpAllowedAddress"),
        ],
    ),
    (
        "Schedules",
        [
            ("Periodic tasks", "schedule", "django_celery_beat.PeriodicTask"),
            ("Crontabs", "event_repeat", "django_celery_beat.CrontabSchedule"),
            ("Intervals", "timer", "django_celery_beat.IntervalSchedule"),
            ("Solar events", "wb_twilight", "django_celery_beat.SolarSchedule"),
            ("Clocked", "alarm", "django_celery_beat.ClockedSchedule"),
        ],
    ),
]
# Groups folded until one of their pages is open: looked at less often.
COLLAPSIBLE = frozenset({"Run traces", "Schedules"})
# The staff home (the admin index, live/).
HOME = {"title": "Home", "icon": "home"}
# The approvers' inbox (approvals/inbox/), with the count of what waits for a person.
INBOX = {"title": "Inbox", "icon": "inbox", "badge": "live.views.waiting_badge"}


def _changelist(label: str, request: HttpRequest) -> str | None:
    """The model's changelist URL if this user may see it, else None."""
    model = apps.get_model(label)
    model_admin = admin.site._registry.get(model)
    if model_admin is None:
        return None
    if not (
        model_admin.has_module_permission(request) and model_admin.has_view_permission(request)
    ):
        return None
    opts = model._meta
    try:
        return reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    except NoReverseMatch:
        return None


def sidebar_navigation(request: HttpRequest) -> list[dict[str, Any]]:
    """``UNFOLD["SIDEBAR"]["navigation"]``: the groups with the items this user may open."""
    home = reverse("admin:index")
    membership = request_membership(request)
    if membership is not None and membership.role == Role.APPROVER:
        home += "?home"  # the index sends approvers on to the inbox (approvals.inbox.views)
    top: list[dict[str, Any]] = [{**HOME, "link": home}]
    if is_member(request):
        inbox = reverse("approvals_inbox:list")
        # unfold marks a link active when its path is in the page's: /admin/approvals/ too.
        top.append({**INBOX, "link": inbox, "active": request.path.startswith(inbox)})
    groups: list[dict[str, Any]] = [{"items": top}]
    for title, items in GROUPS:
        entries = []
        for name, icon, label in items:
            link = _changelist(label, request)
            if link is None:
                continue
            entries.append({"title": name, "icon": icon, "link": link})
        if entries:
            groups.append({"title": title, "collapsible": title in COLLAPSIBLE, "items": entries})
    return groups


def site_subheader(request: HttpRequest) -> str:
    """Under "AgentDesk" in the sidebar: whose admin this is."""
    membership = request_membership(request)
    if membership is not None:
        return f"{membership.agency.name} · {membership.get_role_display()}"
    return "Platform (superuser)" if request.user.is_superuser else ""
